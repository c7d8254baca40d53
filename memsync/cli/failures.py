"""How a command's failures reach the user, without typer: `error:`/`hint:` lines and the exit
code from the error classes (errors.py). The typer commands (app.handle_errors) and the hot verbs'
own dispatch (fastpath.py) both go through here, so the two paths fail the same way."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from memsync.cli.output import err, warn
from memsync.errors import EXIT_FAILURE, EXIT_INTERRUPTED, Interrupted, MemsyncError

__all__ = ["Stop", "call_command", "disk_full", "interrupt", "unexpected"]


class Stop(Exception):
    """The command is over with `code`; why has already been said on stderr."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


def call_command(func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Run a command body; its errors become `error:`/`hint:` lines and a `Stop` with the exit code."""
    from memsync.util import notices

    notices.handler = warn
    notices.reset()
    try:
        from memsync.util.envcheck import check_environment

        check_environment()
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
        raise Stop(exc.exit_code) from None
    except KeyboardInterrupt:
        err("error: interrupted")
        raise Stop(EXIT_INTERRUPTED) from None
    except Stop:
        raise
    except Exception as exc:  # libgit2 refusing what a user's git wrote, or a full disk: not a bug
        refused = _git_feature_refusal(exc) or disk_full(exc)
        if refused is None or os.environ.get("MEMSYNC_DEBUG") == "1":
            raise
        err(f"error: {refused.message}")
        if refused.hint:
            err(f"hint: {refused.hint}")
        raise Stop(refused.exit_code) from None


def _git_feature_refusal(exc: Exception) -> MemsyncError | None:
    if "unsupported mandatory extension" not in str(exc):
        return None
    from pathlib import Path

    from memsync.core import config as cfgmod
    from memsync.git.indexext import refusal

    return refusal(exc, cfgmod.find_root(Path.cwd()) or Path.cwd())


def disk_full(exc: BaseException) -> MemsyncError | None:
    """A library error that is a full disk (git/diskfull.py), as the error to show; else None."""
    from pathlib import Path

    from memsync.core import config as cfgmod
    from memsync.git import diskfull
    from memsync.git.hub import memsync_home

    try:
        cwd = Path.cwd()
        root = cfgmod.find_root(cwd)
    except (OSError, MemsyncError):
        return None
    places = ([root / ".git"] if root is not None else []) + [cwd, memsync_home()]
    return diskfull.explain(exc, places)


def unexpected(exc: Exception) -> int:
    """An error no layer expected: two lines and exit 1 (a traceback only with MEMSYNC_DEBUG=1)."""
    if os.environ.get("MEMSYNC_DEBUG") == "1":
        raise exc
    err(f"error: unexpected {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
    err("hint: this is a bug; rerun with MEMSYNC_DEBUG=1 for a traceback and report it")
    return EXIT_FAILURE


def interrupt(signum: int, frame: object) -> None:
    """Ctrl-C as a memsync error rather than KeyboardInterrupt: pygit2's callbacks pass an
    Exception through libgit2 (aborting the transfer), but a KeyboardInterrupt raised inside one
    is swallowed by cffi and the interrupt is lost."""
    raise Interrupted("interrupted")
