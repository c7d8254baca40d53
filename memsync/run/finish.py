"""A run's end: the final commit of each writable memory with the run's outcome in its trailers,
its push (abandoned on a second signal, never losing the commit), and the checkpoints' push."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from memsync.core.attribution import Attribution
from memsync.core.memory import Memory
from memsync.core.snapshot import take, warn_each
from memsync.errors import (
    Interrupted,
    MemsyncError,
    PushRejected,
    RepoError,
)
from memsync.run.cmdline import shown_command
from memsync.run.outcome import MemoryOutcome, Mounted, RunReport
from memsync.run.record import RunTrust
from memsync.run.stopping import Signals
from memsync.sync.exchange import converge, unpushed
from memsync.util.names import where_kept
from memsync.util.threads import helper_body

Say = Callable[[str], None]

if TYPE_CHECKING:  # and imported where used: a plain run has no read-only memory, --as-user or conflict
    pass




def undo_read_only(mounted: list[Mounted], say: Say) -> None:
    """Put every read-only memory back as the run found it; name what the command changed there."""
    for m in mounted:
        if m.protection is None:
            continue
        mem, outcome = m.mem, m.outcome
        from memsync.core import readonly

        try:
            done = readonly.undo(mem, m.protection)
        except (OSError, MemsyncError) as exc:  # the writable memories are saved all the same
            outcome.read_only_changes = ["(not checked: the undo failed)"]
            say(f"read-only memory {mem.name!r}: cannot undo the run's changes "
                f"({getattr(exc, 'message', None) or getattr(exc, 'strerror', None) or exc}); "
                "the next memsync command in it finishes the undo")
            continue
        outcome.read_only_changes = done.changed
        outcome.read_only_kept = done.kept_in
        if done.dropped_commit:
            outcome.read_only_changes.append(f"commit {done.dropped_commit[:8]} (dropped from its branch)")
        if outcome.read_only_changes:
            kept = f"; what it made is kept in {done.kept_in}" if done.kept_in else ""
            say(f"read-only memory {mem.name!r} was changed during the run (not saved, not pushed): "
                + ", ".join(outcome.read_only_changes[:10]) + f"; put back as the run found it{kept}")


def finish_run(report: RunReport, writable: list[Mounted], no_push: bool, say: Say,
            signals: Signals | None = None) -> None:
    rid = report.run_id
    abandoned = False
    for m in writable:
        mem, outcome, trust = m.mem, m.outcome, m.trust
        assert trust is not None
        extra: tuple[tuple[str, str], ...] = (("Memsync-Command", shown_command(report.command)),
                                              ("Memsync-Exit-Code", str(report.exit_code)),
                                              ("Memsync-Duration", f"{report.duration:.1f}s"))
        if m.checkpoints:
            extra += (("Memsync-Checkpoints", str(m.checkpoints)),)
        who = Attribution("run", f"Run {rid} (exit {report.exit_code})", rid, extra)
        try:
            with mem.locked():
                try:
                    trust.check(say)
                    # Always a commit, empty if the checkpoints already saved everything: the run's
                    # outcome (exit code, duration, checkpoints) must reach the hub in its trailers.
                    snap = take(mem, who, run_base=m.base, run_flags=trust.run_flags(final=True),
                                allow_empty=True)
                    trust.committed(snap)
                finally:
                    outcome.folded, outcome.kept_refs = trust.folded, trust.kept
                    outcome.policy_kept = trust.policy_kept
                outcome.final_commit = snap.commit
                outcome.files_changed = len(snap.changes)
                outcome.blocked = snap.blocked
                outcome.left_out = snap.left_out
                outcome.ignored = snap.ignored
                outcome.flags = [f.trailer() for f in snap.flags] + snap.run_flags
                warn_each(snap, mem.name, say)
                outcome.version = mem.git.head_oid()
                if no_push or abandoned:
                    if abandoned:
                        outcome.error = "interrupted: not pushed"
                        outcome.unpushed = [outcome.version[:8]] if outcome.version else []
                    continue
                _interruptible(lambda mem=mem, who=who, outcome=outcome, trust=trust:  # type: ignore[misc]
                               deliver(mem, who, outcome, say, quiet_failure=False, trust=trust), signals, say)
                outcome.version = mem.git.head_oid()
        except (KeyboardInterrupt, Interrupted) as exc:
            abandoned = True
            why = f" ({exc.message})" if isinstance(exc, Interrupted) and exc.message != "interrupted" else ""
            outcome.error = f"interrupted: the final push was abandoned{why}"
            outcome.unpushed = [outcome.version[:8]] if outcome.version else []
        except MemsyncError as exc:
            outcome.error = exc.message
            outcome.rejected = isinstance(exc, PushRejected)
            if isinstance(exc, RepoError) and outcome.final_commit is None:
                mem.run_unrecorded = report.exit_code  # the run's record could not be made: the next command makes it
                outcome.unrecorded = True
            with contextlib.suppress(MemsyncError):
                outcome.unpushed = unpushed(mem)
        except Exception as exc:  # libgit2 or the OS refusing a write: a full disk is an ordinary failure
            from memsync.git import diskfull

            full = diskfull.explain(exc, [mem.git.git_dir])
            if outcome.final_commit is None:
                mem.run_unrecorded = report.exit_code
                outcome.unrecorded = full is not None
            if full is None:
                raise
            outcome.error = full.message


_PUSH_FLOOR = 1.0


def _interruptible(work: Callable[[], None], signals: Signals | None = None, say: Say = lambda _m: None) -> None:
    """Run `work` (a push) in a worker thread so that it can be abandoned at once: libgit2's
    blocking network calls would otherwise defer a Ctrl-C until they time out. With `signals`,
    a stop request lets it go on until Signals.abandon_reason says otherwise (Interrupted);
    without, a Ctrl-C (Interrupted from the CLI's handler) abandons it."""
    failure: list[BaseException] = []

    def target() -> None:
        try:
            work()
        except BaseException as exc:  # handed to the main thread
            failure.append(exc)

    announced = False
    worker = threading.Thread(target=helper_body(target), name="memsync-final-push", daemon=True)
    worker.start()
    tried = time.monotonic() + _PUSH_FLOOR  # a grace already spent still lets a quick push through
    while worker.is_alive():
        if signals is not None and signals.stopping():
            reason = signals.abandon_reason()
            if reason is not None and (signals.after[1:] or time.monotonic() >= tried):
                raise Interrupted(reason)
            if not announced:
                announced = True
                say(f"asked to stop: finishing the push (up to {signals.grace:g}s after the first signal; "
                    "a second signal abandons it, keeping the commit)")
        worker.join(0.1)
    if failure:
        raise failure[0]


def deliver(mem: Memory, who: Attribution, outcome: MemoryOutcome, say: Say, quiet_failure: bool,
             trust: RunTrust, live: bool = False) -> None:
    """Push the run's commits. `live` (a checkpoint: the command may still be writing): the
    hub's new versions are merged aside, never into the work tree (exchange.converge)."""
    from memsync.errors import RemoteError as _RemoteError

    try:
        exchange = converge(mem, who, lambda: _resnap(mem, who), vetted=trust.vetted, live=live)
    except _RemoteError as exc:
        outcome.unpushed = unpushed(mem)
        if not quiet_failure:
            raise
        if outcome.error != exc.message:
            say(f"checkpoint push failed (will retry): {exc.message}")
        outcome.error = None
        return
    trust.synced(exchange)
    outcome.pushed = exchange.pushed or outcome.pushed
    outcome.unpushed = []
    outcome.merged += len(exchange.merges)
    outcome.conflicts.extend(exchange.conflicts)
    for c in exchange.conflicts:
        say(f"conflict in {mem.name}/{c.path}: kept this run's version there, the other {where_kept(c.copy)}")
    for path in exchange.rule_files:
        from memsync.checks.merge_policy import rule_file_line

        say(f"warning: {mem.name}: {rule_file_line(path)}")


def _resnap(mem: Memory, who: Attribution) -> None:
    take(mem, who)


__all__ = ["deliver", "finish_run", "undo_read_only"]
