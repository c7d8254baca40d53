"""The `memsync` command: parse arguments, call one core function, render its result.

This is the only module that imports typer. Exit codes are decided in `handle_errors`, from the
error classes in errors.py; nothing else calls sys.exit.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

import typer

from memsync import __version__
from memsync.errors import EXIT_FAILURE, EXIT_INTERRUPTED, EXIT_USAGE, MemsyncError
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
        except MemsyncError as exc:
            err(f"error: {exc.message}")
            if exc.hint:
                err(f"hint: {exc.hint}")
            if os.environ.get("MEMSYNC_DEBUG") == "1":
                raise
            raise typer.Exit(exc.exit_code) from None
        except KeyboardInterrupt:
            err("error: interrupted")
            raise typer.Exit(EXIT_INTERRUPTED) from None

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


from memsync.commands import register  # noqa: E402  (commands attach themselves to `app`)

register(app, handle_errors)


def main(argv: list[str] | None = None) -> int:
    """Entry point: typer's own usage errors also become one `error:` line and exit code 2."""
    try:
        code = app(args=argv, prog_name="memsync", standalone_mode=False)
    except typer.Exit as exc:
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
    return code if isinstance(code, int) else 0


def run_main() -> None:
    sys.exit(main())


__all__ = ["app", "handle_errors", "main", "run_main", "warn"]
