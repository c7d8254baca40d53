"""sync/gc: the memory's repository and its hub on this machine are repacked (every object kept),
the window for closed proposals comes from MEMSYNC_PROPOSAL_DAYS, and gc refuses during a run."""

from __future__ import annotations

from pathlib import Path

import pygit2
import pytest

from memsync.errors import UsageError
from memsync.sync import gc
from tests.conftest import hub_path, write


def test_both_repositories_are_repacked_and_nothing_is_lost(memory: Path) -> None:
    before = str(pygit2.Repository(str(memory)).head.target)
    write(memory, "uncommitted.md", "not an object yet\n")
    done = gc.gc(memory)
    assert done.memory == "research" and done.local.loose_before > 0 and done.local.objects >= done.local.loose_before
    assert done.hub_result is not None and done.pruned == []  # the hub is on this machine: repacked too
    assert not list((memory / ".git" / "objects").glob("[0-9a-f][0-9a-f]/*"))  # nothing loose after
    for where in (memory, hub_path()):  # every object of the history still there, now packed
        repo = pygit2.Repository(str(where))
        for commit in repo.walk(repo.revparse_single(before).id):
            assert _all_objects(repo, commit.tree) > 0
    assert (memory / "uncommitted.md").read_text() == "not an object yet\n"


def _all_objects(repo: pygit2.Repository, tree: pygit2.Tree) -> int:
    """Reads every blob and tree under `tree` (a missing object raises); how many were read."""
    read = 0
    for entry in tree:
        obj = repo[entry.id]
        read += 1 + (_all_objects(repo, obj) if isinstance(obj, pygit2.Tree) else 0)
    return read


def test_the_proposal_window_is_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert gc.proposal_days() == gc.DEFAULT_PROPOSAL_DAYS
    monkeypatch.setenv("MEMSYNC_PROPOSAL_DAYS", "0.5")
    assert gc.proposal_days() == 0.5
    for bad in ("-1", "a month"):  # refused as util/envcheck.py refuses it, never a silent default
        monkeypatch.setenv("MEMSYNC_PROPOSAL_DAYS", bad)
        with pytest.raises(UsageError, match="MEMSYNC_PROPOSAL_DAYS"):
            gc.proposal_days()
