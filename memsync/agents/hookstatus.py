"""`memsync hooks status`: where memsync's hooks are installed and what each memory looks like."""

from __future__ import annotations

from pathlib import Path

from memsync.agents import registry as agents
from memsync.errors import MemsyncError
from memsync.util.records import dataclass, field
from memsync.util.wording import count


@dataclass
class HookStatus:
    agent: str
    scope: str
    settings: str
    events: list[str] = field(default_factory=list)
    memory: str = ""
    dir: str = ""
    state: str = ""
    # installed by an earlier memsync: `python -m memsync` without -P/-I imports from the project
    outdated: bool = False


def collect(project: Path) -> list[HookStatus]:
    found: list[HookStatus] = []
    for a in agents.AGENTS.values():
        for scope in agents.SCOPES:
            try:
                path = agents.settings_path(a, scope, project)
            except MemsyncError:  # Codex has no local settings file
                continue
            hooks = agents.installed(path)
            if hooks is None:
                continue
            opts = agents.parse_command(hooks.commands[0])
            status = HookStatus(a.key, scope, str(path), hooks.events, opts.get("memory", "?"),
                                opts.get("dir", "?"))
            status.state = _state(Path(status.dir))
            from memsync.agents.hookfail import last_failure

            failed = last_failure(status.memory)
            if failed:
                status.state = f"FAILING: {failed}; {status.state}"
            status.outdated = any(not safe_command(c) for c in hooks.commands)
            found.append(status)
    return found


def safe_command(command: str) -> bool:
    """Whether an installed hook command keeps the working directory off sys.path (selfcmd.py)."""
    import shlex

    try:
        words = shlex.split(command)
    except ValueError:
        return False
    return len(words) > 2 and words[1] in ("-P", "-I") and words[2] == "-m"


def _state(directory: Path) -> str:
    """The local state only (no network: status must answer at once)."""
    from memsync.core import config as cfgmod

    if cfgmod.find_root(directory) != directory.resolve():
        return "not a memory yet (the next session start makes it one)"
    try:
        from memsync.core.memory import open_memory
        from memsync.sync.exchange import unpushed

        mem = open_memory(directory)
        with mem.locked(timeout=2):
            head = mem.git.head_oid()
            waiting = unpushed(mem)
            changes = len(mem.git.scan(write_index=False))
    except MemsyncError as exc:
        return f"error: {exc.message}"
    parts = [f"version {head[:8]}" if head else "no version yet",
             f"{len(waiting)} unpushed" if waiting else "all pushed",
             f"{count(changes, 'uncommitted change')}" if changes else "no uncommitted changes"]
    return ", ".join(parts)
