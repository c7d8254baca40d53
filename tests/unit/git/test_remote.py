"""The hub type: its kind chosen once from the resolved address, and a hub on this machine read
and written in place through it (real repositories, a real bare hub)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from memsync.core.hubbind import KEEPER, bind
from memsync.git import hub as hubmod
from memsync.git.remote import LocalHub, NetworkHub, branch_names, names_seen
from memsync.git.repo import GitRepo
from memsync.git.transport import NotFastForward
from tests.conftest import git, write

BRANCH = "memory/research"


def _bare(path: Path) -> Path:
    git("init", "-q", "--bare", str(path), cwd=path.parent)
    return path


def _commit(root: Path, text: str) -> tuple[GitRepo, str]:
    root.mkdir(exist_ok=True)
    if not (root / ".git").exists():
        git("init", "-q", "-b", BRANCH, cwd=root)
    write(root, "notes.md", text)
    git("add", "-A", cwd=root)
    git("-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", text, cwd=root)
    return GitRepo.open(root), git("rev-parse", "HEAD", cwd=root).strip()


@pytest.mark.parametrize(("address", "kind"), [
    ("/srv/hub.git", LocalHub), ("file:///srv/hub.git", LocalHub), ("https://git.example.com/m.git", NetworkHub),
    ("ssh://git@example.com/m.git", NetworkHub), ("git@example.com:m.git", NetworkHub),
    ("git://example.com/m.git", NetworkHub),
])
def test_the_kind_is_chosen_once_from_the_address(address: str, kind: type) -> None:
    hub = bind(hubmod.parse(address))
    assert type(hub) is kind
    assert hub.display == hubmod.parse(address).display
    local = kind is LocalHub  # each policy follows from the kind, so no caller asks which it holds
    assert (hub.pushes_ahead, hub.queues_losers, hub.keeps_unreachable, hub.reached_elsewhere) == (not local,) * 4
    assert hub.retries_under_lock is local
    assert hub.clone_depth(full_history=False) == (0 if local else 1)
    assert hub.places_here() == ([Path("/srv/hub.git")] if local else [])


def test_a_hub_here_is_pushed_to_fetched_from_and_listed_in_place(tmp_path: Path) -> None:
    bare = _bare(tmp_path / "hub.git")
    hub = bind(hubmod.parse(str(bare)))
    ref = f"refs/heads/{BRANCH}"
    mine, first = _commit(tmp_path / "laptop", "first\n")
    hub.push(mine, ref, ref, None)
    assert hub.tips(mine, [ref, "refs/heads/memory/absent"]) == {ref: first}
    assert git("symbolic-ref", "HEAD", cwd=bare).strip() == ref  # HEAD points at the first memory pushed
    with pytest.raises(NotFastForward):  # only from the tip the caller expects
        hub.push(mine, ref, ref, "0" * 40)
    other = GitRepo.init(tmp_path / "desk", BRANCH)
    assert hub.fetch(other, ref, "refs/remotes/origin/memory/research") == first
    assert other.ref_oid("refs/remotes/origin/memory/research") == first and other.has_object(first)
    _, second = _commit(tmp_path / "laptop", "second\n")
    hub.push(mine, ref, ref, first)
    assert git("rev-parse", ref, cwd=bare).strip() == second


def test_memory_names_are_read_from_loose_and_packed_refs(tmp_path: Path) -> None:
    bare = _bare(tmp_path / "hub.git")
    hub = bind(hubmod.parse(str(bare)))
    mine, _ = _commit(tmp_path / "laptop", "x\n")
    for name in ("alpha", "beta"):
        hub.push(mine, f"refs/heads/{BRANCH}", f"refs/heads/memory/{name}", None)
    git("pack-refs", "--all", cwd=bare)  # alpha and beta now only in packed-refs
    hub.push(mine, f"refs/heads/{BRANCH}", "refs/heads/artifact/gamma", None)  # a loose one
    hub.push(mine, f"refs/heads/{BRANCH}", "refs/heads/memory/NOT-A-NAME", None)
    assert names_seen(hubmod.parse(str(bare))) == {"alpha", "beta", "gamma"}
    assert branch_names(tmp_path / "nowhere", "refs/heads/") == set()


def test_the_hub_lock_is_held_and_cleared_of_a_dead_holders_git_locks(tmp_path: Path) -> None:
    bare = _bare(tmp_path / "hub.git")
    hub = LocalHub(hubmod.parse(str(bare)), bare, KEEPER)
    left = bare / "packed-refs.lock"  # left by a git process killed while it wrote the hub, a day ago
    left.write_text("")
    os.utime(left, (time.time() - 86400, time.time() - 86400))
    with hub.lock(5):
        assert (bare / "memsync.lock").exists()
        assert not (bare / "packed-refs.lock").exists()
