"""A run while its command runs: the checkpoints (and the pushes the rate limit deferred), the
held messages, and the one tear-down that ends them, whichever way the command ended."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from memsync.core import pacing
from memsync.core.attribution import Attribution
from memsync.core.snapshot import take, warn_each
from memsync.errors import (
    MemsyncError,
)
from memsync.live.changes import ChangeMonitor
from memsync.live.checkpoint import Checkpointer
from memsync.run.finish import deliver, undo_read_only
from memsync.run.outcome import Mounted
from memsync.util import envcheck, processes
from memsync.util.threads import helper_body

if TYPE_CHECKING:  # and imported where used: a plain run has no read-only memory, --as-user or conflict
    from memsync.run import runas



Say = Callable[[str], None]


def quiet_seconds() -> float:
    """Seconds without writes before a checkpoint (MEMSYNC_QUIET), read when a run starts."""
    return envcheck.number("MEMSYNC_QUIET", 2.0)


def settle_seconds() -> float:
    """How recent a write is still settling (MEMSYNC_SETTLE), read when a run starts."""
    return envcheck.number("MEMSYNC_SETTLE", 0.5)


class _HeldWhileRunning:
    """memsync's messages while the command runs are held and printed, whole, when it exits: the
    command writes to the same stderr, and a line of ours must never land inside one of its."""

    def __init__(self, say: Say) -> None:
        self._say = say
        self._held: list[str] | None = None
        self._lock = threading.Lock()

    def __call__(self, message: str) -> None:
        with self._lock:
            if self._held is not None:
                self._held.append(message)
                return
        self._say(message)

    def hold(self) -> None:
        with self._lock:
            self._held = []

    def release(self) -> None:
        with self._lock:
            held, self._held = self._held or [], None
        for message in held:
            self._say(message)


class _Watching:
    """Starts the change monitors in a thread: watching a 100,000-file tree takes seconds to set
    up and the command must not wait for it (nor, if it is short, its end). Each monitor starts
    dirty, so whatever changed before its watches were in place is found by the first checkpoint.
    The watches are set up only once the command has run for GRACE seconds: a short command
    ends before any (setting up 10,000 files' watches takes CPU from the commit and push that
    follow it: docs/PERFORMANCE.md)."""

    GRACE = 0.25

    def __init__(self, monitors: list[ChangeMonitor], say: Say) -> None:
        self._monitors = monitors
        self._say = say
        self._lock = threading.Lock()
        self._stopped = False
        self._stopping = threading.Event()
        self._started: list[ChangeMonitor] = []
        self._thread = threading.Thread(target=helper_body(self._start_all), name="memsync-watch-start", daemon=True)
        self._thread.start()

    def _start_all(self) -> None:
        if self._monitors and self._stopping.wait(self.GRACE):
            return
        for monitor in self._monitors:
            try:
                monitor.start()
            except Exception as exc:
                self._say(f"file events unavailable in {monitor.root} ({exc}); no checkpoints there")
                continue
            with self._lock:
                if self._stopped:
                    monitor.stop()
                    continue
                self._started.append(monitor)
            monitor.mark_dirty()

    def stop(self) -> None:
        self._stopping.set()
        with self._lock:
            self._stopped = True
            started, self._started = self._started, []
        for monitor in started:
            monitor.stop()


def _hand_back(writable: list[Mounted], user: runas.RunAs | None, say: Say) -> None:
    for m in writable:
        if m.lent is not None and user is not None:
            from memsync.run import runas

            try:
                runas.hand_back(m.mem.root, m.lent, user)
            except MemsyncError as exc:
                say(f"{m.name}: {exc.message}")
            except OSError as exc:
                say(f"{m.name}: the work tree was not fully handed back ({exc.strerror or exc}); "
                    f"check the owners under {m.mem.root}")


def end_processes(user: runas.RunAs | None, agent: processes.Agent | None, say: Say) -> None:
    """End what the command left running: with --as-user every process of the user; else its
    process group and every process carrying the run's id (processes.py), asked with SIGTERM first."""
    try:
        if user is not None:
            from memsync.run import runas

            left = runas.end_processes(user)
        else:
            found = processes.survivors(agent) if agent is not None else []
            if found:
                what = "process" if len(found) == 1 else "processes"
                say(f"the command left {len(found)} {what} running (pids "
                    f"{', '.join(map(str, found[:5]))}): ended before its files are saved")
            left = processes.end(agent, found=found) if agent is not None else []
    except OSError as exc:
        why = getattr(exc, "strerror", None) or exc
        say(f"warning: {f'--as-user {user.name}' if user else 'run'}: cannot end the command's processes ({why})")
        return
    if left:
        whose = f"--as-user {user.name}: {len(left)} of the user's processes" if user else \
            f"{len(left)} processes the command left running"
        say(f"warning: {whose} did not end (pids {', '.join(map(str, left[:5]))})")


