"""What each clone's hooks did last, so that a failure is seen where the user looks.

A hook always exits 0 (a failing one must not block the agent), and Claude Code shows neither its
stderr nor its exit status in the conversation. So a failure is also printed as the hook JSON's
`systemMessage` (Claude Code and Codex show it to the user), and every hook records its outcome
under MEMSYNC_HOME/hook-clones, one file per memory folder (a clone of a repository, a linked
worktree's shared folder, the agent's home): `memsync hooks status` lists each one on its own,
and a good hook in one clone never clears another clone's failure.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import time
from pathlib import Path

from memsync.git import hub as hubmod
from memsync.util.names import NAME_RE
from memsync.util.records import recordclass

__all__ = ["CloneState", "cleared", "clones", "last_failure", "recorded", "system_message"]

MAX_CLONES = 500  # read by status at most


@recordclass(frozen=True)
class CloneState:
    agent: str
    memory: str
    dir: str
    project: str  # the project the hook ran for ("" for the agent's home)
    time: str
    hook: str
    failure: str | None  # None: the last hook went well


def _folder() -> Path:
    return hubmod.memsync_home() / "hook-clones"


def _file(memory: str, directory: Path) -> Path | None:
    if not NAME_RE.match(memory):
        return None  # never a path built from an unchecked name
    digest = hashlib.sha256(str(directory).encode("utf-8", "surrogateescape")).hexdigest()[:16]
    return _folder() / f"{memory}-{digest}.json"


def system_message(verb: str, message: str) -> str:
    """The hook's stdout: JSON the agent parses, with the failure shown to the user."""
    text = (f"memsync: the {verb} hook failed, this memory is not being synced: {message} "
            "(`memsync hooks status` shows it)")
    return json.dumps({"systemMessage": text})


def _write(agent: str, memory: str, directory: Path, project: str, verb: str, failure: str | None) -> None:
    from memsync.core.config import atomic_write

    path = _file(memory, directory)
    if path is None:
        return
    with contextlib.suppress(OSError):
        hubmod.ensure_home()
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        atomic_write(path, json.dumps({"agent": agent, "memory": memory, "dir": str(directory), "project": project,
                                       "time": stamp, "hook": verb, "failure": failure}) + "\n")


def recorded(agent: str, memory: str, directory: Path, verb: str, message: str, project: str = "") -> None:
    _write(agent, memory, directory, project, verb, message)


def cleared(agent: str, memory: str, directory: Path, verb: str = "", project: str = "") -> None:
    _write(agent, memory, directory, project, verb, None)


def _read(path: Path) -> CloneState | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8")[:65536])
        failure = data.get("failure")
        return CloneState(str(data.get("agent") or ""), str(data["memory"]), str(data["dir"]),
                          str(data.get("project") or ""),
                          str(data["time"]), str(data.get("hook") or ""),
                          None if failure is None else str(failure))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def last_failure(memory: str, directory: Path) -> str | None:
    """'<hook> hook failed at <time>: <message>' for this clone, or None."""
    path = _file(memory, directory)
    state = _read(path) if path is not None else None
    if state is None or state.failure is None:
        return None
    return f"the {state.hook} hook failed at {state.time}: {state.failure}"


def clones() -> list[CloneState]:
    """Every memory folder whose hooks ran on this machine, by memory and folder."""
    try:
        files = sorted(_folder().glob("*.json"))[:MAX_CLONES]
    except OSError:
        return []
    found = [s for s in map(_read, files) if s is not None]
    return sorted(found, key=lambda s: (s.memory, s.dir))
