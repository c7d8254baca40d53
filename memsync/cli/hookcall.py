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
    agent, memory, directory, project = "?", "?", Path.cwd(), ""
    try:
        opts = _options(args[1:])
        payload = _payload()
        agent, memory = opts["agent"], opts["memory"]
        directory, project = _where(opts, payload)
        _hook(verb, opts, directory, payload)
        hookfail.cleared(agent, memory, directory, verb, project)
    except Exception as caught:  # every failure, ours or not, is one line and exit 0
        exc: Exception = refusal(caught, directory) or caught
        message = getattr(exc, "message", None) or f"unexpected {type(exc).__name__}: {exc}"
        hint = getattr(exc, "hint", None)
        line = message + (f" ({hint})" if hint else "")
        err(f"memsync: {verb} hook: {line}")
        hookfail.recorded(agent, memory, directory, verb, line, project)
        out(hookfail.system_message(verb, line))  # stdout: the JSON the agent shows its user
    except KeyboardInterrupt:
        err(f"memsync: {verb} hook: interrupted")


def _options(words: list[str]) -> dict[str, str]:
    from memsync.agents.registry import FLAGS, options
    from memsync.errors import UsageError

    for word in words:
        if word.startswith("--") and word[2:] not in (*FLAGS, "agent", "memory", "dir", "remote", "dream"):
            raise UsageError(f"unexpected argument {word!r}", "reinstall with `memsync hooks install`")
    opts = options(words)
    for needed in ("agent", "memory"):
        if needed not in opts:
            raise UsageError(f"--{needed} is missing", "reinstall with `memsync hooks install`")
    if sum(key in opts for key in ("dir", "project", "agent-home")) != 1:
        raise UsageError("give one of --dir, --project, --agent-home", "reinstall with `memsync hooks install`")
    return opts


def _where(opts: dict[str, str], payload: dict[str, Any]) -> tuple[Path, str]:
    """(the memory folder, the project) this hook keeps. `--project`: the project's auto memory
    folder on this machine, found as Claude Code finds it (the project is CLAUDE_PROJECT_DIR, else
    the hook JSON's cwd, else the working directory); `--agent-home`: the agent's home here."""
    import os

    from memsync.agents import registry as agents
    from memsync.errors import UsageError

    if "dir" in opts:
        return Path(opts["dir"]).expanduser(), ""
    a = agents.agent(opts["agent"])
    if "agent-home" in opts:
        return a.home, ""
    if a is not agents.CLAUDE_CODE:
        raise UsageError(f"--project is for Claude Code's auto memory, not {a.label}",
                         "reinstall with `memsync hooks install`")
    start = os.environ.get("CLAUDE_PROJECT_DIR") or str(payload.get("cwd") or "") or str(Path.cwd())
    from memsync.agents.projectdir import auto_memory_dir
    from memsync.git.project import identify

    ident = identify(Path(start).expanduser(), assign=False)
    return auto_memory_dir(a.home, ident.root, ident.toplevel), str(ident.root)


def _payload() -> dict[str, Any]:
    import json

    if sys.stdin is None or sys.stdin.isatty():
        return {}
    try:
        data = json.loads(sys.stdin.read(1 << 20) or "{}")
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _hook(verb: str, opts: dict[str, str], directory: Path, payload: dict[str, Any]) -> None:
    from memsync.agents import hookrun
    from memsync.agents import registry as agents

    a = agents.agent(opts["agent"])
    result = hookrun.handle(verb, a, opts["memory"], directory, opts.get("remote"), payload,
                            opts.get("dream", "commit"))
    what = [f"memory {result.memory}"]
    if result.adopted:
        what.append(result.adopted)
    if result.dreamt:
        what.append("Auto Dream's rewrite committed as its own")
    if result.dream_proposal:
        what.append(f"Auto Dream's rewrite waits for review as proposal {result.dream_proposal} "
                    f"(`memsync review {result.dream_proposal}`)")
    if result.joined:
        what.append("joined the hub's separate history")
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
