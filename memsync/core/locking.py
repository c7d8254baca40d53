"""One lock per memory (and per file:// hub) around every operation that changes it.

The lock is an OS advisory lock (filelock: flock on POSIX), so the kernel drops it when its holder
dies: a kill -9 never leaves a memsync lock behind. git's own lock files (`index.lock`, ref
`.lock`) do survive a kill and libgit2 never removes them, so memsync removes the ones whose owner
is gone, and only those (a lock held by a running `git` is never taken away from it):

- the holder of memsync's lock writes its pid, host and start time into the lock file and empties
  it on release; a record found by the next holder means the previous one died holding the lock,
  and git lock files made since it started are its orphans, removed at once;
- any other git lock file (a `git` command run by a person or an agent) is left alone while a
  process has it open or it is younger than FOREIGN_STALE_AFTER (10 minutes): memsync waits for it
  up to MEMSYNC_LOCK_TIMEOUT, then stops with LockBusy naming the file.
"""

from __future__ import annotations

import contextlib
import functools
import os
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from memsync.errors import LockBusy, RepoError

DEFAULT_TIMEOUT = 30.0
# A git lock file that no dead memsync left behind is someone else's: it is removed only when it
# is this old (a `git commit` waiting in an editor holds index.lock for as long as the editor is open).
FOREIGN_STALE_AFTER = 600.0
_CLOCK_SLACK = 2.0  # file systems with coarse timestamps
_TOP_LEVEL_LOCKS = ("index.lock", "HEAD.lock", "config.lock", "packed-refs.lock", "ORIG_HEAD.lock")


@dataclass(frozen=True)
class Tenure:
    """What taking a lock found out: when a holder that died holding it had started (None: the
    previous holder released it normally, or this platform keeps no record)."""

    crashed_since: float | None = None


def lock_timeout() -> float:
    try:
        return float(os.environ.get("MEMSYNC_LOCK_TIMEOUT", DEFAULT_TIMEOUT))
    except ValueError:
        return DEFAULT_TIMEOUT


@contextmanager
def held(lock_file: Path, what: str, timeout: float | None = None) -> Iterator[Tenure]:
    """Hold `lock_file` for the block; wait up to `timeout`, then fail with LockBusy."""
    wait = lock_timeout() if timeout is None else timeout
    try:
        release, tenure = _acquire(lock_file, wait)
    except TimeoutError as exc:
        raise LockBusy(
            f"{what} is busy: another memsync process has held its lock for {wait:.0f}s",
            "wait for it to finish (set MEMSYNC_LOCK_TIMEOUT to wait longer)",
        ) from exc
    except OSError as exc:
        raise RepoError(f"cannot create the lock {lock_file}: {exc.strerror}",
                        "check that the directory is writable") from exc
    try:
        yield tenure
    finally:
        release()


def _acquire(lock_file: Path, wait: float) -> tuple[Callable[[], None], Tenure]:
    """flock(2) directly on POSIX, as filelock does there (its import costs ~30 ms of start-up);
    filelock elsewhere. Raises TimeoutError after `wait` seconds (negative: wait forever)."""
    try:
        import fcntl
    except ImportError:
        from filelock import FileLock, Timeout

        lock = FileLock(str(lock_file), timeout=wait)
        try:
            lock.acquire()
        except Timeout as exc:
            raise TimeoutError(str(lock_file)) from exc
        return lock.release, Tenure()
    deadline = time.monotonic() + wait
    while True:
        # never through a planted symlink: the file is written (our record) and truncated
        fd = os.open(lock_file, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            if wait >= 0 and time.monotonic() >= deadline:
                raise TimeoutError(str(lock_file)) from None
            time.sleep(0.05)
            continue
        except OSError:
            os.close(fd)
            raise
        if os.fstat(fd).st_nlink == 0:  # the file was removed while we waited: lock the new one
            os.close(fd)
            continue
        return functools.partial(_unlock, fd), _record(fd)


def _record(fd: int) -> Tenure:
    """Read the previous holder's record (left only if it died holding the lock), write ours.
    Ours keeps a dead holder's start time, so that dying in turn before its orphans are cleared
    still leaves them recognisable."""
    try:
        previous = os.pread(fd, 256, 0).decode("utf-8", "replace").split()
    except OSError:
        previous = []
    try:
        crashed: float | None = float(previous[2]) if len(previous) >= 3 else None
    except ValueError:
        crashed = None
    since = time.time() if crashed is None else min(crashed, time.time())
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()} {socket.gethostname()} {since:.3f}\n".encode(), 0)
    except OSError:  # a read-only file system: no records, foreign-lock rules only
        return Tenure()
    return Tenure(crashed)


def _unlock(fd: int) -> None:
    import fcntl

    try:
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)  # released normally: no record for the next holder
        fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def git_lock_files(git_dir: Path) -> Iterator[Path]:
    for name in _TOP_LEVEL_LOCKS:
        candidate = git_dir / name
        if candidate.exists():
            yield candidate
    # os.walk, not Path.rglob (~3x slower): no symlinked folder is followed either way
    for folder, dirs, files in os.walk(os.path.join(git_dir, "refs")):
        for name in (*dirs, *files):
            if name.endswith(".lock"):
                yield Path(folder, name)


def clear_stale_git_locks(git_dir: Path, tenure: Tenure | None = None, what: str | None = None,
                          wait: float | None = None) -> list[Path]:
    """Remove git lock files whose owner is gone; call only while holding memsync's lock
    (`tenure`: what taking it found). A lock a live process may still hold is waited for up to
    `wait` seconds (default MEMSYNC_LOCK_TIMEOUT), then LockBusy."""
    removed: list[Path] = []
    crashed = tenure.crashed_since if tenure is not None else None
    limit = lock_timeout() if wait is None else wait
    deadline = time.monotonic() + limit if limit >= 0 else float("inf")
    for lock in list(git_lock_files(git_dir)):
        while True:
            try:
                made = lock.stat().st_mtime
            except FileNotFoundError:
                break  # its owner finished
            orphan = crashed is not None and made >= crashed - _CLOCK_SLACK
            old = time.time() - made >= FOREIGN_STALE_AFTER
            if (orphan or old) and not _open_elsewhere(lock):
                lock.unlink(missing_ok=True)
                removed.append(lock)
                break
            if time.monotonic() >= deadline:
                where = what or str(git_dir)
                raise LockBusy(
                    f"{where} is busy: {lock} is held by another git command "
                    f"(made {time.time() - made:.0f}s ago)",
                    f"wait for it to finish; if no git command is running there, remove {lock} "
                    f"(memsync removes such a file itself once it is {FOREIGN_STALE_AFTER / 60:.0f} minutes old)")
            time.sleep(0.1)
    return removed


def _open_elsewhere(path: Path) -> bool:
    """Whether another live process has `path` open (Linux /proc; False where it cannot tell)."""
    proc = Path("/proc")
    try:
        target = str(path.resolve())
        pids = [entry for entry in os.listdir(proc) if entry.isdigit() and int(entry) != os.getpid()]
    except OSError:
        return False
    for pid in pids:
        try:
            fds = os.listdir(proc / pid / "fd")
        except OSError:
            continue  # gone, or another user's
        for fd in fds:
            try:
                if os.readlink(proc / pid / "fd" / fd) == target:
                    return True
            except OSError:
                continue
    return False
