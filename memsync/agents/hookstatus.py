"""`memsync hooks status`: where memsync's hooks are installed, and each memory folder they keep.

Every folder is reported on its own: the one the installed settings name (for a project, the
one Claude Code uses on this machine now, `autoMemoryDirectory` included), and every other clone
whose hooks ran on this machine (MEMSYNC_HOME/hook-clones), each with its own last failure.
"""

from __future__ import annotations

from pathlib import Path

from memsync.agents import hookfail
from memsync.agents import registry as agents
from memsync.errors import MemsyncError
from memsync.git.scan import scan
from memsync.util.records import field, recordclass
from memsync.util.wording import count


@recordclass
class HookStatus:
    agent: str
    scope: str  # user | project | local | clone (another folder whose hooks ran here)
    settings: str
    events: list[str] = field(default_factory=list)
    memory: str = ""
    dir: str = ""
    state: str = ""
    # installed by an earlier memsync: `python -m memsync` without -P/-I imports from the project
    outdated: bool = False
    moved_from: str = ""  # this project's folder before autoMemoryDirectory moved it


def collect(project: Path) -> list[HookStatus]:
    found: list[HookStatus] = []
    for a in agents.AGENTS.values():
        for scope in agents.SCOPES:
            try:
                path = agents.settings_path(a, scope, project)
            except MemsyncError:  # Codex has no local settings file
                continue
            hooks = agents.installed(path)
            if hooks is not None:
                found.append(_installed(a, scope, path, hooks, project))
    shown = {(s.memory, s.dir) for s in found}
    for clone in hookfail.clones():
        if (clone.memory, clone.dir) in shown:
            continue
        status = HookStatus(clone.agent, "clone", "", [], clone.memory, clone.dir)
        status.state = _with_failure(clone.memory, Path(clone.dir), _state(Path(clone.dir)))
        found.append(status)
    return found


def _installed(a: agents.Agent, scope: str, path: Path, hooks: agents.Installed, project: Path) -> HookStatus:
    opts = agents.parse_command(hooks.commands[0])
    status = HookStatus(a.key, scope, str(path), hooks.events, opts.get("memory", "?"), opts.get("dir", "?"))
    status.outdated = any(not safe_command(c) for c in hooks.commands)
    if "agent-home" in opts:
        status.dir = str(a.home)
    if "project" in opts:  # the folder is found where the hook runs: here, now
        from memsync.agents.projectdir import auto_memory_dir
        from memsync.git.project import identify

        try:
            ident = identify(project, assign=False)
            status.dir = str(auto_memory_dir(a.home, ident.root, ident.toplevel))
        except MemsyncError as exc:
            status.state = f"FAILING: {exc.message}"
            return status
        earlier = [c.dir for c in hookfail.clones() if c.memory == status.memory and c.project == str(ident.root)
                   and c.dir != status.dir]
        status.moved_from = earlier[0] if earlier else ""
    status.state = _with_failure(status.memory, Path(status.dir), _state(Path(status.dir)))
    return status


def _with_failure(memory: str, directory: Path, state: str) -> str:
    failed = hookfail.last_failure(memory, directory)
    return f"FAILING: {failed}; {state}" if failed else state


def safe_command(command: str) -> bool:
    """Whether an installed hook command keeps the working directory off sys.path (selfcmd.py):
    this Python with -P/-I, or the `memsync` console script from PATH (a project's shared file)."""
    import shlex

    try:
        words = shlex.split(command)
    except ValueError:
        return False
    if words[:1] == ["memsync"]:
        return True
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
            changes = len(scan(mem.git, write_index=False).changes)
    except MemsyncError as exc:
        return f"error: {exc.message}"
    parts = [f"version {head[:8]}" if head else "no version yet",
             f"{len(waiting)} unpushed" if waiting else "all pushed",
             f"{count(changes, 'uncommitted change')}" if changes else "no uncommitted changes"]
    return ", ".join(parts)
