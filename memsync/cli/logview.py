"""`memsync log`: one line per version. A hot verb (cli/options.py): the fast path calls it
without typer, so this module imports no typer."""

from __future__ import annotations

from typing import TYPE_CHECKING

from memsync.cli.output import Segment, out, print_json, styled
from memsync.util.textsafe import clean, display_path

if TYPE_CHECKING:
    from memsync.history.log import LogEntry
    from memsync.history.options import LogOptions

__all__ = ["log"]


def log(options: LogOptions, json: bool = False) -> None:
    """One line per version, newest first: version, UTC time, actor, exit code, files, bytes +/-,
    integrity flags. Reads the local history (`memsync pull` first to see the newest)."""
    from pathlib import Path

    from memsync.history import log as logview  # not forensics: log needs nothing of the exchange with the hub

    if options.limit is not None and options.limit < 1:
        from memsync.errors import UsageError

        raise UsageError(f"-n must be 1 or more, not {options.limit}", "e.g. -n 10")
    result = logview.log(Path.cwd(), options.path, run_id=options.run, flagged=options.flagged, limit=options.limit)
    if json:
        print_json(result)
        return
    if not result.versions:
        what = f" of {display_path(result.path)}" if result.path else ""
        out(f"No versions{what} match" if (options.run or options.flagged or options.path) else "No versions yet")
        return
    for entry in result.versions:
        styled(_log_line(entry))


def _log_line(e: LogEntry) -> list[Segment]:
    actor = clean(e.actor)  # trailers and names come from the hub: escaped (see textsafe)
    if e.run_id:
        actor = f"run {clean(e.run_id)}" + (f" checkpoint {clean(str(e.checkpoint))}" if e.checkpoint is not None
                                              else " end" if e.end else "")
    if e.accepted_proposal:
        actor = f"{clean(e.actor)}, accepting run {clean(e.run_id or e.accepted_proposal)}"
    if e.merge:
        actor = f"merge by {actor}"
    parts: list[Segment] = [(e.version, "yellow"), (f"  {e.time}  ", ""), (f"{actor:<34}", "bold")]
    parts.append((f"  exit {clean(str(e.exit_code))}" if e.exit_code is not None else "", "red" if e.exit_code else ""))
    if e.file is not None:
        if e.file.state == "deleted":
            parts.append(("  deleted", "red"))
        else:
            parts.append((f"  {e.file.size} bytes  sha256 {e.file.sha256}", ""))
    else:
        files = "file" if e.files_changed == 1 else "files"
        parts.append((f"  {e.files_changed} {files}  +{e.bytes_added} -{e.bytes_removed} bytes", ""))
    for flag in e.flags:
        parts.append((f"  FLAG {clean(flag)}", "bold red"))
    for policy in e.policies:
        parts.append((f"  POLICY {clean(policy)}", "bold magenta"))
    if e.copies:
        parts.append((f"  kept both: {', '.join(display_path(c) for c in e.copies)} (to fold, then delete)", "cyan"))
    for restored in e.restored_from:
        sha, _, path = restored.partition(" ")
        parts.append((f"  restored {display_path(path)} from {clean(sha[:8])}", "green"))
    if e.reverted:
        parts.append((f"  reverted {', '.join(clean(r[:8]) for r in e.reverted)}", "green"))
    if e.accepted_proposal:
        parts.append((f"  accepted proposal {clean(e.accepted_proposal)}", "green"))
    return parts
