"""A clone's first checkout writes its parts from several threads when no content filter applies
(firstcheckout.py): the work tree and the index must be exactly those of one checkout."""

from __future__ import annotations

import stat
import threading
from pathlib import Path

import pygit2
import pytest

from memsync.git import filters, firstcheckout
from memsync.git.hubtree import tree_totals
from tests.conftest import Cli, git, hub_tree, write


@pytest.fixture
def checkouts(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The thread each libgit2 checkout call of a first checkout ran on."""
    names: list[str] = []
    real = filters.checkout

    def spy(*args, **kwargs):  # type: ignore[no-untyped-def]
        names.append(threading.current_thread().name)
        return real(*args, **kwargs)

    monkeypatch.setattr(filters, "checkout", spy)
    return names


def _many(root: Path, tops: int = 12, per: int = 5) -> None:
    for t in range(tops):
        for f in range(per):
            write(root, f"t{t:02d}/sub/n{f}.md", f"note {t}.{f}\n")
    write(root, "a.md", "top file\n")
    write(root, "a-b/c.md", "c\n")
    write(root, "tool.sh", "#!/bin/sh\n")
    (root / "tool.sh").chmod(0o755)


def test_a_clone_checked_out_by_several_threads_is_exactly_one_checkouts(
        memory: Path, tmp_path: Path, cli: Cli, checkouts: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    _many(memory)
    assert cli("push", cwd=memory).code == 0
    monkeypatch.setenv("MEMSYNC_CHECKOUT_PART_FILES", "7")
    monkeypatch.setenv("MEMSYNC_CHECKOUT_THREADS", "3")
    dest = tmp_path / "copy"
    r = cli("clone", "research", str(dest), cwd=tmp_path)
    assert r.code == 0, r.err

    assert len(set(checkouts)) == 3 and len(checkouts) > 3  # three threads, several parts each
    on_hub = hub_tree()
    on_disk = {p.relative_to(dest).as_posix(): p.read_bytes() for p in dest.rglob("*")
               if p.is_file() and not p.relative_to(dest).as_posix().startswith((".git/", ".vm0/"))}
    assert on_disk == on_hub
    assert (dest / "tool.sh").stat().st_mode & stat.S_IXUSR
    repo = pygit2.Repository(str(dest))
    assert sorted(e.path for e in repo.index) == sorted(on_hub)
    assert repo.status() == {}
    # every entry carries the stat data of the file written, as one checkout leaves it: a later
    # status compares stat data instead of reading each file
    debug = git("ls-files", "--debug", cwd=dest)
    sizes = [int(line.split("size: ")[1].split()[0]) for line in debug.splitlines() if "size: " in line]
    assert len(sizes) == len(on_hub) and all(sizes)
    assert "mtime: 0:0" not in debug
    assert git("status", "--porcelain", cwd=dest) == ""
    write(dest, "t05/sub/n1.md", "changed\n")
    assert cli("push", cwd=dest).code == 0
    assert hub_tree()["t05/sub/n1.md"] == b"changed\n"


def test_a_version_that_needs_filters_is_checked_out_by_one_thread(
        memory: Path, tmp_path: Path, cli: Cli, checkouts: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    _many(memory)
    write(memory, ".gitattributes", "*.md text eol=crlf\n")  # a filter: the order of writing matters
    assert cli("push", cwd=memory).code == 0
    monkeypatch.setenv("MEMSYNC_CHECKOUT_PART_FILES", "7")
    monkeypatch.setenv("MEMSYNC_CHECKOUT_THREADS", "3")
    dest = tmp_path / "copy"
    assert cli("clone", "research", str(dest), cwd=tmp_path).code == 0
    assert set(checkouts) == {threading.main_thread().name} and len(checkouts) > 1
    assert (dest / "t03/sub/n2.md").read_bytes() == b"note 3.2\r\n"


def test_a_thread_that_fails_fails_the_checkout_and_no_index_is_written(tmp_path: Path) -> None:
    source = tmp_path / "source"
    source.mkdir()
    _many(source)
    git("init", "-q", "-b", "main", cwd=source)
    git("add", "-A", cwd=source)
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "v1", cwd=source)
    work = tmp_path / "work"
    git("init", "-q", str(work), cwd=tmp_path)
    git("fetch", "-q", str(source), "main:refs/remotes/src/main", cwd=work)
    write(work, "t11/sub/n4.md", "in the way\n")  # in the last run's part: that thread meets a conflict
    repo = pygit2.Repository(str(work))
    tree = repo.revparse_single("refs/remotes/src/main").peel(pygit2.Tree)
    totals: dict[str, tuple[int, int]] = {}
    tree_totals(repo, tree, totals)
    with pytest.raises(pygit2.GitError, match="conflict"):
        firstcheckout.write_all(repo, tree, totals, filtered=False, threads=3)
    assert (work / "t11/sub/n4.md").read_text() == "in the way\n"  # nothing overwritten
    assert not (work / ".git" / "index").exists()
    assert len(repo.index) == 0  # and nothing of the other threads' parts is left to be written later


def test_runs_are_contiguous_and_balanced() -> None:
    counted = [(f"d{i:02d}", n) for i, n in enumerate([500, 10, 10, 480, 1, 1, 300, 200, 498])]
    runs = firstcheckout._runs(counted, 2)
    assert [name for run in runs for name, _ in run] == [name for name, _ in counted]
    sizes = [sum(n for _, n in run) for run in runs]
    assert len(runs) == 2 and max(sizes) - min(sizes) < 500
    assert firstcheckout._runs(counted, 1) == []
    assert len(firstcheckout._runs(counted[:1], 4)) == 1  # one top-level entry: one run
