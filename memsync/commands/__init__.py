"""The CLI's verbs, one module per group; each attaches its commands to the app.

Command modules import typer and memsync.output only at the top; the core they call is imported
inside each command, so `memsync --help` does not pay for pygit2, rich or yaml.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import typer

Guard = Callable[[Callable[..., Any]], Callable[..., Any]]


def register(app: typer.Typer, guard: Guard) -> None:
    from memsync.commands import forensics, hooks, mcp, redact, run, storage, watch

    for module in (storage, run, forensics, redact, watch, hooks, mcp):
        module.register(app, guard)
