"""When to commit settled changes: after a quiet period, and at least every N seconds while
changes keep coming. One loop, used by `run` (checkpoints) and `watch` (live sync)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from memsync.changes import ChangeMonitor

TICK = 0.1


class Checkpointer:
    """Calls `action()` from a background thread when the monitor's changes have settled.

    `action` returns True when some files were still being written (left for later)."""

    def __init__(self, monitors: list[ChangeMonitor], action: Callable[[ChangeMonitor], bool], *,
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
        self._thread = threading.Thread(target=self._loop, name="memsync-checkpoint", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def due(self, monitor: ChangeMonitor, now: float) -> bool:
        dirty, last_event = monitor.peek()
        if not dirty:
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
            monitor.take()
            self._last[id(monitor)] = now
            try:
                if self.action(monitor):
                    monitor.mark_dirty()
            except Exception as exc:  # reported, retried at the next change; never kills the loop
                monitor.mark_dirty()
                self.on_error(monitor, exc)
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
