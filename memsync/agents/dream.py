"""Claude Code's Auto Dream: a rewrite of the auto memory between sessions, attributed as such.

Auto Dream consolidates a project's auto memory in the background, between sessions; it takes a
lock file, `.consolidate-lock`, in the memory folder, whose modification time is when it last
ran. The next hook finds its rewrite as uncommitted changes. Committed as the operator's ("Save
local changes") it would read as the user's own edit; so when the lock is newer than the memory's
last version, those changes are committed with `Memsync-Actor: dream` and a run id of their own.
The version is checked like an agent's (a run's scan and guard: a deletion is flagged), since it
is the agent's doing. The lock file itself is never synced (registry.NEVER_SYNCED).
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

from memsync.core.attribution import Attribution
from memsync.core.memory import Memory
from memsync.util.names import host_name

__all__ = ["LOCK_FILE", "DreamAttribution", "dream_attribution", "dream_since_last_version"]

LOCK_FILE = ".consolidate-lock"


class DreamAttribution(Attribution):
    """A run (as the guard and the scan see it) whose trailers name the dream as the actor."""

    def trailers(self, flags: list[str]) -> list[tuple[str, str]]:
        return [("Memsync-Actor", "dream") if key == "Memsync-Actor" else (key, value)
                for key, value in super().trailers(flags)]

    def author(self) -> tuple[str, str] | None:
        return ("Claude Code Auto Dream", f"auto-dream@{host_name()}")


def _locks(root: Path, whole_home: bool) -> list[Path]:
    if not whole_home:
        return [root / LOCK_FILE]
    with contextlib.suppress(OSError):
        return sorted(root.glob(f"projects/*/memory/{LOCK_FILE}"))
    return []


def dream_since_last_version(mem: Memory, whole_home: bool) -> float | None:
    """The time Auto Dream last ran if that is after the memory's last version, else None."""
    head = mem.git.head_oid()
    since = mem.git.commit_info(head).time if head is not None else 0
    newest: float | None = None
    for lock in _locks(mem.root, whole_home):
        with contextlib.suppress(OSError):
            st = os.lstat(lock)
            if st.st_mtime > since and (newest is None or st.st_mtime > newest):
                newest = st.st_mtime
    return newest


def dream_attribution(agent_key: str, when: float) -> DreamAttribution:
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(when))
    return DreamAttribution("run", "Auto Dream consolidated the memory between sessions",
                            f"{agent_key}-dream-{stamp}",
                            (("Memsync-Command", f"{agent_key} auto-dream"),))
