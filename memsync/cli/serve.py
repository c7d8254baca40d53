"""serve: a resident process that other memsync commands hand their work to (no start-up cost)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from memsync.cli.base import CommandWrapper
from memsync.cli.output import err


def default_socket() -> Path:
    """$XDG_RUNTIME_DIR/memsync.sock (private to the user, cleared at logout), else
    $MEMSYNC_HOME/serve.sock."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and Path(runtime).is_dir():
        return Path(runtime) / "memsync.sock"
    from memsync.git.hub import ensure_home

    return ensure_home() / "serve.sock"


def register(app: typer.Typer, wrap: CommandWrapper) -> None:
    app.command()(wrap(serve))


def serve(
    socket: Annotated[Path | None, typer.Option(
        "--socket", help="Where to listen (default: $XDG_RUNTIME_DIR/memsync.sock, else "
        "$MEMSYNC_HOME/serve.sock).")] = None,
    idle: Annotated[float, typer.Option("--idle", help="Stop after this many seconds without a "
                                        "command; 0 = never.")] = 0.0,
    track: Annotated[bool, typer.Option("--track/--no-track", help="Watch the memories commands use "
                                        "(inotify), so status, push and pull look only at what "
                                        "changed.")] = True,
) -> None:
    """Run in the foreground and take on the work of memsync commands whose environment has
    MEMSYNC_SERVER=<socket>: they skip Python's and pygit2's start-up (about 0.2 s each) and
    otherwise behave exactly as before (same output, exit codes, files). It also watches the
    memories they use, so status, push and pull look only at what changed (a run's record,
    restore, revert and redact always look at every file). Without a server, or with a stale
    socket, commands run in-process as usual. Stop with Ctrl-C or SIGTERM."""
    from memsync.cli import base
    from memsync.errors import UsageError

    if idle < 0:
        raise UsageError("--idle must be 0 or more")
    if base.resident_server is None:
        raise UsageError("memsync serve starts only as a command of its own",
                         "run `memsync serve` (or `python -m memsync serve`) in a shell")
    path = (socket or default_socket()).absolute()
    raise typer.Exit(base.resident_server(path, idle, lambda line: err(f"memsync: {line}"), track))
