"""The exchange loop (memsync/sync/exchange.py: converge) losing races on a network hub (a real
`git daemon`): another writer, plain git, lands a version after each of our pushes read the hub's
advertisement and before our update reaches it (libgit2's push-negotiation callback, the moment a
real race is lost). On a hub on this machine a retry holds the hub's lock, so nobody lands between."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from memsync.core.attribution import operator
from memsync.core.memory import open_memory
from memsync.errors import RepoError
from memsync.git.transport import Callbacks
from memsync.sync import exchange
from tests.conftest import git, hub_tree, write
from tests.helpers.versions import commit as _commit

BRANCH = "memory/research"


def _sync(root: Path) -> exchange.Exchange:
    mem = open_memory(root)
    with mem.locked():
        return exchange.converge(mem, operator("sync"), lambda: None)


def _rivals_at_each_push(monkeypatch: pytest.MonkeyPatch, hub: Path, tmp_path: Path,
                         names: Iterator[str]) -> list[str]:
    """Each push of the memory's branch (the leased first one and every later one) has, once its
    advertisement was read, another writer's push land first, while names last. The names landed."""
    rival = tmp_path / "rival"
    git("clone", "-q", "-b", BRANCH, str(hub), str(rival), cwd=tmp_path)
    checked = Callbacks.push_negotiation
    landed: list[str] = []

    def negotiation(self: Callbacks, updates: list) -> None:  # type: ignore[type-arg]
        checked(self, updates)
        name = next(names, None) if any(u.dst_refname == f"refs/heads/{BRANCH}" for u in updates) else None
        if name is not None:
            git("pull", "-q", "--no-rebase", "origin", BRANCH, cwd=rival)
            write(rival, f"notes/{name}.md", f"{name}\n")
            git("add", "-A", cwd=rival)
            git("-c", "user.name=rival", "-c", "user.email=r@example.invalid", "commit", "-qm", name, cwd=rival)
            git("push", "-q", "origin", f"HEAD:{BRANCH}", cwd=rival)
            landed.append(name)

    monkeypatch.setattr(Callbacks, "push_negotiation", negotiation)
    return landed


def test_retries_fold_into_one_merge(daemon_hub: Path, memory: Path, tmp_path: Path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Another writer lands a version during each of our first two pushes: the exchange retries,
    and the hub gets one merge commit for our work, not one per retry."""
    monkeypatch.setenv("MEMSYNC_PUSH_PATIENCE", "60")
    _commit(memory, "notes/mine.md", "mine\n")
    landed = _rivals_at_each_push(monkeypatch, daemon_hub, tmp_path, iter(["first", "second"]))
    result = _sync(memory)
    assert result.pushed and landed == ["first", "second"]
    merges = git("rev-list", "--merges", BRANCH, cwd=daemon_hub).split()
    assert len(merges) == 1, merges
    tree = hub_tree(hub=daemon_hub)
    assert (tree["notes/first.md"], tree["notes/second.md"], tree["notes/mine.md"]) == (b"first\n", b"second\n",
                                                                                          b"mine\n")


def test_patience_running_out_keeps_the_version_local(daemon_hub: Path, memory: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMSYNC_PUSH_PATIENCE", "0")
    mine = _commit(memory, "notes/mine.md", "mine\n")
    landed = _rivals_at_each_push(monkeypatch, daemon_hub, tmp_path, (f"rival-{n}" for n in range(1000)))
    with pytest.raises(RepoError, match="kept moving"):
        _sync(memory)
    assert landed and "notes/mine.md" not in hub_tree(hub=daemon_hub)
    assert git("merge-base", "--is-ancestor", mine, "HEAD", cwd=memory) == ""  # still here, merged locally
