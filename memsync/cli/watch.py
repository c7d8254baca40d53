"""watch: live two-way sync; a rich status line on a terminal, plain log lines otherwise."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from memsync.cli.base import CommandWrapper
from memsync.cli.output import err
from memsync.util.wording import count

if TYPE_CHECKING:
    from memsync.live.watch import Report, WatchEvent, WatchStatus, WatchSummary


def register(app: typer.Typer, wrap: CommandWrapper) -> None:
    app.command()(wrap(watch))


def watch(
    debounce: Annotated[float, typer.Option("--debounce", help="Commit after the files have been quiet "
                                            "this many seconds.")] = 2.0,
    poll: Annotated[float, typer.Option("--poll", help="Check the remote for new versions this often "
                                        "(seconds; one ref advertisement when nothing changed).")] = 30.0,
    once: Annotated[bool, typer.Option("--once", help="One full cycle (commit, merge, push), then exit: "
                                       "for cron.")] = False,
) -> None:
    """Keep this memory in live two-way sync until Ctrl-C: local edits are committed (as
    `Memsync-Actor: watch`) and pushed, remote versions merged in (conflicts keep both)."""
    import threading

    from memsync.core.memory import open_memory
    from memsync.live import watch as core

    core.check_timings(debounce, poll)
    mem = open_memory(Path.cwd())
    if once:
        summary = core.once(mem, _log_line)
        _finish(summary)
        if summary.blocked:  # exit 9, as push and run do
            from memsync.errors import Blocked

            raise Blocked("kept out of the commit (`secrets: block`, or a name no version may hold): "
                          + ", ".join(summary.blocked),
                          "remove the secret or rename the file (it is still on disk; the warnings above "
                          "say which), then run again")
        return
    stop = threading.Event()
    with _display() as (report, heartbeat), core.stop_on_signals(stop):
        watcher = core.Watcher(mem, debounce=debounce, poll=poll, report=report, heartbeat=heartbeat)
        summary = watcher.run(stop)
    _finish(summary)


def _finish(summary: WatchSummary) -> None:
    version = summary.version[:8] if summary.version else "empty"
    counts = f"{count(summary.commits, 'commit')}, {count(summary.merges, 'merge')}"
    if summary.conflicts:
        counts += f", {count(summary.conflicts, 'conflict')} kept side by side"
    if summary.abandoned:
        err(f"memsync watch: stopped at {version} ({counts}), abandoning the operation in flight; "
            "`memsync push` finishes it")
    elif summary.unpushed:
        err(f"memsync watch: stopped at {version} ({counts}); not pushed yet: {', '.join(summary.unpushed)}; "
            "`memsync push` delivers them")
    else:
        err(f"memsync watch: in sync at {version} ({counts})")


def _log_line(event: WatchEvent) -> None:
    if event.message:
        prefix = "warning: " if event.level == "warning" else ""
        err(f"memsync watch {time.strftime('%H:%M:%S')}: {prefix}{event.message}")


@contextmanager
def _display() -> Iterator[tuple[Report, float | None]]:
    """(report callback, heartbeat seconds): a live line on a terminal, log lines otherwise."""
    if not sys.stderr.isatty():
        yield _log_line, None
        return
    from memsync.cli.output import live_line

    with live_line() as line:

        def report(event: WatchEvent) -> None:
            if event.message:
                line.message(time.strftime("%H:%M:%S"), event.message, event.level == "warning")
            line.status(status_line(event.status, time.time()))

        yield report, 1.0


def status_line(status: WatchStatus, now: float) -> str:
    """`● watching · synced 12s ago · 2 pending · abc12345 · 3 commits`"""
    parts = [f"● {status.activity or status.state}"]
    if status.state not in ("watching", "starting") and status.detail:
        parts[0] += f" ({_short(status.detail)})"
    parts.append(f"synced {_ago(now - status.last_sync)}" if status.last_sync else "not synced yet")
    parts.append(f"{status.pending} pending" if status.pending else "no pending changes")
    if status.version:
        parts.append(status.version[:8])
    parts.append(f"{count(status.commits, 'commit')}")
    if status.conflicts:
        parts.append(f"{count(status.conflicts, 'conflict')}")
    if status.polling_files:
        parts.append("polling files")
    return " · ".join(parts)


def _ago(seconds: float) -> str:
    if seconds < 60:
        return f"{int(seconds)}s ago"
    if seconds < 3600:
        return f"{int(seconds // 60)}m ago"
    return f"{int(seconds // 3600)}h ago"


def _short(text: str, width: int = 40) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


__all__ = ["register", "status_line"]
