"""When to commit settled changes: after a quiet period, and at least every N seconds while
changes keep coming. One loop, used by `run` (checkpoints) and `watch` (live sync)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from memsync.live.changes import ChangeMonitor
from memsync.util.threads import helper_body

TICK = 0.1
# A file held back because it was still being written is retried once it has been quiet this
# long (a little more than snapshot's settle window), not a whole interval later.
RETRY_HELD = 0.6


class Checkpointer:
    """Calls `action(monitor, overdue)` from a background thread when the monitor's changes have
    been quiet for `quiet` seconds, or at least every `max_interval` seconds while they keep coming.

    `action` returns True when some files were still being written and were held back: they are
    retried shortly, and the interval stays overdue until they are in. `overdue` is True once a
    checkpoint is two intervals late (a file rewritten faster than it can settle): the action
    should then take files as they are rather than wait for them to settle."""

    def __init__(self, monitors: list[ChangeMonitor], action: Callable[[ChangeMonitor, bool], bool], *,
                 quiet: float, max_interval: float, on_error: Callable[[ChangeMonitor, Exception], None],
                 extra: Callable[[], None] | None = None) -> None:
        self.monitors = monitors
        self.action = action
        self.quiet = quiet
        self.max_interval = max_interval
        self.on_error = on_error
        self.extra = extra
        self._stop = threading.Event()
        self._busy = threading.Lock()
        self._last = {id(m): time.monotonic() for m in monitors}
        self._retry_at: dict[int, float] = {}
        self._thread = threading.Thread(target=helper_body(self._loop), name="memsync-checkpoint", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def due(self, monitor: ChangeMonitor, now: float) -> bool:
        dirty, last_event = monitor.peek()
        if not dirty or now < self._retry_at.get(id(monitor), 0.0):
            return False
        return now - last_event >= self.quiet or now - self._last[id(monitor)] >= self.max_interval

    def _loop(self) -> None:
        while not self._stop.wait(TICK):
            with self._busy:
                if self._stop.is_set():
                    return
                self.tick()

    def tick(self) -> None:
        now = time.monotonic()
        for monitor in self.monitors:
            if not self.due(monitor, now):
                continue
            overdue = now - self._last[id(monitor)] >= 2 * self.max_interval
            monitor.take()
            try:
                held = self.action(monitor, overdue)
            except Exception as exc:  # reported, retried at the next change; never kills the loop
                self._last[id(monitor)] = now
                monitor.mark_dirty()
                self.on_error(monitor, exc)
                continue
            if held:
                monitor.mark_dirty(touch=False)
                self._retry_at[id(monitor)] = now + RETRY_HELD
            else:
                self._last[id(monitor)] = now
        if self.extra is not None:
            try:
                self.extra()
            except Exception as exc:
                self.on_error(self.monitors[0], exc)

    def stop(self) -> None:
        """Stop after the checkpoint in flight (if any) has finished."""
        self._stop.set()
        with self._busy:
            pass
        self._thread.join(timeout=60)
