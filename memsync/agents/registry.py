"""Coding agents whose own memory files memsync keeps in a memory: where each keeps them, and its
hook settings file (Claude Code's settings.json, Codex's hooks.json), edited safely.

Installing rewrites only memsync's own hook entries: everything else in the file stays as it was,
running it twice changes nothing, and a file that is not valid JSON is refused untouched.
"""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path
from typing import Any

from memsync.agents.projectdir import LOCAL_SETTINGS, auto_memory_dir
from memsync.checks import globs
from memsync.errors import ConfigError, UsageError
from memsync.util.records import field, recordclass

MARK = "memsync hooks run"  # how memsync recognises its own entries in a settings file
SCOPES = ("user", "project", "local")  # local: the project's .claude/settings.local.json (personal)
# never one of an agent's memory files, wherever it lies: Claude Code's Auto Dream lock (a pid and a
# time), Codex's SQLite state (a live database: see docs/INTEGRATIONS.md)
NEVER_SYNCED = (".consolidate-lock", "*.sqlite", "*.sqlite-*", "*.sqlite3", "*.db")


@recordclass(frozen=True)
class HookEvent:
    event: str  # the agent's event name
    verb: str  # `memsync hooks run VERB`
    matcher: str | None
    timeout: int  # seconds the agent waits before cancelling the hook


@recordclass(frozen=True)
class Agent:
    key: str
    label: str
    home_env: str  # the variable that moves the agent's home
    home_default: str
    settings_file: str  # under the home (user scope) or the project (project scope)
    project_settings: str
    events: tuple[HookEvent, ...]
    exclude: tuple[str, ...]  # .git/info/exclude lines when the memory is the agent's whole home
    allowed: tuple[str, ...]  # and the only paths a version from the hub may hold then

    @property
    def home(self) -> Path:
        return Path(os.environ.get(self.home_env) or Path.home() / self.home_default).expanduser()


# SessionStart without a matcher: every source (startup, resume, clear, compact, fork and any
# later one) pulls. StopFailure fires instead of Stop when a turn ends on an API error: its writes
# are committed and pushed then, not at the next session.
CLAUDE_CODE = Agent(
    "claude-code", "Claude Code", "CLAUDE_CONFIG_DIR", ".claude", "settings.json", ".claude/settings.json",
    (HookEvent("SessionStart", "session-start", None, 30),
     HookEvent("Stop", "stop", None, 30),
     HookEvent("StopFailure", "stop", None, 30),
     # Claude Code gives SessionEnd hooks a short exit budget (raised to the declared timeout);
     # Stop has already pushed each turn, so this one only catches the last edits.
     HookEvent("SessionEnd", "session-end", None, 15)),
    ("/*", "!/CLAUDE*.md", "!/rules/", "!/projects/", "/projects/*/*", "!/projects/*/memory/", *NEVER_SYNCED),
    ("/CLAUDE*.md", "/rules/**", "/projects/*/memory/**"),
)
CODEX = Agent(
    "codex", "Codex CLI", "CODEX_HOME", ".codex", "hooks.json", ".codex/hooks.json",
    (HookEvent("SessionStart", "session-start", None, 30),
     HookEvent("Stop", "stop", None, 30),
     HookEvent("StopFailure", "stop", None, 30)),  # Codex has no session-end event
    ("/*", "!/AGENTS*.md", "!/memories/", *NEVER_SYNCED),
    ("/AGENTS*.md", "/memories/**"),
)
AGENTS = {a.key: a for a in (CLAUDE_CODE, CODEX)}


def agent(key: str) -> Agent:
    try:
        return AGENTS[key]
    except KeyError:
        raise UsageError(f"unknown agent {key!r}", f"use one of: {', '.join(AGENTS)}") from None


def allowed_path(a: Agent, path: str) -> bool:
    """Whether `path` is one of the agent's memory files (gitignore's rules: checks/globs.py)."""
    return not never_synced(path) and globs.matches_list(a.allowed, path)


def never_synced(path: str) -> bool:
    """Whether `path` (or a folder on its way) is a file memsync never syncs (NEVER_SYNCED)."""
    return globs.matches_list(NEVER_SYNCED, path)


