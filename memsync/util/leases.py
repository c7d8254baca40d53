"""Proof that no process has a file open, held while memsync rewrites it (BRIEF rule 9).

A merge checked out over a file an editor or an agent is writing loses what it writes: the writer
appends between the checkout's "unmodified?" check and its write, or keeps writing through a
descriptor of the file the checkout replaced. Linux's write lease (fcntl F_SETLEASE, F_WRLCK) is
granted only while no other descriptor of the file is open anywhere, and while it is held, any
open() of the file waits (up to /proc/sys/fs/lease-break-time) until it is released. So a file
whose lease was granted is provably not open for writing, nobody can open it until memsync is
done, and one whose lease was refused is busy: the checkout leaves it for later.

Where leases cannot be had (not Linux, a file system without them, a file owned by another user
without CAP_LEASE, a thread that cannot make SIGIO harmless), `held` says so (`available` False)
and the caller decides. A lease break signals its holder with SIGIO, whose default action ends the
process: a no-op handler is installed from the main thread first (handlers, unlike an ignored
signal, do not pass to the programs memsync starts).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path

from memsync.util.records import field, recordclass

_F_SETLEASE = 1024  # fcntl.F_SETLEASE where the fcntl module names it (Linux)
_F_WRLCK, _F_UNLCK = 1, 2


@recordclass
class Leases:
    available: bool = True
    busy: list[str] = field(default_factory=list)  # files open elsewhere: not to be written now
    fds: dict[str, int] = field(default_factory=dict)  # path -> the descriptor its lease is on


def sigio_harmless() -> bool:
    """Whether a lease break cannot end this process (installs the no-op handler if it can)."""
    import signal

    sigio = getattr(signal, "SIGIO", None)
    if sigio is None:
        return False
    current = signal.getsignal(sigio)
    if current not in (signal.SIG_DFL, None):
        return True
    if threading.current_thread() is not threading.main_thread():
        return False
    signal.signal(sigio, _noop)
    signal.siginterrupt(sigio, False)  # a lease break must not fail a system call libgit2 is in
    return True


def _noop(signum: int, frame: object) -> None:
    return None


@contextlib.contextmanager
def held(root: Path, paths: Iterable[str], writable: Iterable[str] = ()) -> Iterator[Leases]:
    """Write leases on the regular files at `paths` (relative to `root`; missing ones and
    non-files are skipped), released on exit. `busy` names those open elsewhere; the files in
    `writable` are opened for writing, to be rewritten through `fds` (never by name: an open by
    the holder breaks its own lease)."""
    result = Leases(available=os.name == "posix" and hasattr(os, "O_NOFOLLOW") and sigio_harmless())
    rewrite = set(writable)
    try:
        if result.available:
            for rel in paths:
                if not _lease(root, rel, result, rel in rewrite):
                    break
        yield result
    finally:
        for fd in result.fds.values():
            with contextlib.suppress(OSError):
                os.close(fd)  # closing the last descriptor releases its lease


def _lease(root: Path, rel: str, result: Leases, rewrite: bool) -> bool:
    """False when leases turned out not to be available at all."""
    import fcntl

    mode = os.O_RDWR if rewrite else os.O_RDONLY
    flags = mode | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(root / rel, flags)
    except OSError:
        return True  # missing, a link, a FIFO without a writer...: nothing open to protect here
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            return True
        fcntl.fcntl(fd, getattr(fcntl, "F_SETLEASE", _F_SETLEASE), _F_WRLCK)
    except OSError as exc:
        os.close(fd)
        if exc.errno in (errno.EAGAIN, errno.EBUSY):
            result.busy.append(rel)
            return True
        result.available = False  # EINVAL (no leases here), EACCES (not the file's owner), ...
        return False
    result.fds[rel] = fd
    return True


__all__ = ["Leases", "held", "sigio_harmless"]
