"""Commands of this group are registered here."""

from __future__ import annotations

import typer

from memsync.commands import Guard


def register(app: typer.Typer, guard: Guard) -> None:
    return None