def default_target(a: Agent, scope: str, project: Path) -> tuple[str, Path]:
    """user scope: the agent's home, of which only its memory files are synced; project and local
    scope (Claude Code): the repository's auto-memory directory, in a memory named after the
    repository's identity (git/project.py), never after the folder's name alone."""
    if scope in ("project", "local") and a is CLAUDE_CODE:
        from memsync.git.project import identify

        ident = identify(project)
        return project_memory_name(ident.label, ident.key), auto_memory_dir(a.home, ident.root, ident.toplevel)
    return a.key, a.home


def project_memory_name(label: str, key: str) -> str:
    """claude-<repository name>-<8 hex digits of its identity>: readable, and distinct for two
    repositories of the same name."""
    import hashlib

    from memsync.util.names import suggest_name

    digest = hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()[:8]
    readable = suggest_name(label) or "project"
    return f"claude-{readable[:45].strip('-')}-{digest}"


def settings_path(a: Agent, scope: str, project: Path) -> Path:
    if scope not in SCOPES:
        raise UsageError(f"invalid --scope {scope!r}", "use user, project or local")
    if scope == "user":
        return a.home / a.settings_file
    if scope == "local":
        if a is not CLAUDE_CODE:
            raise UsageError(f"{a.label} has no local settings file", "use --scope user or project")
        return _project_root(project) / LOCAL_SETTINGS
    return _project_root(project) / a.project_settings


def _project_root(project: Path) -> Path:
    """This worktree's top level, where the agent reads the project's settings."""
    try:
        from memsync.git.project import identify

        return identify(project, assign=False).toplevel
    except Exception:  # no repository, or one libgit2 cannot read: the directory itself
        return project


def hook_command(verb: str, a: Agent, name: str, directory: Path | None, remote: str | None,
                 scope: str = "user", dream: str = "commit") -> str:
    """The command an agent runs. User and local scope (the user's own files): this Python's
    memsync, so it works from any PATH, and never a module from the project the agent runs the
    hook in (selfcmd.py). Project scope (a file the team shares): `memsync` from PATH, and no
    path of the installer's machine: the memory's folder is found where the hook runs
    (`--project`), as Claude Code finds it there, or the agent's home there (`--agent-home`:
    Codex). `directory` None: one of those."""
    from memsync.util.selfcmd import memsync_command

    prefix = ["memsync"] if scope == "project" else memsync_command()
    words = [*prefix, "hooks", "run", verb, "--agent", a.key, "--memory", name]
    if directory is not None:
        words += ["--dir", str(directory)]
    else:  # found where the hook runs: the project's folder (Claude Code), or the agent's home
        words += ["--project"] if a is CLAUDE_CODE else ["--agent-home"]
    if remote:
        words += ["--remote", remote]
    if dream != "commit":  # Auto Dream's rewrite made a proposal (the default commits it)
        words += ["--dream", dream]
    return shlex.join(words)


# -- the settings file ---------------------------------------------------------------------------
def load(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from exc
    if not text.strip():
        return {}
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})",
                          "fix it by hand, then run the command again; memsync left it untouched") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path} holds a JSON {type(data).__name__}, not an object",
                          "fix it by hand, then run the command again; memsync left it untouched")
    hooks = data.get("hooks", {})
    if not isinstance(hooks, dict) or not all(isinstance(v, list) for v in hooks.values()):
        raise ConfigError(f"{path}: `hooks` is not an object of lists",
                          "fix it by hand, then run the command again; memsync left it untouched")
    return data


def _indent(path: Path) -> int:
    """The file's own indentation (its first indented line), so a rewrite changes only our lines."""
    try:
        for line in path.read_text(encoding="utf-8").splitlines()[1:]:
            stripped = line.lstrip(" ")
            if stripped and len(stripped) < len(line):
                return min(len(line) - len(stripped), 8)
    except OSError:
        pass
    return 2


def writable_target(path: Path, project: Path | None = None) -> Path:
    """The file a settings path names: a symlink (a settings file kept in a dotfiles repository) is
    followed, so the file it points to gets the hooks and the link stays a link. In a project
    (`project` given: .claude/ is the repository's to write) a link, the file's or the `.claude`
    folder's, is followed only to a file inside the project."""
    target = path.resolve() if path.is_symlink() or path.parent.is_symlink() else path
    if project is None and path.parent.name == ".claude" and path.parent.parent != Path.home():
        project = path.parent.parent  # a settings file of a project, whichever the caller
    if project is not None:
        root = project.resolve()
        if not target.resolve().is_relative_to(root):
            raise ConfigError(f"{path} leads to {target.resolve()}, outside the project (a symbolic link)",
                              "memsync writes hook settings only inside the project: replace the link "
                              "with a file or a folder, or use --scope user")
    return target


