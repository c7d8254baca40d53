"""What a coding agent's hook runs (`memsync hooks run VERB --agent A --memory M --dir D`, its
hook JSON on stdin): the typer command (hooks.py) and the hot verbs' own dispatch (fastpath.py)
both call `run_hook`. No typer here."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from memsync.cli.output import err, out


def run_hook(args: list[str]) -> None:
    """One line on stderr, exit 0, whatever happens: a hook must not block the agent (exit 2
    would block a Claude Code Stop; other codes print an error banner)."""
    from memsync.agents import hookfail
    from memsync.git.indexext import refusal

    verb = args[0] if args else "?"
    memory, directory = "?", Path.cwd()
    try:
        opts = _options(args[1:])
        memory, directory = opts["memory"], Path(opts["dir"])
        _hook(verb, opts, _payload())
        hookfail.cleared(memory)
    except Exception as caught:  # every failure, ours or not, is one line and exit 0
        exc: Exception = refusal(caught, directory) or caught
        message = getattr(exc, "message", None) or f"unexpected {type(exc).__name__}: {exc}"
        hint = getattr(exc, "hint", None)
        line = message + (f" ({hint})" if hint else "")
        err(f"memsync: {verb} hook: {line}")
        hookfail.recorded(memory, verb, line)
        out(hookfail.system_message(verb, line))  # stdout: the JSON the agent shows its user
    except KeyboardInterrupt:
        err(f"memsync: {verb} hook: interrupted")


def _options(words: list[str]) -> dict[str, str]:
    from memsync.errors import UsageError

    opts: dict[str, str] = {}
    for key, value in zip(words[::2], words[1::2], strict=False):
        if not key.startswith("--"):
            raise UsageError(f"unexpected argument {key!r}", "reinstall with `memsync hooks install`")
        opts[key[2:]] = value
    for needed in ("agent", "memory", "dir"):
        if needed not in opts:
            raise UsageError(f"--{needed} is missing", "reinstall with `memsync hooks install`")
    return opts


def _payload() -> dict[str, Any]:
    import json

    if sys.stdin is None or sys.stdin.isatty():
        return {}
    try:
        data = json.loads(sys.stdin.read(1 << 20) or "{}")
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _hook(verb: str, opts: dict[str, str], payload: dict[str, Any]) -> None:
    from memsync.agents import hookrun
    from memsync.agents import registry as agents

    a = agents.agent(opts["agent"])
    result = hookrun.handle(verb, a, opts["memory"], Path(opts["dir"]), opts.get("remote"), payload)
    what = [f"memory {result.memory}"]
    if result.adopted:
        what.append(result.adopted)
    if result.committed:
        what.append("committed")
    if result.pulled:
        what.append("pulled")
    if result.pushed:
        what.append("pushed")
    if not (result.pulled or result.pushed or result.committed):
        what.append("up to date")
    if result.conflicts:
        what.append(f"{result.conflicts} losing versions kept to fold")
    for line in result.warnings:
        err(f"memsync: warning: {line}")
    err(f"memsync: {verb}: {', '.join(what)}; version {(result.version or 'none')[:8]}")
