"""No thread of memsync waits for ever in an open() of a FIFO someone put in a work tree.

memsync opens every file of a work tree itself without blocking (O_NONBLOCK, then fstat: see
dirfd.py). libgit2 does not: to hash a file whose stat data changed (a status, a checkout's check
that a file is unmodified) it lstat()s the path, then open()s it. An agent that swaps a FIFO in
between (or any time before a checkout, for a path the checkout examines) makes that open wait
for a writer that never comes, with the memory's lock held (a run's checkpoint, a pull as root
over an --as-user agent's tree).

So a watcher thread, started with the first memory a process opens, looks every POLL seconds at
what each thread of this process is blocked in (/proc/self/task/TID/syscall, Linux on x86-64 and
arm64): a thread waiting in open()/openat() of a FIFO is released by opening that FIFO for writing,
without blocking, and closing it at once. The thread's open then succeeds and its read sees the
end of the file: libgit2 hashes an empty file, which changes nothing memsync commits (a snapshot
commits only what it read itself, and skips a FIFO by name). The FIFOs released are kept in
`released` for the commands that report them.
"""

from __future__ import annotations

import contextlib
import os
import signal
import stat
import threading

from memsync.util.threads import helper_body

__all__ = ["POLL", "drain", "released", "watch"]

POLL = 0.25
# syscall number -> index of its path argument (x86-64: open, openat, openat2; arm64: openat, openat2)
_OPENS = {"x86_64": {2: 0, 257: 1, 437: 1}, "aarch64": {56: 1, 437: 1}}.get(os.uname().machine, {})
_AT_FDCWD = 0xFFFFFF9C
_WAKE = signal.SIGURG  # ignored by default; nothing in memsync or its libraries uses it
_can_interrupt = False

released: list[str] = []
_lock = threading.Lock()
_started = False


def watch() -> None:
    """Start the watcher once per process (where the kernel tells what a thread waits in)."""
    global _started, _can_interrupt
    with _lock:
        if _started or not _OPENS or not os.path.exists("/proc/self/task"):
            return
        _started = True
    try:  # a handler that does nothing: the signal only ends a wait (EINTR), see _release
        if signal.getsignal(_WAKE) in (signal.SIG_DFL, signal.SIG_IGN, None):
            signal.signal(_WAKE, _wake)
            _can_interrupt = True
    except ValueError:  # not the main thread: FIFOs still in place are released all the same
        pass
    threading.Thread(target=helper_body(_loop), name="memsync-fifo-release", daemon=True).start()


def _wake(signum: int, frame: object) -> None:
    return None


def drain() -> list[str]:
    """The FIFOs released since the last call (absolute paths)."""
    with _lock:
        found = list(dict.fromkeys(released))
        released.clear()
    return found


def _loop() -> None:
    import time

    me = threading.get_native_id()
    while True:
        time.sleep(POLL)
        with contextlib.suppress(OSError):
            for tid in os.listdir("/proc/self/task"):
                if int(tid) != me:
                    _release(tid)


def _blocked_open(tid: str) -> tuple[int, int] | None:
    """(directory descriptor, path pointer) of the open() thread `tid` is blocked in, if any."""
    try:
        with open(f"/proc/self/task/{tid}/syscall", encoding="ascii") as fh:
            fields = fh.read().split()
    except OSError:
        return None
    if not fields or not fields[0].isdigit() or int(fields[0]) not in _OPENS:
        return None
    at = _OPENS[int(fields[0])]
    try:
        args = [int(f, 16) for f in fields[1:4]]
    except ValueError:
        return None
    return (_AT_FDCWD if at == 0 else args[0] & 0xFFFFFFFF), args[at]


def _release(tid: str) -> None:
    import ctypes

    found = _blocked_open(tid)
    if found is None or found[1] == 0:
        return
    path = os.fsdecode(ctypes.string_at(found[1]))
    if _blocked_open(tid) != found:  # the open has returned meanwhile: the pointer may be stale
        return
    if not os.path.isabs(path):
        base = "/proc/self/cwd" if found[0] == _AT_FDCWD else f"/proc/self/fd/{found[0]}"
        path = os.path.join(os.path.realpath(base), path)
    with _lock:
        released.append(path)
    try:
        if stat.S_ISFIFO(os.lstat(path).st_mode):
            os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC))
            return
    except OSError:  # ENXIO: no reader waits on the FIFO at that path (it waits on another)
        pass
    _interrupt(tid)


def _interrupt(tid: str) -> None:
    """A thread waiting for a FIFO's writer at a path that no longer names that FIFO (swapped
    away meanwhile: no one can open it now) is interrupted: its open() fails with EINTR."""
    try:
        with open(f"/proc/self/task/{tid}/wchan", encoding="ascii") as fh:
            if fh.read().strip() != "wait_for_partner":  # the kernel's wait in a FIFO's open
                return
    except OSError:
        return
    thread = next((t for t in threading.enumerate() if t.native_id == int(tid)), None)
    if _can_interrupt and thread is not None and thread.ident is not None:
        with contextlib.suppress(OSError, ProcessLookupError):
            signal.pthread_kill(thread.ident, _WAKE)
