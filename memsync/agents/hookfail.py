"""A failing coding-agent hook says so where the user looks.

A hook always exits 0 (a failing one must not block the agent), and Claude Code shows neither its
stderr nor its exit status in the conversation. So a failure is also printed as the hook JSON's
`systemMessage` (Claude Code and Codex show it to the user), and remembered under MEMSYNC_HOME
until the same memory's next successful hook, for `memsync hooks status`.
"""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path

from memsync.git import hub as hubmod
from memsync.util.names import NAME_RE

__all__ = ["cleared", "last_failure", "recorded", "system_message"]


def _file(memory: str) -> Path | None:
    if not NAME_RE.match(memory):
        return None  # never a path built from an unchecked name
    return hubmod.memsync_home() / "hook-failures" / f"{memory}.json"


def system_message(verb: str, message: str) -> str:
    """The hook's stdout: JSON the agent parses, with the failure shown to the user."""
    text = (f"memsync: the {verb} hook failed, this memory is not being synced: {message} "
            "(`memsync hooks status` shows it)")
    return json.dumps({"systemMessage": text})


def recorded(memory: str, verb: str, message: str) -> None:
    from memsync.core.config import atomic_write

    path = _file(memory)
    if path is None:
        return
    with contextlib.suppress(OSError):
        hubmod.ensure_home()
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        atomic_write(path, json.dumps({"time": stamp, "hook": verb, "message": message}) + "\n")


def cleared(memory: str) -> None:
    path = _file(memory)
    if path is not None:
        with contextlib.suppress(OSError):
            path.unlink()


def last_failure(memory: str) -> str | None:
    """'<hook> hook failed at <time>: <message>', or None."""
    path = _file(memory)
    if path is None:
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8")[:65536])
        return f"the {data['hook']} hook failed at {data['time']}: {data['message']}"
    except (OSError, ValueError, KeyError, TypeError):
        return None
