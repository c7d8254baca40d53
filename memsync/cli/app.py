"""The `memsync` app: the typer application the verb modules attach their commands to (verbs.py),
and `main`, which runs one command line through it.

Exit codes are decided in failures.call_command, from the error classes in errors.py;
`handle_errors` carries them to typer, and `main` returns them to the entry point (entry.py),
the one caller of sys.exit.
"""

from __future__ import annotations

import functools
import os
import signal
import sys
import threading
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

import typer

from memsync import __version__
from memsync.cli import compat
from memsync.cli.failures import Stop, call_command, interrupt, unexpected
from memsync.cli.output import err, warn
from memsync.errors import EXIT_INTERRUPTED, EXIT_USAGE, MemsyncError

F = TypeVar("F", bound=Callable[..., Any])

app = typer.Typer(
    name="memsync",
    help="A memory that survives throwaway sandboxes: a git-backed directory pulled before an "
    "agent's run, committed with the run's id after it, and pushed to a git remote.",
    add_completion=False,
    no_args_is_help=True,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def handle_errors(func: F) -> F:
    """The one place where errors become `error:`/`hint:` lines and exit codes (failures.py)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return call_command(func, *args, **kwargs)
        except Stop as stop:
            raise typer.Exit(stop.code) from None

    return wrapper  # type: ignore[return-value]


def _version(value: bool) -> None:
    if value:
        typer.echo(f"memsync {__version__}")
        raise typer.Exit(0)


@app.callback()
def main_options(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="Show the version and exit.")] = False,
) -> None:
    """memsync: git-backed memory for agents in throwaway sandboxes."""


from memsync.cli.verbs import register  # noqa: E402  (commands attach themselves to `app`)

register(app, handle_errors)


compat.lean_coercion()


def _app_for(words: list[str]) -> typer.Typer:
    """The app with only the command being run: typer inspects the signature of every command it
    builds (docs/PERFORMANCE.md, "Figures behind the code's speed mechanisms"). Anything else (no command, an option
    first, an unknown name) gets the whole app, so help and "no such command" stay the same."""
    from memsync.cli.verbs import register_for

    register_for(app, handle_errors, words)
    if not words or words[0].startswith("-"):
        return app
    for info in app.registered_commands:
        name = info.name or (compat.command_name(info.callback.__name__) if info.callback else None)
        if name == words[0]:
            import copy

            slim = copy.copy(app)
            slim.registered_commands = [info]
            slim.registered_groups = []
            return slim
    for group in app.registered_groups:
        if group.name == words[0]:
            import copy

            slim = copy.copy(app)
            slim.registered_commands = []
            slim.registered_groups = [group]
            return slim
    return app


_built: dict[int, tuple[object, Callable[..., Any]]] = {}  # id(command info) -> (info, click command)


def _command_for(chosen: typer.Typer) -> Callable[..., Any]:
    """What typer would call for `chosen`; the click command of a single verb is built once per
    process and reused (building it inspects the verb's signature, which every call in one
    process, e.g. a server's, would pay again; docs/PERFORMANCE.md)."""
    infos = [*chosen.registered_commands, *chosen.registered_groups]
    compat.install_except_hook()
    if chosen is app or len(infos) != 1:
        whole: Callable[..., Any] = _plain_metavars(compat.click_command(chosen))  # what calling the Typer builds
        return whole
    found = _built.get(id(infos[0]))
    if found is None or found[0] is not infos[0]:
        found = _built[id(infos[0])] = (infos[0], _plain_metavars(compat.click_command(chosen)))
    return found[1]


def _plain_metavars(command: Any) -> Any:
    """Help in a user's words: `--remote URL`-style names instead of the Python types typer shows
    (`--memory <list[str]>`, `command... <list[str]>`). Options get their name in capitals,
    arguments their name alone."""
    for param in getattr(command, "params", []):
        if getattr(param, "param_type_name", "") == "option":
            if param.metavar is None and not param.is_flag and not param.count:
                param.metavar = (param.name or "value").upper()
        elif getattr(param, "param_type_name", "") == "argument":
            param.display_type_rich = lambda ctx: None  # the name (and "..." for many) says it
    for sub in getattr(command, "commands", {}).values():
        _plain_metavars(sub)
    return command


def prepare() -> None:
    """Build every verb's click command ahead of time: for a process that runs many commands
    after a fork (`memsync serve`), so that none of them pays for it."""
    from memsync.cli.verbs import OCCASIONAL

    register_names = [info.name or (compat.command_name(info.callback.__name__) if info.callback else "")
                      for info in app.registered_commands]
    for verb in [*register_names, *OCCASIONAL]:
        command = _command_for(_app_for([verb])) if verb else app
        if command is not app:
            _help_options(command)


def _help_options(command: Any, parent: Any = None) -> None:
    """Build the help option of `command` and of its subcommands now, in a context made as a real
    parse makes it (the option's names, `-h/--help`, come from there): click builds it, and imports
    its decorators module, on the first parse in each process (docs/PERFORMANCE.md)."""
    ctx = command.context_class(command, info_name=command.name, parent=parent, **command.context_settings)
    command.get_help_option(ctx)
    for sub in getattr(command, "commands", {}).values():
        _help_options(sub, ctx)


def main(argv: list[str] | None = None) -> int:
    """Entry point: typer's own usage errors also become one `error:` line and exit code 2."""
    words = sys.argv[1:] if argv is None else argv
    if os.environ.get("_MEMSYNC_COMPLETE"):  # a shell asking for completions (`memsync completion`)
        compat.completion_init()
    if not words:  # bare `memsync`: the help, on stdout, as success
        words = argv = ["--help"]
    previous = signal.signal(signal.SIGINT, interrupt) if threading.current_thread() is threading.main_thread() \
        else None
    try:
        code = _command_for(_app_for(words))(args=argv, prog_name="memsync", standalone_mode=False)
    except typer.Exit as exc:  # handle_errors has already said why
        return exc.exit_code
    except MemsyncError as exc:  # raised outside a command body (Ctrl-C while parsing)
        err(f"error: {exc.message}")
        return exc.exit_code
    except typer.Abort:
        err("error: aborted")
        return EXIT_INTERRUPTED
    except KeyboardInterrupt:
        err("error: interrupted")
        return EXIT_INTERRUPTED
    except Exception as exc:  # typer's vendored click usage errors carry format_message()
        if hasattr(exc, "format_message") and hasattr(exc, "exit_code"):
            err(f"error: {exc.format_message()}")
            command = getattr(getattr(exc, "ctx", None), "command_path", "memsync")
            err(f"hint: see `{command} --help`")
            return EXIT_USAGE if exc.exit_code == 2 else int(exc.exit_code)
        if os.environ.get("MEMSYNC_DEBUG") == "1":
            raise
        return unexpected(exc)
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
    return code if isinstance(code, int) else 0


__all__ = ["app", "handle_errors", "main", "prepare", "warn"]
