"""The `memsync` command: parse arguments, call one core function, render its result.

This is the only module that imports typer. Exit codes are decided in `handle_errors`, from the
error classes in errors.py; nothing else calls sys.exit.
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
from memsync.errors import EXIT_FAILURE, EXIT_INTERRUPTED, EXIT_USAGE, Interrupted, MemsyncError
from memsync.output import err, warn

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
    """The one place where errors become `error:`/`hint:` lines and exit codes."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from memsync import notices

        notices.handler = warn
        notices.reset()
        try:
            return func(*args, **kwargs)
        except MemsyncError as raised:
            exc = raised
            if raised.__cause__ is not None:  # "cannot write X: No space left on device" says the disk is full
                from memsync.git.diskfull import renamed

                exc = renamed(raised)
            err(f"error: {exc.message}")
            if exc.hint:
                err(f"hint: {exc.hint}")
            if os.environ.get("MEMSYNC_DEBUG") == "1":
                raise
            raise typer.Exit(exc.exit_code) from None
        except KeyboardInterrupt:
            err("error: interrupted")
            raise typer.Exit(EXIT_INTERRUPTED) from None
        except Exception as exc:
            full = disk_full(exc)
            if full is None or os.environ.get("MEMSYNC_DEBUG") == "1":
                raise
            err(f"error: {full.message}")
            err(f"hint: {full.hint}")
            raise typer.Exit(full.exit_code) from None

    return wrapper  # type: ignore[return-value]


def disk_full(exc: BaseException) -> MemsyncError | None:
    """A library error that is a full disk (git/diskfull.py), as the error to show; else None."""
    from pathlib import Path

    from memsync import config as cfgmod
    from memsync.git import diskfull
    from memsync.hub import memsync_home

    try:
        cwd = Path.cwd()
        root = cfgmod.find_root(cwd)
    except (OSError, MemsyncError):
        return None
    places = ([root / ".git"] if root is not None else []) + [cwd, memsync_home()]
    return diskfull.explain(exc, places)


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


from memsync.commands import register  # noqa: E402  (commands attach themselves to `app`)

register(app, handle_errors)


def _lean_coercion() -> None:
    """Start-up: typer builds a pydantic TypeAdapter (importing pydantic, ~100 ms) for every
    parameter a command has, even unset ones. Unset values and values that already have the
    declared plain type need no coercion; anything else still goes through typer's own."""
    try:
        from typer._coercion import RuntimeParam, build_runtime_param
        from typer.core import _TyperParameter
    except ImportError:  # another typer: keep its behaviour
        return
    import types
    import typing
    from pathlib import Path

    def plain_types(annotation: Any) -> tuple[type, ...]:
        if annotation in (str, int, float):
            return (annotation,)
        if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
            args = typing.get_args(annotation)
            if all(a in (str, int, float, type(None)) for a in args):
                return tuple(a for a in args if a is not type(None))
        return ()

    class _Lazy(RuntimeParam):
        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            kinds = plain_types(self.annotation)
            if type(value) in kinds:
                return value
            if type(value) is str and len(kinds) == 1 and kinds[0] in (int, float):
                try:  # `--checkpoint 0`: a number typed on the command line, as int()/float() read it
                    return kinds[0](value)
                except ValueError:
                    pass  # typer's own coercion words the usage error
            if self.annotation in (Path, Path | None) and (type(value) is str or isinstance(value, Path)):
                return Path(value)  # `clone NAME DEST`: what pydantic makes of it, without importing it
            if (isinstance(value, (list, tuple)) and all(type(v) is str for v in value)
                    and self.annotation in (list[str], list[str] | None)):
                return list(value)
            if param._runtime_param is self:
                param._runtime_param = build_runtime_param(param.type_descriptor)
            return param._runtime_param._coerce_value(value, param=param, ctx=ctx)

    def get_runtime_param(self: Any) -> Any:
        if self._runtime_param is None:
            descriptor = self.type_descriptor
            if descriptor.file_annotation is None:
                self._runtime_param = _Lazy(descriptor.parameter_info, descriptor.annotation)
            else:
                self._runtime_param = build_runtime_param(descriptor)
        return self._runtime_param

    setattr(_TyperParameter, "get_runtime_param", get_runtime_param)  # noqa: B010


_lean_coercion()


def _app_for(words: list[str]) -> typer.Typer:
    """The app with only the command being run: typer inspects the signature of every command it
    builds (~12 ms for all of them, on every invocation). Anything else (no command, an option
    first, an unknown name) gets the whole app, so help and "no such command" stay the same."""
    from memsync.commands import register_for

    register_for(app, handle_errors, words)
    if not words or words[0].startswith("-"):
        return app
    from typer.main import get_command_name

    for info in app.registered_commands:
        name = info.name or (get_command_name(info.callback.__name__) if info.callback else None)
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
    process and reused (building it inspects the verb's signature: ~3-5 ms per invocation, all of
    it spent again by every call in one process, e.g. a server's)."""
    infos = [*chosen.registered_commands, *chosen.registered_groups]
    if chosen is app or len(infos) != 1:
        return chosen
    from typer.main import except_hook, get_command

    if sys.excepthook != except_hook:  # as typer's own __call__ does
        sys.excepthook = except_hook
    found = _built.get(id(infos[0]))
    if found is None or found[0] is not infos[0]:
        found = _built[id(infos[0])] = (infos[0], get_command(chosen))
    return found[1]


def prepare() -> None:
    """Build every verb's click command ahead of time: for a process that runs many commands
    after a fork (`memsync serve`), so that none of them pays for it."""
    from typer.main import get_command_name

    from memsync.commands import OCCASIONAL

    register_names = [info.name or (get_command_name(info.callback.__name__) if info.callback else "")
                      for info in app.registered_commands]
    for verb in [*register_names, *OCCASIONAL]:
        command = _command_for(_app_for([verb])) if verb else app
        if command is not app:
            _help_options(command)


def _help_options(command: Any, parent: Any = None) -> None:
    """Build the help option of `command` and of its subcommands now, in a context made as a real
    parse makes it (the option's names, `-h/--help`, come from there): click builds it, and imports
    its decorators module, on the first parse in each process, ~1 ms of every served command."""
    ctx = command.context_class(command, info_name=command.name, parent=parent, **command.context_settings)
    command.get_help_option(ctx)
    for sub in getattr(command, "commands", {}).values():
        _help_options(sub, ctx)


def _interrupt(signum: int, frame: object) -> None:
    """Ctrl-C as a memsync error rather than KeyboardInterrupt: pygit2's callbacks pass an
    Exception through libgit2 (aborting the transfer), but a KeyboardInterrupt raised inside one
    is swallowed by cffi and the interrupt is lost."""
    raise Interrupted("interrupted")


def main(argv: list[str] | None = None) -> int:
    """Entry point: typer's own usage errors also become one `error:` line and exit code 2."""
    words = sys.argv[1:] if argv is None else argv
    if os.environ.get("_MEMSYNC_COMPLETE"):  # a shell asking for completions (`memsync completion`)
        from typer._completion_classes import completion_init

        completion_init()
    if not words:  # bare `memsync`: the help, on stdout, as success
        words = argv = ["--help"]
    previous = signal.signal(signal.SIGINT, _interrupt) if threading.current_thread() is threading.main_thread() \
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
        err(f"error: unexpected {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
        err("hint: this is a bug; rerun with MEMSYNC_DEBUG=1 for a traceback and report it")
        return EXIT_FAILURE
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
    return code if isinstance(code, int) else 0


__all__ = ["app", "handle_errors", "main", "prepare", "warn"]
