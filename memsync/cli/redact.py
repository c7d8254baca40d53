"""redact: remove a secret that reached the hub from every version holding it; follow (or not) a
redaction made elsewhere; drop the histories kept when following one."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer

from memsync.cli.base import CommandWrapper
from memsync.cli.output import err, out, warn
from memsync.util.wording import count

if TYPE_CHECKING:  # imported by the command when it runs
    from memsync.history.redact import Plan


def register(app: typer.Typer, wrap: CommandWrapper) -> None:
    app.command()(wrap(redact))


def redact(
    path: Annotated[str | None, typer.Argument(help="The file whose content at --at is redacted.")] = None,
    at: Annotated[str | None, typer.Option("--at", help="The version holding the content (sha, HEAD~2, "
                                           "run:<id>).")] = None,
    secret: Annotated[str | None, typer.Option("--secret", help="A regular expression: every match in "
                                               "every version is replaced.")] = None,
    yes: Annotated[bool, typer.Option("--yes", help="Do not ask for confirmation.")] = False,
    allow_wide: Annotated[bool, typer.Option("--allow-wide", help="Second confirmation for a pattern that "
                                             "wipes whole files or more than 10% of a file.")] = False,
    follow: Annotated[bool, typer.Option("--follow", help="Show what the hub's redaction, refused here, "
                                         "removes (files, bytes, versions), and accept it.")] = False,
    drop_backups: Annotated[bool, typer.Option("--drop-backups", help="Delete the histories kept when "
                                               "following redactions, and purge their objects.")] = False,
    remote: Annotated[str | None, typer.Option("--remote", help="Hub URL (default: the memory's).")] = None,
) -> None:
    """Replace a secret or personal data with a placeholder in every version that holds it, on
    the hub too: the one command that rewrites history. Messages, authors, trailers and dates
    are kept; a record is committed on top; other clones follow when it replaces only secrets
    (else with `memsync redact --follow`)."""
    from pathlib import Path

    from memsync.errors import UsageError
    from memsync.history import redact as core

    if follow + drop_backups + (path is not None or secret is not None) > 1:
        raise UsageError("--follow, --drop-backups and a redaction (PATH --at REV, --secret) go one at a time",
                         "run them one after the other, e.g. `memsync redact --follow`, then "
                         "`memsync redact --drop-backups`")

    core.may_act(Path.cwd(), remote)  # a run owning the memory: exit 6 before anything else is said
    interactive = sys.stdin.isatty()
    if not yes and not interactive:
        raise UsageError("redact rewrites or deletes history and needs confirmation",
                         "add --yes to confirm without a terminal")
    if follow:
        _follow(Path.cwd(), yes, remote)
        return
    if drop_backups:
        _drop(Path.cwd(), yes)
        return

    def confirm(plan: Plan) -> bool:
        if yes:
            return True
        err(f"This rewrites {count(plan.versions, 'version')} of the memory on {plan.hub}, replacing "
            f"{plan.what} ({count(plan.blobs, 'file content')}) with a placeholder.")
        return bool(typer.confirm("Rewrite history?", default=False, err=True))

    def confirm_wide(plan: Any) -> bool:
        if allow_wide:
            return True
        if not interactive:
            return False
        shown = ", ".join(plan.wide[:10]) + (f" and {len(plan.wide) - 10} more" if len(plan.wide) > 10 else "")
        err(f"The pattern wipes whole files or more than 10% of a file: {shown}.")
        return bool(typer.confirm("Wipe them in every version, on the hub too?", default=False, err=True))

    result = core.redact(Path.cwd(), path, at, secret, confirm, remote=remote, confirm_wide=confirm_wide)
    out(f"Redacted {result.plan.what}: {count(len(result.rewritten), 'version')} rewritten")
    out(f"Record: version {result.new_head[:8]} (was {result.old_head[:8]})")
    for old, new in list(result.rewritten.items())[-10:]:
        out(f"  {old[:8]} -> {new[:8]}")
    for where in result.not_purged:
        warn(f"old objects are still in {where}: install git, then `git --git-dir {where} gc --prune=now`")
    if result.kept:
        warn(f"{len(result.kept)} history(ies) kept when following earlier redactions may still hold it "
             "(refs/memsync/redaction-backup/): `memsync redact --drop-backups` deletes them")
    if result.hub_keeps_objects:
        warn(f"the hub {result.plan.hub} still holds the old versions as unreachable objects until its owner "
             "prunes them (on a bare repository: `git reflog expire --expire=now --all && git gc --prune=now`; "
             "see docs/SECURITY.md, Redaction)")
    err("other clones follow on their next pull, push or run if it replaced only what the secret scanner "
        "recognises, else after `memsync redact --follow`; a hosted forge may still keep copies")


def _follow(cwd: Any, yes: bool, remote: str | None) -> None:
    from memsync.history import redact as core
    from memsync.util.textsafe import display_path

    def decide(incoming: Any) -> bool:
        out(f"The hub's history was rewritten by a redaction (version {incoming.record[:8]}):")
        out(f"  versions rewritten here: {incoming.versions} ({incoming.replayed} of them local only)")
        out(f"  bytes replaced: {incoming.bytes_removed}")
        out(f"  files ({len(incoming.files)}):")
        for p in incoming.files[:50]:
            mark = "  (more than a secret)" if p in incoming.not_secrets else ""
            out(f"    {display_path(p)}{mark}")
        if len(incoming.files) > 50:
            out(f"    ... and {len(incoming.files) - 50} more")
        if yes:
            return True
        return bool(typer.confirm("Follow it (your history is kept under a backup ref)?", default=False, err=True))

    done = core.follow(cwd, decide, remote=remote)
    if not done.asked:  # it replaces only recognised secrets: followed without a question
        out(f"The hub's redaction replaces only what the secret scanner recognises: {done.incoming.summary()}")
    out(f"Followed the redaction: now at {done.new_head[:8]}")
    out(f"Kept the history before it as {done.backup}; `memsync redact --drop-backups` deletes it")


def _drop(cwd: Any, yes: bool) -> None:
    from memsync.history import redact as core

    def confirm(refs: list[str]) -> bool:
        for ref in refs:
            out(f"  {ref}")
        if yes:
            return True
        return bool(typer.confirm(f"Delete these {len(refs)} kept histories and purge their objects?",
                                  default=False, err=True))

    done = core.drop_backups(cwd, confirm)
    if not done.refs:
        out("No kept histories: nothing to drop")
        return
    out(f"Dropped {len(done.refs)} kept histories")
    if not done.purged:
        warn("their objects stay until git is installed and `git gc --prune=now` runs in this memory")
