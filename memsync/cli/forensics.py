"""log, diff, restore, revert: find the damage, see it, undo it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from memsync.cli import completing
from memsync.cli.base import CommandWrapper
from memsync.cli.compat import TyperCommand
from memsync.cli.hotverbs import hot_command
from memsync.cli.output import err, out, styled, unified_diff, warn
from memsync.cli.syncing import report_snapshot
from memsync.util.names import where_kept
from memsync.util.textsafe import display_path
from memsync.util.wording import count

if TYPE_CHECKING:  # the core is imported by each command when it runs (start-up stays lean)
    from memsync.git.history import FilePatch
    from memsync.history.forensics import Outcome

RemoteOpt = Annotated[str | None, typer.Option("--remote", help="Hub URL to push to "
                                               "(default: the memory's).")]


def register(app: typer.Typer, wrap: CommandWrapper) -> None:
    hot_command(app, wrap, "log")
    app.command(cls=_PathsAfterDashes)(wrap(diff))
    app.command()(wrap(restore))
    app.command()(wrap(revert))


def diff(
    ctx: typer.Context,
    args: Annotated[list[str] | None, typer.Argument(
        help="[REV [REV]] [-- PATH...]. REV: a version (full or short), a git revision (HEAD~2) or "
        "run:<id>. None: uncommitted changes; one: what it changed; two: from the first to the "
        "second.")] = None,
    stat: Annotated[bool, typer.Option("--stat", help="Only a summary per file.")] = False,
) -> None:
    """Show changes as a unified diff (coloured on a terminal)."""
    from pathlib import Path

    from memsync.history import forensics

    paths = ctx.meta.get(_PATHS)
    result = forensics.diff(Path.cwd(), list(args or []), paths)
    if stat:
        _print_stat(result.patches)
    else:
        unified_diff([p.data for p in result.patches])


def restore(
    paths: Annotated[list[str], typer.Argument(help="Files or folders to put back.")],
    at: Annotated[str | None, typer.Option("--at", help="The version to take them from "
                                           "(sha, HEAD~2, run:<id>).", autocompletion=completing.run_revs)] = None,
    conflict: Annotated[str | None, typer.Option(
        "--conflict", help="Instead of --at: the id of a version another writer lost to PATH, "
        "as listed in PATH's gathered NAME.conflicts.md.")] = None,
    force: Annotated[bool, typer.Option("--force", help="Even if PATH has uncommitted changes (they are "
                                        "committed first, so they stay in history).")] = False,
    remote: RemoteOpt = None,
) -> None:
    """Put files back byte for byte as they were at a version, as a new version by the operator
    (pushed). Works for files deleted since; never rewrites history. With --conflict ID: PATH
    gets the version with that id from its gathered conflict file, byte for byte."""
    from pathlib import Path

    from memsync.history import forensics

    result = forensics.restore(Path.cwd(), paths, at, force=force, remote=remote, conflict=conflict)
    if result.saved_first:
        err(f"saved your uncommitted changes first as version {result.saved_first[:8]}")
    report_snapshot(result.snapshot)
    if result.version is None:
        out(f"Already as at {result.source[:8]}: nothing to restore")
    else:
        out(f"Restored from {result.source[:8]} as version {result.version[:8]}:")
    for f in result.files:
        out(f"  {display_path(f.path)}  {f.size} bytes  sha256 {f.sha256}")
    _report_push(result)


def revert(
    rev: Annotated[str, typer.Argument(help="The version to undo, or run:<id> for a whole run.",
                                       autocompletion=completing.run_revs)],
    remote: RemoteOpt = None,
) -> None:
    """Undo a version or a whole run as one new version (pushed); never rewrites history. Where
    later versions changed the same lines, both are kept: the current content at the path, the
    reverted one added to its gathered conflict file, NAME.conflicts.md."""
    from pathlib import Path

    from memsync.history import forensics

    result = forensics.revert(Path.cwd(), rev, remote=remote)
    report_snapshot(result.snapshot)
    what = result.source if result.source.startswith("run:") else result.source[:8]
    if result.version is None:
        out(f"Nothing to revert: the changes of {what} are already undone")
        return
    out(f"Reverted {what} as version {result.version[:8]}:")
    for f in result.files:
        out(f"  {f.state:<8} {display_path(f.path)}")
    for c in result.conflicts:
        warn(f"{display_path(c.path)} changed since {what}: kept the current content there, "
             f"the reverted one {where_kept(display_path(c.copy))}")
    for p in result.kept_modified:
        warn(f"{display_path(p)} changed since {what}: kept the current content (a change beats a deletion)")
    _report_push(result)


# -- diff ----------------------------------------------------------------------------------------
_PATHS = "memsync.paths"


class _PathsAfterDashes(TyperCommand):
    """`diff REV -- PATH...`: the parser would drop the `--`, so the paths are taken off first."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if "--" in args:
            cut = args.index("--")
            ctx.meta[_PATHS] = args[cut + 1:]
            args = args[:cut]
        return list(super().parse_args(ctx, args))


def _print_stat(patches: list[FilePatch]) -> None:
    names = [display_path(p.path) for p in patches]
    width = max((len(name) for name in names), default=0)
    added = deleted = 0
    for p, name in zip(patches, names, strict=True):
        added, deleted = added + p.added, deleted + p.deleted
        bar = "+" * min(p.added, 40) + "-" * min(p.deleted, 40)
        change = "Bin" if p.binary else f"{p.added + p.deleted:>5} {bar}"
        styled([(f" {name:<{width}} | ", ""), (change, "green" if p.added >= p.deleted else "red")])
    files = "file" if len(patches) == 1 else "files"
    out(f" {len(patches)} {files} changed, {count(added, 'insertion')}(+), {count(deleted, 'deletion')}(-)")


# -- restore / revert --------------------------------------------------------------------------
def _report_push(result: Outcome) -> None:
    if result.merged:
        err(f"merged {result.merged} newer remote version{'' if result.merged == 1 else 's'} before pushing")
    if result.pushed:
        err("pushed")
