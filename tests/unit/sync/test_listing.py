"""sync/listing: which of a hub's branches are memories, and the pages `list` shows (prefix,
after, limit), on a real embedded hub."""

from __future__ import annotations

from pathlib import Path

import pygit2
import pytest

from memsync.errors import UsageError
from memsync.sync import listing
from tests.conftest import hub_path


def test_memory_names_come_from_memory_and_artifact_branches_only() -> None:
    refs = ["refs/heads/memory/research", "refs/heads/artifact/build-out", "refs/heads/memory/research",
            "refs/heads/proposals/research/r1", "refs/heads/main", "refs/tags/memory/x",
            "refs/memsync/queue/memory/research/000000000001"]
    assert listing.memory_names(refs) == ["build-out", "research"]


def _more_memories(*names: str) -> None:
    """More memories on the embedded hub, each a branch at `research`'s version."""
    hub = pygit2.Repository(str(hub_path()))
    tip = hub.references["refs/heads/memory/research"].target
    for name in names:
        hub.references.create(f"refs/heads/memory/{name}", tip)


def test_pages_by_prefix_after_and_limit(memory: Path) -> None:
    _more_memories("team-a-one", "team-a-two", "team-b-one")
    assert [m.name for m in listing.list_page().memories] == ["research", "team-a-one", "team-a-two", "team-b-one"]
    assert [m.name for m in listing.list_page(prefix="team-a-").memories] == ["team-a-one", "team-a-two"]
    first = listing.list_page(limit=2)
    assert [m.name for m in first.memories] == ["research", "team-a-one"] and first.more == "team-a-one"
    rest = listing.list_page(after=first.more, limit=2)
    assert [m.name for m in rest.memories] == ["team-a-two", "team-b-one"] and rest.more is None
    info = rest.memories[0]
    assert info.type == "memory" and info.files == 2 and info.error is None


@pytest.mark.parametrize(("prefix", "after", "limit", "says"), [
    ("Team", None, None, "--prefix"), ("", "../x", None, "--after"), ("", None, 0, "--limit 0")])
def test_a_bad_page_is_a_usage_error(prefix: str, after: str | None, limit: int | None, says: str) -> None:
    with pytest.raises(UsageError, match=says):
        listing.check_page(prefix, after, limit)