def save(path: Path, data: dict[str, Any], project: Path | None = None) -> None:
    """Atomically, keeping the file's permissions and indentation (and a symlink a link)."""
    from memsync.core.config import atomic_write

    path = writable_target(path, project)
    mode = path.stat().st_mode & 0o7777 if path.exists() else None
    try:
        atomic_write(path, json.dumps(data, indent=_indent(path), ensure_ascii=False) + "\n")
        if mode is not None:
            path.chmod(mode)
    except OSError as exc:
        raise ConfigError(f"cannot write {path}: {exc.strerror}") from exc


def _ours(hook: Any) -> bool:
    return isinstance(hook, dict) and MARK in str(hook.get("command", ""))


def without_ours(groups: list[Any]) -> list[Any]:
    """The event's matcher groups with memsync's hooks taken out (a group left empty goes)."""
    kept = []
    for group in groups:
        if not isinstance(group, dict) or not isinstance(group.get("hooks"), list):
            kept.append(group)
            continue
        hooks = [h for h in group["hooks"] if not _ours(h)]
        if len(hooks) == len(group["hooks"]):
            kept.append(group)
        elif hooks:
            kept.append({**group, "hooks": hooks})
    return kept


@recordclass
class Installed:
    path: Path
    events: list[str] = field(default_factory=list)
    commands: list[str] = field(default_factory=list)


def install(path: Path, a: Agent, name: str, directory: Path | None, remote: str | None, *,
            scope: str = "user", project: Path | None = None, dream: str = "commit") -> bool:
    """Put memsync's hooks in the settings file; True if the file changed. `directory` None: the
    hooks find the project's memory folder where they run (project and local scope)."""
    data = load(path)
    before = json.dumps(data, sort_keys=True)
    hooks = data.setdefault("hooks", {})
    for event in list(hooks):  # an event memsync no longer uses loses its old entry
        if event not in {ev.event for ev in a.events} and without_ours(hooks[event]) != hooks[event]:
            hooks[event] = without_ours(hooks[event])
            if not hooks[event]:
                del hooks[event]
    for ev in a.events:
        group: dict[str, Any] = {} if ev.matcher is None else {"matcher": ev.matcher}
        command = hook_command(ev.verb, a, name, directory, remote, scope, dream)
        group["hooks"] = [{"type": "command", "command": command, "timeout": ev.timeout}]
        hooks[ev.event] = [*without_ours(hooks.get(ev.event, [])), group]
    if json.dumps(data, sort_keys=True) == before:
        return False
    save(path, data, project)
    return True


def uninstall(path: Path) -> bool:
    if not path.exists():
        return False
    data = load(path)
    hooks = data.get("hooks")
    if not hooks:
        return False
    changed = False
    for event in list(hooks):
        kept = without_ours(hooks[event])
        if kept != hooks[event]:
            changed = True
            if kept:
                hooks[event] = kept
            else:
                del hooks[event]
    if changed:
        save(path, data)
    return changed


def installed(path: Path) -> Installed | None:
    """memsync's hooks found in a settings file, or None (also for an unreadable file)."""
    try:
        data = load(path)
    except ConfigError:
        return None
    found = Installed(path)
    for event, groups in data.get("hooks", {}).items():
        for group in groups:
            for hook in (group.get("hooks") or []) if isinstance(group, dict) else []:
                if _ours(hook):
                    found.events.append(event)
                    found.commands.append(str(hook["command"]))
    return found if found.events else None


def parse_command(command: str) -> dict[str, str]:
    """--agent/--memory/--dir/--project/--remote of an installed hook command."""
    return options(shlex.split(command))


FLAGS = ("project", "agent-home")  # options without a value


def options(words: list[str]) -> dict[str, str]:
    """`--key value` pairs and `--flag`s ("" as their value) of a hook command's words."""
    found: dict[str, str] = {}
    i = 0
    while i < len(words):
        word = words[i]
        if word.startswith("--") and word[2:] in FLAGS:
            found[word[2:]] = ""
            i += 1
        elif word.startswith("--") and i + 1 < len(words):
            found[word[2:]] = words[i + 1]
            i += 2
        else:
            i += 1
    return found
