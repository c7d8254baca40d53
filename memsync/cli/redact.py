"""redact: remove a secret that reached the hub from every version holding it."""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer

from memsync.cli.base import Guard
from memsync.cli.output import err, out, warn
from memsync.util.wording import count


def register(app: typer.Typer, guard: Guard) -> None:
    @app.command()
    @guard
    def redact(
        path: Annotated[str | None, typer.Argument(help="The file whose content at --at is redacted.")] = None,
        at: Annotated[str | None, typer.Option("--at", help="The version holding the content (sha, HEAD~2, "
                                               "run:<id>).")] = None,
        secret: Annotated[str | None, typer.Option("--secret", help="A regular expression: every match in "
                                                   "every version is replaced.")] = None,
        yes: Annotated[bool, typer.Option("--yes", help="Do not ask for confirmation.")] = False,
        remote: Annotated[str | None, typer.Option("--remote", help="Hub URL (default: the memory's).")] = None,
    ) -> None:
        """Replace a secret or personal data with a placeholder in every version that holds it, on
        the hub too: the one command that rewrites history. Messages, authors, trailers and dates
        are kept; a record is committed on top; other clones follow on their next command."""
        from pathlib import Path

        from memsync.errors import UsageError
        from memsync.history import redact as core

        if not yes and not sys.stdin.isatty():
            raise UsageError("redact rewrites history on the hub and needs confirmation",
                             "add --yes to confirm without a terminal")

        def confirm(plan: Any) -> bool:
            if yes:
                return True
            err(f"This rewrites {count(plan.versions, 'version')} of the memory on {plan.hub}, replacing "
                f"{plan.what} ({count(plan.blobs, 'file content')}) with a placeholder.")
            return bool(typer.confirm("Rewrite history?", default=False, err=True))

        result = core.redact(Path.cwd(), path, at, secret, confirm, remote=remote)
        out(f"Redacted {result.plan.what}: {count(len(result.rewritten), 'version')} rewritten")
        out(f"Record: version {result.new_head[:8]} (was {result.old_head[:8]})")
        for old, new in list(result.rewritten.items())[-10:]:
            out(f"  {old[:8]} -> {new[:8]}")
        for where in result.not_purged:
            warn(f"old objects are still in {where}: install git, then `git --git-dir {where} gc --prune=now`")
        err("other clones follow on their next pull, push or run; a hosted forge may still keep copies "
            "(see README, Redacting a secret)")
