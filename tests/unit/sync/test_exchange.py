"""The exchange loop itself (memsync/sync/exchange.py: converge), called directly on real memories
and a real embedded hub: fast-forward, a lost race merged once, fetch without push, a refused
version. Retries and patience on a network hub: tests/servers/test_exchange_races.py."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from memsync.core.attribution import operator
from memsync.core.memory import Memory, open_memory
from memsync.errors import RemoteUnreachable, RepoError
from memsync.sync import exchange
from tests.conftest import Cli, git, hub_path, hub_tree
from tests.helpers.versions import commit as _commit

BRANCH = "memory/research"


def _hub_tip() -> str:
    return git("rev-parse", BRANCH, cwd=hub_path()).strip()


def _sync(root: Path, **options: object) -> exchange.Exchange:
    mem = open_memory(root)
    with mem.locked():
        return exchange.converge(mem, operator("sync"), lambda: None, **options)  # type: ignore[arg-type]


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


@pytest.mark.parametrize("tries", [1, 2])
def test_an_unreachable_hub_is_tried_as_often_as_memsync_network_tries_says(
        tmp_path: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch, tries: int) -> None:
    """A hub nobody answers for (a port bound but not listening: refused at once) is tried
    MEMSYNC_NETWORK_TRIES times (an agent's hook sets 2), then the failure is the command's."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as closed:
        closed.bind(("127.0.0.1", 0))
        root = tmp_path / "notes"
        root.mkdir()
        url = f"git://127.0.0.1:{closed.getsockname()[1]}/hub.git"
        assert cli("init", "--name", "notes", "--remote", url, cwd=root).code == 0
        _commit(root, "a.md", "a\n")
        fetched: list[str] = []
        real = exchange.fetch

        def fetch(mem: Memory, *args: object) -> str | None:
            fetched.append(mem.name)
            return real(mem, *args)  # type: ignore[arg-type]

        monkeypatch.setattr(exchange, "fetch", fetch)
        monkeypatch.setenv("MEMSYNC_NETWORK_TRIES", str(tries))
        with pytest.raises(RemoteUnreachable):
            _sync(root, push=False)  # (no push first: each try is a fetch)
    assert fetched == ["notes"] * tries
