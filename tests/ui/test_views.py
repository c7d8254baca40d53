"""What the views read, on the shared world's hub, without a server: pages of versions, the size
chart's sums against git's own sizes, a run's versions, a file's history."""

from __future__ import annotations

import pytest

from memsync.git.repo import GitRepo
from memsync.ui import chart, views
from tests.ui.conftest import RUN1, RUN2, World, git_out

pytestmark = pytest.mark.slow  # the shared world is built by real `memsync run`s (a few seconds, once)


def _sizes(world: World, oid: str, path: str | None = None) -> int:
    listing = git_out(world.hub, "ls-tree", "-r", "-l", oid, *([path] if path else [])).splitlines()
    return sum(int(line.split()[3]) for line in listing)


def test_the_timeline_pages_through_every_version_once(world: World) -> None:
    git = GitRepo.bare(world.hub)
    first = views.timeline(git, world.versions[0], 0, per=2)
    second = views.timeline(git, world.versions[0], 1, per=2)
    assert first.more and not second.more
    assert [r.oid for r in first.rows + second.rows] == world.versions
    assert [r.run_id for r in first.rows] == [RUN2, RUN1]
    assert first.rows[0].flags == ["shrink crdts.md 7285->1509"] and first.rows[0].exit_code == 0


def test_the_charts_sizes_are_the_trees_sizes(world: World) -> None:
    drawn = chart.size_chart(GitRepo.bare(world.hub), world.versions[0], 10, "crdts.md")
    assert [p.oid for p in drawn.points] == world.versions[::-1]
    assert [p.size for p in drawn.points] == [_sizes(world, oid) for oid in world.versions[::-1]]
    assert [p.fsize for p in drawn.points] == [7285, 7285, 1509]
    assert [bool(p.shrink) for p in drawn.points] == [False, False, True]


def test_a_files_history_and_a_runs_versions(world: World) -> None:
    git = GitRepo.bare(world.hub)
    found = views.file_history(git, world.versions[0], "crdts.md", 0)
    assert [(r.state, r.size) for r in found.rows] == [("modified", 1509), ("added", 7285)]
    assert views.flags_naming(found.rows[0], "crdts.md") == ["shrink crdts.md 7285->1509"]
    run = views.run(git, world.versions[0], RUN2)
    assert [r.oid for r in run.rows] == [world.versions[0]] and run.result is not None
