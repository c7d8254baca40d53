"""memsync run as it runs and reports: the typer command and the hot verbs' own dispatch
(fastpath.py), both made from its declaration in options.py, call `run` with the same options
record, so both print the same. No typer here."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from memsync.cli.output import err

if TYPE_CHECKING:
    from memsync.run.options import RunOptions


def run(options: RunOptions, command: list[str] | None, memory: list[str] | None) -> int:
    """Pull the memories, run CMD, checkpoint while it runs, commit with the run's id, push.

    Exit code: the command's own; 8 if it succeeded but a memory could not be pushed; 9 if a
    policy kept files out of the commit or the command changed a read-only memory."""
    from memsync.run import execute as runner

    cwd = Path.cwd()
    mounts = [runner.parse_mount(spec, cwd) for spec in memory or []]
    report = runner.execute(list(command or []), mounts, options, say=lambda m: err(f"memsync: {m}"))
    _summarise(report, options.no_push)
    return int(report.status)


def _summarise(report: Any, no_push: bool) -> None:
    for m in report.memories:
        if m.read_only:
            state = "read-only, changed by the command: put back, not saved" if m.read_only_changes \
                else "read-only, unchanged"
        elif getattr(m, "unrecorded", False):
            state = (f"NOT SAVED: {m.error}; once there is room, the next memsync command there commits what "
                     f"the run left as run {report.run_id}'s")
        elif m.error:
            state = f"NOT PUSHED: {m.error}"
        elif no_push:
            state = "committed locally (--no-push)"
        else:
            state = "pushed"
        if not m.read_only and not m.files_changed and not m.checkpoints and not getattr(m, "unrecorded", False):
            what = (f"nothing committed, {_n(m.left_out, 'file', 'files')} left out (see the warnings)"
                    if m.left_out else "no changes")
            state = f"{what}, run recorded; {state}"
        head = m.version if m.final_commit or m.merged or m.checkpoints else None
        version = f" {head[:8]}" if head else ""
        extra = f", {_n(m.checkpoints, 'checkpoint', 'checkpoints')}" if m.checkpoints else ""
        merged = f", merged {_n(m.merged, 'remote version', 'remote versions')}" if m.merged else ""
        conflicts = (f", {_n(len(m.conflicts), 'losing version', 'losing versions')} kept to fold"
                     if m.conflicts else "")
        err(f"memsync: {m.name}{version}: {state}{extra}{merged}{conflicts}")
        if getattr(m, "proposal", None):
            err(f"Proposal: {m.proposal} ({m.name}); review it with `memsync review {m.proposal}`, then "
                f"`memsync accept {m.proposal}` or `memsync reject {m.proposal}`")
        if m.unpushed:
            err(f"memsync: {m.name}: unpushed versions kept locally: {', '.join(m.unpushed)}; "
                f"`memsync push` in {m.root} delivers them")
    own = f"; memsync exits {report.status}" if report.status != report.exit_code else ""
    err(f"memsync: run {report.run_id} finished: exit {report.exit_code} after {report.duration:.1f}s{own}")


def _n(count: int, one: str, many: str) -> str:
    return f"{count} {one if count == 1 else many}"
