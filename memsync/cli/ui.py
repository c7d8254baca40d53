"""ui: a local page over a hub's memories (`memsync[ui]`)."""

from __future__ import annotations

from typing import Annotated

import typer

from memsync.cli.base import CommandWrapper
from memsync.cli.output import err, out


def register(app: typer.Typer, wrap: CommandWrapper) -> None:
    app.command()(wrap(ui))


def ui(
    memory: Annotated[list[str] | None, typer.Option(
        "--memory", help="Show only this memory; repeatable (default: every memory of the hub).")] = None,
    port: Annotated[int, typer.Option("--port", help="Port on 127.0.0.1 (default: a free one).")] = 0,
    read_only: Annotated[bool, typer.Option("--read-only", help="Only show: no restore or revert.")] = False,
    no_open: Annotated[bool, typer.Option("--no-open", help="Do not open a browser; only print the URL.")]
    = False,
    remote: Annotated[str | None, typer.Option("--remote", help="Hub URL (default: $MEMSYNC_REMOTE, else "
                                               "this machine's hub).")] = None,
) -> None:
    """Serve a page on 127.0.0.1 that shows the memories of a hub: each memory's timeline (runs,
    exit codes, flags), its size over versions, diffs, a file's history, a run's changes and the
    conflicts waiting to be folded; and (unless --read-only) restores and reverts, each
    confirmed first and done as `memsync restore` / `memsync revert` would. The printed URL
    holds the page's token. Stop with Ctrl-C. Needs `pip install "memsync[ui]"`."""
    from memsync.errors import UsageError
    from memsync.util.names import check_name

    for name in memory or []:
        check_name(name)
    try:
        from memsync.ui.server import serve
    except ModuleNotFoundError as exc:
        raise UsageError(f"the page needs the {exc.name or 'starlette'} package",
                         'pip install "memsync[ui]"') from None
    raise typer.Exit(serve(remote, memory, port, read_only, not no_open, out, err))