class RunSession:
    """The writable memories' checkpoints while the command runs. `checkpoint` and `push_deferred`
    are what the checkpointer calls; `end` is the one tear-down: what the command left running
    ended, the work tree handed back, the checkpoints stopped, the held messages printed and the
    read-only memories put back."""

    def __init__(self, run_id: str, shown: str, mounted: list[Mounted], options: Any, say: Say) -> None:
        self.run_id = run_id
        self.shown = shown
        self.mounted = mounted
        self.writable = [m for m in mounted if m.writable]
        self.options = options
        self.held = _HeldWhileRunning(say)
        self.say: Say = self.held
        self._by_root = {str(m.mem.root.resolve()): m for m in self.writable}
        self.pacer = pacing.PushPacer({m.name: pacing.resolve(options.max_push_rate, m.mem.config.max_push_rate)
                                       for m in self.writable})
        monitors = [ChangeMonitor(m.mem.root, self.say) for m in self.writable] if options.checkpoint > 0 else []
        self._checkpointer = Checkpointer(monitors, self.checkpoint, quiet=min(quiet_seconds(), options.checkpoint),
                                          max_interval=options.checkpoint, on_error=self._failed,
                                          extra=self.push_deferred)
        self._watching = _Watching(monitors, self.say)
        self._checkpointer.start()

    def _failed(self, monitor: ChangeMonitor, exc: Exception) -> None:
        self.say(f"checkpoint failed: {getattr(exc, 'message', exc)}")

    def checkpoint(self, monitor: ChangeMonitor, overdue: bool) -> bool:
        """Commit what settled in one memory and push it (merged aside: exchange.converge's
        `live`); True when some files were still being written and were held back."""
        m = self._by_root[str(monitor.root)]
        mem, trust = m.mem, m.trust
        assert trust is not None
        m.checkpoints += 1
        who = Attribution("run", f"Checkpoint {m.checkpoints} of run {self.run_id}", self.run_id,
                          (("Memsync-Command", self.shown), ("Memsync-Checkpoint", str(m.checkpoints))))
        with mem.locked():
            trust.check(self.say)
            snap = take(mem, who, settle=0.0 if overdue else settle_seconds(), run_base=m.base,
                        run_flags=trust.run_flags(final=False))
            trust.committed(snap)
            if snap.commit is None:
                m.checkpoints -= 1
            else:
                m.outcome.checkpoints = m.checkpoints
                warn_each(snap, mem.name, self.say)
                m.last_who = who
                if not self.options.no_push and self.pacer.may_push(m.name):  # else with a later push
                    deliver(mem, who, m.outcome, self.say, quiet_failure=True, trust=trust, live=True)
                    self.pacer.pushed(m.name)
        return bool(snap.pending)

    def push_deferred(self) -> None:
        """Push the checkpoints the rate limit held back, once each memory's turn has come."""
        for name in self.pacer.due():
            m = next(w for w in self.writable if w.name == name)
            assert m.trust is not None and m.last_who is not None
            try:
                with m.mem.locked():
                    deliver(m.mem, m.last_who, m.outcome, self.say, quiet_failure=True, trust=m.trust, live=True)
            finally:
                self.pacer.pushed(name)  # an attempt counts: a failing hub is not retried every tick

    def end(self, agent: processes.Agent | None = None) -> None:
        """The tear-down, once the command has exited (or could not start)."""
        if agent is not None:  # what it left running must not write while its files are saved
            end_processes(self.options.user, agent, self.say)
        _hand_back(self.writable, self.options.user, self.say)
        self._checkpointer.stop()
        self._watching.stop()
        self.held.release()
        if self.pacer.deferred_total:
            n = self.pacer.deferred_total
            self.say(f"max push rate: {n} {'checkpoint' if n == 1 else 'checkpoints'} waited for a later push")
        undo_read_only(self.mounted, self.say)


__all__ = ["RunSession", "end_processes", "quiet_seconds", "settle_seconds"]
