"""The threads memsync starts take no stop signal (SIGINT, SIGTERM, SIGHUP).

The kernel hands a signal sent to the process to any of its threads that does not block it, and
Python runs a handler only in the main thread: a stop that landed on a helper thread (the network
watch, a checkout's writer, the pack check) was only flagged there, and a main thread asleep in a
hub's silent read ran it when that read timed out (measured: a SIGTERM to the network watch's
thread during a run's opening pull was acted on 18.7 s later, at MEMSYNC_IO_TIMEOUT=20). With the
stop signals blocked in every thread memsync starts, the kernel gives them to the main thread,
whose read or wait they interrupt, and a run forwards them to its command at once (on the old
code a SIGTERM a change tracker's thread took never reached the command). A thread started from
one of these inherits its blocked signals: the change trackers' observers a run starts from its
helper thread do, and every observer is started under `stops_blocked` whichever thread starts it
(`memsync serve`'s included: a SIGTERM one of its observers took left the server serving).
"""

from __future__ import annotations

import contextlib
import functools
import signal
import threading
from collections.abc import Callable, Iterator
from typing import ParamSpec, TypeVar

__all__ = ["STOP_SIGNALS", "helper_body", "join_all", "stops_blocked"]

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

P = ParamSpec("P")
R = TypeVar("R")


def helper_body(target: Callable[P, R]) -> Callable[P, R]:
    """`target` as a thread's body that first blocks the stop signals in its thread."""
    @functools.wraps(target)
    def body(*args: P.args, **kwargs: P.kwargs) -> R:
        signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
        return target(*args, **kwargs)
    return body


@contextlib.contextmanager
def stops_blocked() -> Iterator[None]:
    """The stop signals blocked in this thread meanwhile, so that the threads it starts (watchdog's
    observers and emitters, whose code memsync does not write) block them for good; a stop that
    comes meanwhile waits, and is taken when this ends."""
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def join_all(threads: list[threading.Thread]) -> None:
    """Wait for every thread, even through Ctrl-C (raised once they are done): none is left
    writing into what the caller may be about to remove or free. The stop signals are held
    pending while it waits, not caught around the join: Python 3.11's Thread.join, interrupted
    by a signal, marks a thread that still runs as stopped (is_alive() then says False), so a
    loop that joined again until is_alive() turned False stopped waiting at the first Ctrl-C."""
    with stops_blocked():
        for thread in threads:
            thread.join()
