"""Claude Code's Auto Dream: a rewrite of the auto memory between sessions, attributed as such.

Auto Dream consolidates a project's auto memory in the background, between sessions; it takes a
lock file, `.consolidate-lock`, in the memory folder, whose modification time is when it last
ran. The next hook finds its rewrite as uncommitted changes. Committed as the operator's ("Save
local changes") it would read as the user's own edit; so when the lock is newer than the memory's
last version (and is not a lock time already handled: .git/memsync-dream-seen), those changes are
committed with `Memsync-Actor: dream` and a run id of their own.
The version is checked like an agent's (a run's scan and guard: a deletion is flagged), since it
is the agent's doing. The lock file itself is never synced (registry.NEVER_SYNCED).

By the user's choice (`memsync hooks install claude-code --dream propose`, stored in the hook
command as `--dream propose`), the rewrite is not committed to the memory but made the proposal
`proposals/<name>/<dream run id>` (`propose`): the memory does not move, the folder goes back to
the memory's version, and `memsync review` / `accept` / `reject` decide.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

from memsync.core.attribution import Attribution
from memsync.core.memory import Memory
from memsync.util.names import host_name

__all__ = ["LOCK_FILE", "MODES", "DreamAttribution", "dream_attribution", "dream_since_last_version", "handled",
           "propose"]

LOCK_FILE = ".consolidate-lock"
MODES = ("commit", "propose")  # what a hook does with a dream's rewrite (`--dream`)


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


def propose(mem: Memory, who: DreamAttribution, push: bool = True) -> tuple[str | None, str | None]:
    """The dream's rewrite (the work tree's changes) made the proposal `who.run_id` on the memory's
    version, pushed to the hub, and the folder put back on the memory's version: (the proposal's
    id, or None when the rewrite changed nothing; a warning when it stays on the local branch).
    Caller holds the memory's lock (proposing.recover's steps, without taking it again)."""
    from memsync.core.snapshot import take
    from memsync.errors import RemoteError
    from memsync.git import proposaltree
    from memsync.sync.exchange import converge
    from memsync.sync.proposals import branch_for, check_room
    from memsync.sync.proposing import view

    base = mem.git.head_oid()
    if base is None:
        return None, None
    if push:
        check_room(mem)
    branch = branch_for(mem.name, who.run_id or "")
    proposaltree.switch_head(mem.git, branch, base)
    seen = view(mem, branch)
    warning = None

    def resnap() -> None:
        take(seen, who)

    try:
        snap = take(seen, who)
        if snap.commit is not None and push:
            try:
                converge(seen, who, resnap)
            except RemoteError as exc:
                warning = (f"the dream's proposal {who.run_id} is not on the hub yet ({exc.message}); "
                           f"`git push <hub> {branch}` delivers it")
    finally:
        proposaltree.leave_branch(mem.git, mem.branch)
    if snap.commit is None:
        mem.git.delete_ref(f"refs/heads/{branch}")
        return None, None
    return who.run_id, warning
