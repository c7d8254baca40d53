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


def register(app: typer.Typer, guard: CommandWrapper) -> None:
    hooks = typer.Typer(name="hooks", no_args_is_help=True, add_completion=False, rich_markup_mode=None,
                        help="Keep a coding agent's own memory files (Claude Code, Codex) in a memory: "
                        "pulled when a session starts, committed and pushed as the session's run when "
                        "a turn or the session ends.")
    app.add_typer(hooks)

    @hooks.command("install")
    @guard
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
    ) -> None:
        """Add memsync's hooks to the agent's settings (other settings are kept; running it again
        updates them, never duplicates them) and make the directory a memory now."""
        from memsync.agents import hookrun
        from memsync.agents import registry as agents
        from memsync.git import hub as hubmod

        a = agents.agent(agent)
        project = Path.cwd()
        settings = agents.settings_path(a, scope, project)
        agents.load(settings)  # a malformed file is refused before anything else is done
        name, where = agents.default_target(a, scope, project)
        name = memory or name
        target = (directory or where).expanduser().resolve()
        url = hubmod.from_flag(remote).url if remote else None
        _, done = hookrun.ensure_memory(a, name, target, url)
        changed = agents.install(settings, a, name, target, url)
        events = ", ".join(e.event for e in a.events)
        out(f"{'Installed' if changed else 'Already installed:'} {a.label} hooks in {settings} ({events})")
        out(f"Memory: {name} at {target}" + (f" ({done})" if done else ""))
        if a is agents.CODEX:
            out("Note: Codex runs new hooks only once you have reviewed and trusted them (in Codex: /hooks); "
                "Codex has no session-end event, so the last push is at the end of each turn")

    @hooks.command("uninstall")
    @guard
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

    @hooks.command("status")
    @guard
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
            out(f"{h.agent} ({h.scope}): {h.settings} [{', '.join(h.events)}]")
            out(f"  memory {h.memory} at {h.dir}: {h.state}")
            if h.outdated:
                warn(f"{h.settings}: these hooks run `python -m memsync`, which imports code from the project "
                     "the agent runs in; run `memsync hooks install` again to replace them")

    @hooks.command("run", hidden=True, context_settings={"ignore_unknown_options": True,
                                                         "allow_extra_args": True})
    def run(args: Annotated[list[str] | None, typer.Argument()] = None) -> None:
        """What the agent's hooks call, with its hook JSON on stdin. Always exits 0."""
        hookcall.run_hook(list(args or []))

    completion = typer.Typer(name="completion", no_args_is_help=True, add_completion=False,
                             rich_markup_mode=None, help="Shell completion for bash, zsh and fish.")
    app.add_typer(completion)

    @completion.command("show")
    @guard
    def show(shell: ShellArg = None) -> None:
        """Print the completion script (to source it yourself, or to package it)."""
        from memsync.cli import compat

        sys.stdout.write(compat.completion_script(_shell(shell), "memsync", COMPLETE_VAR) + "\n")

    @completion.command("install")
    @guard
    def install_completion(shell: ShellArg = None) -> None:
        """Install the completion script for your shell (bash: ~/.bash_completions + ~/.bashrc;
        zsh: ~/.zfunc + ~/.zshrc; fish: ~/.config/fish/completions)."""
        from memsync.cli import compat

        chosen, path = compat.install_completion(_shell(shell), "memsync", COMPLETE_VAR)
        out(f"{chosen} completion installed in {path}; it takes effect in a new shell")


def _shell(shell: str | None) -> str:
    import os

    from memsync.errors import UsageError

    chosen = shell or Path(os.environ.get("SHELL", "")).name
    if chosen not in SHELLS:
        raise UsageError(f"unsupported shell {chosen or '(none detected)'!r}",
                         f"name one: {', '.join(SHELLS)}, e.g. `memsync completion install bash`")
    return chosen
