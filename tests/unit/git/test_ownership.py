"""git/ownership: which commits memsync did not make, where HEAD is, and putting a branch back on
a trusted version without touching the work tree; on a real memory."""

from __future__ import annotations

from pathlib import Path

import pygit2

from memsync.git import ownership
from memsync.git.repo import GitRepo
from tests.conftest import write

WHO = pygit2.Signature("agent", "agent@example.com")


def _agent_commit(root: Path, rel: str, text: str) -> str:
    write(root, rel, text)
    repo = pygit2.Repository(str(root))
    repo.index.read()
    repo.index.add(rel)
    repo.index.write()
    return str(repo.create_commit("HEAD", WHO, WHO, f"agent wrote {rel}\n", repo.index.write_tree(),
                                  [repo.head.target]))


def test_commits_memsync_did_not_make_are_found_newest_first(memory: Path) -> None:
    git = GitRepo.open(memory)
    pushed = git.head_oid() or ""
    assert pushed in ownership.recorded(git)  # memsync's own push is in its ledger
    first = _agent_commit(memory, "a.md", "a\n")
    second = _agent_commit(memory, "b.md", "b\n")
    found = ownership.foreign(git, [second], [pushed], ownership.recorded(git))
    assert [c.oid for c in found] == [second, first] and found[0].author_name == "agent"
    assert ownership.foreign(git, [second], [pushed], ownership.recorded(git), limit=1)[0].oid == second
    assert ownership.foreign(git, [], [pushed], set()) == []
    assert list(ownership.first_parents(git, second))[:3] == [second, first, pushed]


def test_head_state_names_the_branch_and_a_half_done_operation(memory: Path) -> None:
    git = GitRepo.open(memory)
    state = ownership.head_state(git, "memory/research")
    assert state.symbolic == "refs/heads/memory/research" and state.oid == state.branch_tip
    assert state.operation is None and not state.conflicts
    (memory / ".git" / "MERGE_HEAD").write_text(f"{state.oid}\n")
    assert ownership.head_state(git, "memory/research").operation == "merge"


def test_rewind_moves_the_branch_and_index_but_never_the_work_tree(memory: Path) -> None:
    git = GitRepo.open(memory)
    pushed = git.head_oid() or ""
    agent = _agent_commit(memory, "planted.md", "agent's\n")
    kept = ownership.keep(git, "run-1", agent)
    ownership.rewind(git, "memory/research", pushed)
    repo = pygit2.Repository(str(memory))
    assert str(repo.head.target) == pushed and repo.head.name == "refs/heads/memory/research"
    assert "planted.md" not in repo.index and (memory / "planted.md").read_text() == "agent's\n"
    assert str(repo.references[kept].target) == agent  # still reachable, locally
    assert ownership.keep(git, "x.lock", agent) == f"{ownership.KEPT_PREFIX}/commit-{agent}"  # no valid ref name
