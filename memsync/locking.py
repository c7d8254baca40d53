"""One lock per memory (and per file:// hub) around every operation that changes it.

The lock is an OS advisory lock (filelock: flock on POSIX), so the kernel drops it when its holder
dies: a kill -9 never leaves a memsync lock behind. git's own lock files (`index.lock`, ref
`.lock`) do survive a kill and libgit2 never removes them; while we hold the memory's lock no other
memsync can be writing, so a git lock file that is not fresh was left by a dead process and is
removed.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from memsync.errors import LockBusy, RepoError

DEFAULT_TIMEOUT = 30.0
# A plain `git` command holds its lock files for well under this; older ones are orphans.
STALE_AFTER = 2.0
_TOP_LEVEL_LOCKS = ("index.lock", "HEAD.lock", "config.lock", "packed-refs.lock", "ORIG_HEAD.lock")


def lock_timeout() -> float:
    try:
        return float(os.environ.get("MEMSYNC_LOCK_TIMEOUT", DEFAULT_TIMEOUT))
    except ValueError:
        return DEFAULT_TIMEOUT


@contextmanager
def held(lock_file: Path, what: str, timeout: float | None = None) -> Iterator[None]:
    """Hold `lock_file` for the block; wait up to `timeout`, then fail with LockBusy."""
    wait = lock_timeout() if timeout is None else timeout
    try:
        release = _acquire(lock_file, wait)
    except TimeoutError as exc:
        raise LockBusy(
            f"{what} is busy: another memsync process has held its lock for {wait:.0f}s",
            "wait for it to finish (set MEMSYNC_LOCK_TIMEOUT to wait longer)",
        ) from exc
    except OSError as exc:
        raise RepoError(f"cannot create the lock {lock_file}: {exc.strerror}",
                        "check that the directory is writable") from exc
    try:
        yield
    finally:
        release()


def _acquire(lock_file: Path, wait: float) -> Callable[[], None]:
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
        return lock.release
    deadline = time.monotonic() + wait
    while True:
        fd = os.open(lock_file, os.O_RDWR | os.O_CREAT, 0o644)
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
        return lambda: _unlock(fd)


def _unlock(fd: int) -> None:
    import fcntl

    try:
        fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def git_lock_files(git_dir: Path) -> Iterator[Path]:
    for name in _TOP_LEVEL_LOCKS:
        candidate = git_dir / name
        if candidate.exists():
            yield candidate
    refs = git_dir / "refs"
    if refs.is_dir():
        yield from refs.rglob("*.lock")


def clear_stale_git_locks(git_dir: Path, stale_after: float = STALE_AFTER) -> list[Path]:
    """Remove git lock files orphaned by a killed process; call only while holding our lock."""
    removed: list[Path] = []
    deadline = time.monotonic() + stale_after + 1.0
    for lock in list(git_lock_files(git_dir)):
        while True:
            try:
                age = time.time() - lock.stat().st_mtime
            except FileNotFoundError:
                break  # its owner finished
            if age >= stale_after or time.monotonic() >= deadline:
                lock.unlink(missing_ok=True)
                removed.append(lock)
                break
            time.sleep(0.1)
    return removed
