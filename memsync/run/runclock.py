"""A run's clock against its memories' history.

A generated run id is this machine's UTC time plus random bits, so ids sort by start time only
among machines whose clocks agree; a sandbox booted with a clock years off makes ids that sort
where its clock puts them. Nothing memsync shows depends on that order: history, `log` and
`status` follow the commit graph. What memsync can check is whether this machine's clock is
behind the newest version it has just pulled (dated by the clock of whoever made it): then the
run's id sorts before runs that came earlier, and the run says so.
"""

from __future__ import annotations

import time

from memsync.core.memory import Memory
from memsync.util.records import recordclass

# Clocks of honest machines drift by seconds; this much is a wrong clock, not drift.
BEHIND_AFTER = 300.0


@recordclass(frozen=True)
class ClockBehind:
    memory: str
    version: str  # 8 hex digits
    ahead_by: float  # seconds the version's date is after this machine's clock


def behind_history(memories: list[Memory], now: float | None = None) -> list[ClockBehind]:
    """The memories whose newest version is dated more than BEHIND_AFTER after this machine's now."""
    clock = time.time() if now is None else now
    found = []
    for mem in memories:
        head = mem.git.head_oid()
        if head is None:
            continue
        made = mem.git.commit_info(head).time
        if made - clock > BEHIND_AFTER:
            found.append(ClockBehind(mem.name, head[:8], made - clock))
    return found


def describe(behind: ClockBehind) -> str:
    return (f"this machine's clock is {_span(behind.ahead_by)} behind the date of {behind.memory}'s newest "
            f"version {behind.version}: this run's generated id sorts before runs that came earlier "
            "(history, log and status follow the commit graph, not the ids); set the clock, or pass --run-id")


def _span(seconds: float) -> str:
    for unit, size in (("days", 86_400), ("hours", 3_600), ("minutes", 60)):
        if seconds >= 2 * size:
            return f"{seconds / size:.0f} {unit}"
    return f"{seconds:.0f} seconds"


__all__ = ["BEHIND_AFTER", "ClockBehind", "behind_history", "describe"]
