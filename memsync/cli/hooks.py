"""hooks (coding agents' own memory files) and completion (shell completion scripts)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from memsync.cli import hookcall
from memsync.cli.base import CommandWrapper
from memsync.cli.output import out, print_json, warn

SHELLS = ("bash", "zsh", "fish")
COMPLETE_VAR = "_MEMSYNC_COMPLETE"

AgentArg = Annotated[str, typer.Argument(help="claude-code or codex.")]
ScopeOpt = Annotated[str, typer.Option("--scope", help="user (~/.claude/settings.json, ~/.codex/hooks.json), "
                                       "project (./.claude/settings.json, ./.codex/hooks.json) or local "
                                       "(./.claude/settings.local.json: a personal hook in a shared "
                                       "repository).")]
ShellArg = Annotated[str | None, typer.Argument(help="bash, zsh or fish (default: from $SHELL).")]


def register(app: typer.Typer, wrap: CommandWrapper) -> None:
    hooks = typer.Typer(name="hooks", no_args_is_help=True, add_completion=False, rich_markup_mode=None,
                        help="Keep a coding agent's own memory files (Claude Code, Codex) in a memory: "
                        "pulled when a session starts, committed and pushed as the session's run when "
                        "a turn or the session ends.")
    app.add_typer(hooks)

    hooks.command("install")(wrap(install))
    hooks.command("uninstall")(wrap(uninstall))
    hooks.command("status")(wrap(status))
    hooks.command("run", hidden=True,
                  context_settings={"ignore_unknown_options": True, "allow_extra_args": True})(run)

    completion = typer.Typer(name="completion", no_args_is_help=True, add_completion=False,
                             rich_markup_mode=None, help="Shell completion for bash, zsh and fish.")
    app.add_typer(completion)

    completion.command("show")(wrap(show))
    completion.command("install")(wrap(install_completion))


def _install(agent: str, memory: str | None, directory: Path | None, scope: str, remote: str | None,
             dream: str = "commit") -> None:
    from memsync.agents import hookrun
    from memsync.agents import registry as agents
    from memsync.agents.dream import MODES

    a = agents.agent(agent)
    if dream not in MODES or (dream != "commit" and a is not agents.CLAUDE_CODE):
        from memsync.errors import UsageError

        raise UsageError(f"--dream {dream} is not for {a.label}" if dream in MODES else f"unknown --dream {dream!r}",
                         "--dream commit|propose, for claude-code (Auto Dream is Claude Code's)")
    project = Path.cwd()
    settings = agents.settings_path(a, scope, project)
    agents.load(settings)  # a malformed file is refused before anything else is done
    if scope == "project" and directory is not None:
        from memsync.errors import UsageError

        raise UsageError("--dir names a folder of this machine, which a project's shared settings must not",
                         "use --scope local (your own settings.local.json) or --scope user")
    name, where = agents.default_target(a, scope, project)
    name = memory or name
    target = (directory or where).expanduser().resolve()
    url = _hub_url(remote, scope)
    inside = settings.parent.parent if scope in ("project", "local") else None
    if inside is not None:
        agents.writable_target(settings, inside)  # no hook settings through a link out of the project
    if scope == "local":
        _personal(settings, project)
    _, done = hookrun.ensure_memory(a, name, target, url)
    found_there = directory is None and scope in ("project", "local")
    changed = agents.install(settings, a, name, None if found_there else target, url, scope=scope,
                             project=inside, dream=dream)
    events = ", ".join(e.event for e in a.events)
    out(f"{'Installed' if changed else 'Already installed:'} {a.label} hooks in {settings} ({events})")
    out(f"Memory: {name} at {target}" + (f" ({done})" if done else ""))
    if dream == "propose":
        out("Auto Dream's rewrites become proposals to review (`memsync proposals`), never the memory's version")
    if found_there and a is agents.CLAUDE_CODE:
        out("The hooks find the project's memory folder where they run (`memsync` from PATH on a teammate's "
            "machine), as Claude Code does, `autoMemoryDirectory` included")
    if a is agents.CODEX:
        out("Note: Codex runs new hooks only once you have reviewed and trusted them (in Codex: /hooks); "
            "Codex has no session-end event, so the last push is at the end of each turn")


def _hub_url(remote: str | None, scope: str) -> str | None:
    """The hub URL the hooks name. A project's shared settings name no hub on this machine."""
    from memsync.core.hubbind import bind
    from memsync.errors import UsageError
    from memsync.git import hub as hubmod

    if not remote:
        return None
    hub = bind(hubmod.from_flag(remote))
    if scope == "project" and not hub.reached_elsewhere:
        raise UsageError(f"--remote {remote} is a hub on this machine, which a project's shared settings must not name",
                         "give a network hub (https://, ssh://, git://), set MEMSYNC_REMOTE on each machine, "
                         "or use --scope local")
    return hub.url.url


