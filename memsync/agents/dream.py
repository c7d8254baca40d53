"""Claude Code's Auto Dream: a rewrite of the auto memory between sessions, attributed as such.

Auto Dream consolidates a project's auto memory in the background, between sessions; it takes a
lock file, `.consolidate-lock`, in the memory folder, whose modification time is when it last
ran. The next hook finds its rewrite as uncommitted changes. Committed as the operator's ("Save
local changes") it would read as the user's own edit; so when the lock is newer than the memory's
last version (and is not a lock time already handled: .git/memsync-dream-seen), those changes are
committed with `Memsync-Actor: dream` and a run id of their own.
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

__all__ = ["LOCK_FILE", "DreamAttribution", "dream_attribution", "dream_since_last_version", "handled"]

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


SEEN = "memsync-dream-seen"


def _seen(mem: Memory) -> set[str]:
    try:
        return set((mem.git.git_dir / SEEN).read_text(encoding="ascii")[:65536].split())
    except (OSError, UnicodeDecodeError):
        return set()


def dream_since_last_version(mem: Memory, whole_home: bool) -> float | None:
    """The time Auto Dream last ran if that is after the memory's last version and not handled
    yet, else None (whole second commit times: a lock of the same second counts as after)."""
    head = mem.git.head_oid()
    since = mem.git.commit_info(head).time if head is not None else 0
    seen = _seen(mem)
    newest: float | None = None
    for lock in _locks(mem.root, whole_home):
        with contextlib.suppress(OSError):
            st = os.lstat(lock)
            if st.st_mtime >= since and str(st.st_mtime_ns) not in seen and (newest is None or st.st_mtime > newest):
                newest = st.st_mtime
    return newest


def handled(mem: Memory, whole_home: bool) -> None:
    """Remember the locks' times now committed, so that they are not the dream's again."""
    from memsync.core.config import atomic_write

    stamps = []
    for lock in _locks(mem.root, whole_home):
        with contextlib.suppress(OSError):
            stamps.append(str(os.lstat(lock).st_mtime_ns))
    with contextlib.suppress(OSError):
        atomic_write(mem.git.git_dir / SEEN, "\n".join(sorted(set(stamps) | _seen(mem))[-64:]) + "\n")


def dream_attribution(agent_key: str, when: float) -> DreamAttribution:
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(when))
    return DreamAttribution("run", "Auto Dream consolidated the memory between sessions",
                            f"{agent_key}-dream-{stamp}",
                            (("Memsync-Command", f"{agent_key} auto-dream"),))
