"""What a run did, per memory and in all: the records `execute` returns and its CLI prints."""

from __future__ import annotations

from typing import TYPE_CHECKING

from memsync.core.attribution import Attribution
from memsync.core.memory import Memory
from memsync.errors import (
    EXIT_BLOCKED,
    EXIT_REJECTED,
    EXIT_REPO,
    EXIT_UNSAVED,
)
from memsync.run.record import RunTrust
from memsync.util.records import field, recordclass

if TYPE_CHECKING:  # and imported where used: a plain run has no read-only memory, --as-user or conflict
    from memsync.core import readonly
    from memsync.git.merge import ConflictCopy
    from memsync.run import runas




@recordclass
class MemoryOutcome:
    name: str
    root: str
    read_only: bool
    checkpoints: int = 0
    final_commit: str | None = None  # the run's record: always made, empty if nothing was left to commit
    files_changed: int = 0  # files the final commit changed (checkpoints counted apart)
    version: str | None = None  # the memory's head after the run (a merge, if others wrote too)
    pushed: bool = False
    unpushed: list[str] = field(default_factory=list)
    conflicts: list[ConflictCopy] = field(default_factory=list)
    merged: int = 0
    flags: list[str] = field(default_factory=list)
    blocked: list[str] = field(default_factory=list)
    read_only_changes: list[str] = field(default_factory=list)
    read_only_kept: str | None = None  # where the command's changes to a read-only memory were moved
    folded: int = 0  # commits the command made itself, folded into the run's (run/record.py)
    kept_refs: list[str] = field(default_factory=list)  # where those commits stay reachable locally
    policy_kept: list[str] = field(default_factory=list)  # the command's versions of storage.yaml
    left_out: int = 0  # files the final snapshot did not commit (too large, ignored, ...)
    ignored: list[str] = field(default_factory=list)  # new files the operator's ignore rules kept out
    error: str | None = None
    rejected: bool = False  # the hub refused the final push (a hook, a protected branch, an access rule)
    unrecorded: bool = False  # the final commit failed (a full disk): the next command makes it, as the run's
    proposal: str | None = None  # the proposal waiting for review (--propose, or `mode: review` paths)


@recordclass
class RunReport:
    run_id: str
    command: list[str]
    exit_code: int
    duration: float
    memories: list[MemoryOutcome]

    @property
    def status(self) -> int:
        if self.exit_code != 0:
            return self.exit_code
        if any(m.unrecorded for m in self.memories):
            return EXIT_REPO
        if any(m.rejected for m in self.memories):
            return EXIT_REJECTED  # a retry would meet the same rule: said apart from a hub that was down
        if any(m.error or m.unpushed for m in self.memories):
            return EXIT_UNSAVED
        if any(m.blocked or m.read_only_changes or m.ignored for m in self.memories):
            return EXIT_BLOCKED
        return 0


@recordclass
class Mounted:
    """One memory of a run and everything the run keeps about it."""

    mem: Memory
    outcome: MemoryOutcome
    base: str | None = None  # writable: the branch's version when the command started
    trust: RunTrust | None = None  # writable: the run's record and its checks (record.py)
    protection: readonly.Protection | None = None  # read-only: the state the undo puts back
    lent: runas.Lent | None = None  # --as-user: what was handed over
    checkpoints: int = 0
    last_who: Attribution | None = None  # the author of its last checkpoint (a deferred push's)

    @property
    def name(self) -> str:
        return self.mem.name

    @property
    def writable(self) -> bool:
        return self.trust is not None


__all__ = ["MemoryOutcome", "Mounted", "RunReport"]
