"""run (declared in options.py), contract."""

from __future__ import annotations

from typing import Annotated

import typer

from memsync.cli.base import CommandWrapper
from memsync.cli.hotverbs import hot_command
from memsync.cli.output import out


def register(app: typer.Typer, wrap: CommandWrapper) -> None:
    hot_command(app, wrap, "run")
    app.command()(wrap(contract))


def contract(
    path: Annotated[str | None, typer.Option("--path", help="Where the agent sees its memory "
                                             "(default: $MEMSYNC_MEMORY_DIR).")] = None,
) -> None:
    """Print memory instructions to paste into an agent's AGENTS.md / CLAUDE.md."""
    from memsync.run.contract import render

    out(render(path))
