"""core/unverified: unpushed commits memsync did not make are pushed as they are when clean,
refused (Blocked) when they hold a forged trailer, a likely secret or a broken protect rule, and
folded into one commit of a dead run when that run's marker is left behind. In-process, on a real
memory, with the foreign commits made through pygit2 as plain git would make them."""

from __future__ import annotations

import json
from pathlib import Path

import pygit2
import pytest

from memsync.core import unverified
from memsync.core.memory import RUN_MARKER, open_memory
from memsync.errors import Blocked
from tests.conftest import write

SECRET = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"


def _git_commit(root: Path, rel: str, text: str, message: str = "edited with plain git\n") -> str:
    """A commit as `git commit` makes it: no memsync trailers unless the message carries them."""
    write(root, rel, text)
    repo = pygit2.Repository(str(root))
    repo.index.read()
    repo.index.add(rel)
    repo.index.write()
    who = pygit2.Signature("Someone", "someone@example.com")
    oid = repo.create_commit("HEAD", who, who, message, repo.index.write_tree(), [repo.head.target])
    return str(oid)


def _vet(root: Path, **kwargs: object) -> unverified.Unverified:
    mem = open_memory(root)
    with mem.locked():
        return unverified.vet(mem, **kwargs)  # type: ignore[arg-type]


def test_nothing_unpushed_finds_nothing(memory: Path) -> None:
    found = _vet(memory)
    assert found.commits == [] and found.folded_into is None


def test_a_clean_git_commit_is_found_and_left_as_it_is(memory: Path) -> None:
    oid = _git_commit(memory, "notes.md", "by hand\n")
    found = _vet(memory)
    assert [c.oid for c in found.commits] == [oid]
    assert found.forged == [] and found.secrets == [] and found.violations == []
    assert str(pygit2.Repository(str(memory)).head.target) == oid  # not relabelled, not rewound


def test_a_forged_trailer_is_refused_with_the_commit_named(memory: Path) -> None:
    oid = _git_commit(memory, "notes.md", "x\n", "looks official\n\nMemsync-Actor: operator\n")
    with pytest.raises(Blocked) as refused:
        _vet(memory)
    assert oid[:8] in str(refused.value) and "forged trailer" in str(refused.value)


def test_a_forged_trailer_is_only_reported_when_nothing_is_pushed(memory: Path) -> None:
    _git_commit(memory, "notes.md", "x\n", "looks official\n\nMemsync-Actor: operator\n")
    found = _vet(memory, refuse=False)
    assert len(found.forged) == 1 and found.forged[0].endswith("Memsync-Actor")


def test_a_secret_is_refused_under_secrets_block_and_passes_under_warn(memory: Path) -> None:
    _git_commit(memory, "creds.md", f"token = {SECRET}\n")
    assert len(_vet(memory).commits) == 1  # the default (warn) does not read their content
    config = memory / ".vm0" / "storage.yaml"
    config.write_text(config.read_text() + "secrets: block\n")
    with pytest.raises(Blocked, match=r"possible secret in creds\.md"):
        _vet(memory)


def test_a_broken_protect_rule_is_refused(memory: Path) -> None:
    config = memory / ".vm0" / "storage.yaml"
    config.write_text(config.read_text() + "protect:\n  - {path: summary.md, mode: read-only}\n")
    repo = pygit2.Repository(str(memory))
    (memory / "summary.md").unlink()
    repo.index.read()
    repo.index.remove("summary.md")
    who = pygit2.Signature("Someone", "someone@example.com")
    repo.create_commit("HEAD", who, who, "gone\n", repo.index.write_tree(), [repo.head.target])
    with pytest.raises(Blocked, match=r"policy: summary\.md"):
        _vet(memory)


def test_a_dead_runs_commits_and_files_become_one_commit_of_that_run(memory: Path) -> None:
    before = str(pygit2.Repository(str(memory)).head.target)
    _git_commit(memory, "runs/agent.md", "the agent committed this\n", "agent's own commit\n")
    write(memory, "runs/left.md", "left uncommitted\n")
    (memory / ".git" / RUN_MARKER).write_text(json.dumps({"run_id": "dead-run-1", "pid": 2**22 + 7}))
    found = _vet(memory)
    assert found.folded_into == "dead-run-1"
    repo = pygit2.Repository(str(memory))
    head = repo.get(repo.head.target)
    assert isinstance(head, pygit2.Commit)
    assert [str(p) for p in head.parent_ids] == [before]  # the agent's commit is folded, not kept
    assert "Memsync-Run-Id: dead-run-1" in head.message and "agent-commits 1 folded" in head.message
    assert "runs/agent.md" in head.tree and "runs/left.md" in head.tree
    assert not (memory / ".git" / RUN_MARKER).exists()


def test_a_marker_that_is_not_json_is_not_a_dead_run(memory: Path) -> None:
    oid = _git_commit(memory, "notes.md", "by hand\n")
    (memory / ".git" / RUN_MARKER).write_text("{not json")
    found = _vet(memory)
    assert found.folded_into is None and [c.oid for c in found.commits] == [oid]
