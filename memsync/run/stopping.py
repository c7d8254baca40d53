"""Signals during a run: before the command starts (the opening pull), while it runs and while
the final push is under way."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from types import FrameType
from typing import TYPE_CHECKING

from memsync.errors import (
    Interrupted,
)
from memsync.util import envcheck

if TYPE_CHECKING:  # and imported where used: a plain run has no read-only memory, --as-user or conflict
    pass



DEFAULT_STOP_GRACE = 8.0  # seconds (MEMSYNC_STOP_GRACE)

Say = Callable[[str], None]


def stop_grace() -> float:
    """Seconds the final push may go on after memsync is asked to stop (MEMSYNC_STOP_GRACE): within
    `docker stop`'s 10 s, so that the job still sees which versions were not pushed."""
    return envcheck.number("MEMSYNC_STOP_GRACE", DEFAULT_STOP_GRACE)


class Signals:
    """SIGTERM, SIGHUP and SIGINT from the command's start to the end of the final push.

    While the command runs they are forwarded to it (SIGINT only when not at a terminal, where
    Ctrl-C already reaches it). Once it has exited, memsync is not stopped at once: it commits,
    and the final push goes on until a second signal, or until `grace` seconds after the first
    signal memsync received (docker stop's SIGTERM may have come while the command ran); then
    the push is abandoned, the commit kept, and the run reports what was not pushed (exit 8).
    The handler only records: the main thread decides (_interruptible), so no signal lands in
    the middle of a commit."""

    def __init__(self, proc: subprocess.Popen[bytes], grace: float) -> None:
        self.proc = proc
        self.grace = grace
        self.received: list[int] = []  # while the command ran
        self.after: list[int] = []  # once it had exited
        self.first_at: float | None = None  # monotonic
        self.command_done = False
        self.saved: dict[int, object] = {}

    def __enter__(self) -> Signals:
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            self.saved[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.first_at is None:
            self.first_at = time.monotonic()
        if self.command_done:
            self.after.append(signum)
            return
        self.received.append(signum)
        at_terminal = signum == signal.SIGINT and sys.stdin is not None and sys.stdin.isatty()
        if not at_terminal and self.proc.poll() is None:
            with contextlib.suppress(OSError):
                os.killpg(self.proc.pid, signum)  # the command's group: what it started hears it too

    def command_exited(self) -> None:
        self.command_done = True

    def stopping(self) -> bool:
        return self.first_at is not None

    def abandon_reason(self) -> str | None:
        """Why the final push must be given up now, if it must."""
        if len(self.after) >= 2:
            return "a second signal"
        if self.first_at is not None and time.monotonic() - self.first_at >= self.grace:
            return f"not done {self.grace:g}s after the signal"
        return None

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self.saved.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]


@contextlib.contextmanager
def stop_requests() -> Iterator[None]:
    """SIGTERM and SIGHUP before the command starts (the opening pull) stop the run as Ctrl-C does:
    an error naming the signal (exit 128 + its number, as a shell reports it), the memories' claims
    released, nothing half-done left behind. Once the command runs, Signals takes them over."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, frame: FrameType | None) -> None:
        stopped = Interrupted(f"stopped by {signal.Signals(signum).name} before the command started; nothing "
                              "was run", "nothing is lost: run it again")
        stopped.exit_code = 128 + signum
        raise stopped

    saved = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGHUP)
             if signal.getsignal(sig) in (signal.SIG_DFL, None)}
    try:
        yield
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)


__all__ = ["DEFAULT_STOP_GRACE", "Signals", "stop_grace", "stop_requests"]
