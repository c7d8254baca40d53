"""The exchange loop itself (memsync/sync/exchange.py: sync), called directly on real memories and
a real embedded hub: fast-forward, a lost race merged once, retries folded into one merge, fetch
without push, a refused version, and patience running out with the version kept."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from memsync.core import snapshot
from memsync.core.attribution import operator
from memsync.core.memory import open_memory
from memsync.errors import RepoError
from memsync.sync import exchange
from tests.conftest import Cli, git, hub_path, hub_tree, write

BRANCH = "memory/research"


def _commit(root: Path, rel: str, text: str) -> str:
    """A version made as memsync makes one (the snapshot pipeline), not pushed."""
    write(root, rel, text)
    mem = open_memory(root)
    with mem.locked():
        snap = snapshot.take(mem, operator(f"write {rel}"))
    assert snap.commit is not None
    return snap.commit


def _hub_tip() -> str:
    return git("rev-parse", BRANCH, cwd=hub_path()).strip()


def _sync(root: Path, **options: object) -> exchange.Exchange:
    mem = open_memory(root)
    with mem.locked():
        return exchange.converge(mem, operator("sync"), lambda: None, **options)  # type: ignore[arg-type]


def _rivals_before_each_push(monkeypatch: pytest.MonkeyPatch, memory: Path, other: Path,
                             names: Iterator[str]) -> None:
    """Before each push attempt of `memory` (the first, leased one and every later one), another
    writer lands a version of its own on the hub, while names last."""
    real_ahead, real_push = exchange._push_ahead, exchange._push_once

    def rival_lands(mem: object) -> None:
        name = next(names, None) if mem.root == memory else None  # type: ignore[attr-defined]
        if name is not None:
            _commit(other, f"notes/{name}.md", f"{name}\n")
            assert _sync(other).pushed

    def ahead_after_a_rival(*args: object, **kwargs: object) -> str | None:
        rival_lands(args[0])
        return real_ahead(*args, **kwargs)  # type: ignore[arg-type]

    def push_after_a_rival(*args: object, **kwargs: object) -> None:
        rival_lands(args[0])
        real_push(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(exchange, "_push_ahead", ahead_after_a_rival)
    monkeypatch.setattr(exchange, "_push_once", push_after_a_rival)


@pytest.fixture
def other(memory: Path, tmp_path: Path, cli: Cli) -> Path:
    dest = tmp_path / "other"
    assert cli("clone", "research", str(dest)).code == 0
    return dest


def test_ahead_of_the_hub_is_a_fast_forward_push(memory: Path) -> None:
    mine = _commit(memory, "notes/a.md", "a\n")
    result = _sync(memory)
    assert result.pushed and result.merges == [] and result.remote_head == mine
    assert _hub_tip() == mine


def test_a_lost_race_is_merged_once_and_both_sides_arrive(memory: Path, other: Path) -> None:
    _commit(other, "notes/theirs.md", "theirs\n")
    assert _sync(other).pushed
    mine = _commit(memory, "notes/mine.md", "mine\n")
    result = _sync(memory)
    assert result.pushed and len(result.merges) == 1
    tip = _hub_tip()
    assert mine in git("rev-list", "--parents", "-n", "1", tip, cwd=hub_path()).split()[1:]
    tree = hub_tree()
    assert tree["notes/theirs.md"] == b"theirs\n" and tree["notes/mine.md"] == b"mine\n"


def test_retries_fold_into_one_merge(daemon_hub: Path, memory: Path, other: Path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Another writer lands a version right before each of our first two pushes: the exchange
    retries, and the hub gets one merge commit for our work, not one per retry. (On a git daemon:
    on a hub on this machine a retry holds the hub's lock, so nobody can land in between.)"""
    monkeypatch.setenv("MEMSYNC_PUSH_PATIENCE", "60")
    _commit(memory, "notes/mine.md", "mine\n")
    _rivals_before_each_push(monkeypatch, memory, other, iter(["first", "second"]))
    result = _sync(memory)
    assert result.pushed
    merges = git("rev-list", "--merges", BRANCH, cwd=daemon_hub).split()
    assert len(merges) == 1, merges
    tree = hub_tree(hub=daemon_hub)
    assert {tree["notes/first.md"], tree["notes/second.md"], tree["notes/mine.md"]} == {b"first\n", b"second\n",
                                                                                          b"mine\n"}


def test_without_push_the_hub_is_only_read(memory: Path, other: Path) -> None:
    _commit(other, "notes/theirs.md", "theirs\n")
    assert _sync(other).pushed
    before = _hub_tip()
    _commit(memory, "notes/mine.md", "mine\n")
    result = _sync(memory, push=False)
    assert not result.pushed and result.remote_head == before
    assert _hub_tip() == before
    assert (memory / "notes" / "theirs.md").read_text() == "theirs\n"


def test_a_refused_version_never_reaches_the_work_tree(memory: Path, other: Path) -> None:
    _commit(other, "notes/theirs.md", "theirs\n")
    assert _sync(other).pushed

    def refuse(version: str) -> None:
        raise RepoError(f"refusing {version[:8]}")

    with pytest.raises(RepoError, match="refusing"):
        _sync(memory, accept=refuse)
    assert not (memory / "notes" / "theirs.md").exists()


def test_patience_running_out_keeps_the_version_local(daemon_hub: Path, memory: Path, other: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMSYNC_PUSH_PATIENCE", "0")
    mine = _commit(memory, "notes/mine.md", "mine\n")
    _rivals_before_each_push(monkeypatch, memory, other, (f"rival-{n}" for n in range(1000)))
    with pytest.raises(RepoError, match="kept moving"):
        _sync(memory)
    assert "notes/mine.md" not in hub_tree(hub=daemon_hub)
    assert git("merge-base", "--is-ancestor", mine, "HEAD", cwd=memory) == ""  # still here, merged locally
