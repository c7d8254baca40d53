"""Reading a proposal: what accepting it would change now, against the memory's current version
(what others wrote since its base included), and what it would forget (forgetting.py)."""

from __future__ import annotations

from collections.abc import Callable

from memsync.core.memory import Memory
from memsync.git import proposaltree
from memsync.history.forgetting import ForgettingReport
from memsync.history.forgetting import report as forgetting_report
from memsync.sync.proposalcheck import Checked, FileReview, blob_data, check_changes, count_lines
from memsync.sync.proposals import Proposal, find
from memsync.util.records import field, recordclass


@recordclass
class Review:
    proposal: Proposal
    against: str | None  # the memory's version the review compares with
    files: list[FileReview] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)  # paths a merge would keep both sides of
    checked: Checked = field(default_factory=Checked)
    forgotten: ForgettingReport | None = None


def review(mem: Memory, pid: str, paths: list[str] | None = None, *, patch: bool = True,
           with_forgotten: bool = False) -> Review:
    """What accepting the proposal `pid` (or its `paths`) would change now in the memory's
    current version: a merge with memsync's rules, compared with that version."""
    from memsync.sync.accepting import candidate

    with mem.locked():
        proposal, hub = find(mem, pid)
        current = hub.memory_tip
        theirs = candidate(mem, proposal, paths or [])
        result = Review(proposal, current)
        if current is None:
            merged, result.conflicts = proposaltree.tree_of(mem.git, theirs), []
        else:
            merged, result.conflicts = proposaltree.merged_tree(mem.git, current, theirs, proposal.id,
                                                                _strategy(mem))
        changes = proposaltree.changes(mem.git, current, merged)
        result.files = [count_lines(blob_data(mem, c.old), blob_data(mem, c.new), patch, c.path) for c in changes]
        result.checked = check_changes(mem, changes)
        if with_forgotten and current is not None:
            result.forgotten = forgetting_report(mem.git, current, proposal.tip)
        return result


def forgotten(mem: Memory, pid: str) -> ForgettingReport:
    """The forgetting report of a proposal against the memory's current version."""
    with mem.locked():
        proposal, hub = find(mem, pid)
        return forgetting_report(mem.git, hub.memory_tip or proposal.base or proposal.tip, proposal.tip)


def _strategy(mem: Memory) -> Callable[[str], str]:
    from memsync.checks.merge_policy import strategy_for

    return lambda path: strategy_for(mem.config.merge, path)


__all__ = ["Review", "forgotten", "review"]