def _personal(settings: Path, project: Path) -> None:
    """settings.local.json is personal: refused if the repository tracks it, else excluded from
    it (.git/info/exclude), so `git add -A` never commits a personal hook."""
    from memsync.errors import UsageError
    from memsync.git.repofiles import exclude, is_tracked

    if is_tracked(project, settings):
        raise UsageError(f"{settings} is tracked by the repository: it is shared, not personal",
                         "untrack it (`git rm --cached .claude/settings.local.json`), or use --scope user")
    written = exclude(project, settings)
    if written is not None:
        out(f"{settings.name} is kept out of the repository ({written})")


def _shell(shell: str | None) -> str:
    import os

    from memsync.errors import UsageError

    chosen = shell or Path(os.environ.get("SHELL", "")).name
    if chosen not in SHELLS:
        raise UsageError(f"unsupported shell {chosen or '(none detected)'!r}",
                         f"name one: {', '.join(SHELLS)}, e.g. `memsync completion install bash`")
    return chosen


def install(
    agent: AgentArg,
    memory: Annotated[str | None, typer.Option("--memory", help="Memory name (default: the agent's "
                                               "name; project and local scope: claude-<repository>-<id>, "
                                               "from the repository's remote URL or its own id).")] = None,
    directory: Annotated[Path | None, typer.Option("--dir", help="The directory kept in the memory "
                                                   "(default: the agent's home, of which only its "
                                                   "memory files are synced; project scope: the "
                                                   "project's auto-memory directory).")] = None,
    scope: ScopeOpt = "user",
    remote: Annotated[str | None, typer.Option("--remote", help="Hub URL (default: MEMSYNC_REMOTE, "
                                               "else the embedded hub).")] = None,
    dream: Annotated[str, typer.Option("--dream", metavar="commit|propose", help="Claude Code's Auto Dream "
                                       "rewrite: commit it to the memory (as `dream`), or make it a "
                                       "proposal to review (`memsync review`).")] = "commit",
) -> None:
    """Add memsync's hooks to the agent's settings (other settings are kept; running it again
    updates them, never duplicates them) and make the directory a memory now."""
    _install(agent, memory, directory, scope, remote, dream)


def uninstall(agent: AgentArg, scope: ScopeOpt = "user") -> None:
    """Remove memsync's hooks from the agent's settings (nothing else is changed; the memory
    directory stays as it is)."""
    from memsync.agents import registry as agents

    a = agents.agent(agent)
    settings = agents.settings_path(a, scope, Path.cwd())
    if agents.uninstall(settings):
        out(f"Removed {a.label} hooks from {settings}")
    else:
        out(f"No memsync hooks in {settings}")


def status(json: Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")] = False) -> None:
    """Where memsync's hooks are installed, and the state of each memory they keep."""
    from memsync.agents import hookstatus

    found = hookstatus.collect(Path.cwd())
    if json:
        print_json(found)
        return
    if not found:
        out("No memsync hooks installed (user settings, or this project's)")
        return
    for h in found:
        if h.scope == "clone":
            out(f"{h.agent or 'hooks'} (another folder whose hooks ran here): memory {h.memory} at {h.dir}: "
                f"{h.state}")
            continue
        out(f"{h.agent} ({h.scope}): {h.settings} [{', '.join(h.events)}]")
        out(f"  memory {h.memory} at {h.dir}: {h.state}")
        if h.moved_from:
            out(f"  moved by autoMemoryDirectory from {h.moved_from} (that folder is no longer synced)")
        if h.outdated:
            warn(f"{h.settings}: these hooks run `python -m memsync`, which imports code from the project "
                 "the agent runs in; run `memsync hooks install` again to replace them")


def run(args: Annotated[list[str] | None, typer.Argument()] = None) -> None:
    """What the agent's hooks call, with its hook JSON on stdin. Always exits 0."""
    hookcall.run_hook(list(args or []))


def show(shell: ShellArg = None) -> None:
    """Print the completion script (to source it yourself, or to package it)."""
    from memsync.cli import compat

    sys.stdout.write(compat.completion_script(_shell(shell), "memsync", COMPLETE_VAR) + "\n")


def install_completion(shell: ShellArg = None) -> None:
    """Install the completion script for your shell (bash: ~/.bash_completions + ~/.bashrc;
    zsh: ~/.zfunc + ~/.zshrc; fish: ~/.config/fish/completions)."""
    from memsync.cli import compat

    chosen, path = compat.install_completion(_shell(shell), "memsync", COMPLETE_VAR)
    out(f"{chosen} completion installed in {path}; it takes effect in a new shell")
