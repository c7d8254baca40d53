"""One lock per memory (and per file:// hub) around every operation that changes it.

The lock is an OS advisory lock (filelock: flock on POSIX), so the kernel drops it when its holder
dies: a kill -9 never leaves a memsync lock behind. git's own lock files (`index.lock`, ref
`.lock`) do survive a kill and libgit2 never removes them, so memsync removes the ones whose owner
is gone, and only those. A holder is judged by who holds a lock, never by comparing clocks:

- a git lock file that a live process may hold (it has the file open, or it is a `git` working in
  that repository: holders.py) is never removed: memsync waits for it up to MEMSYNC_LOCK_TIMEOUT,
  then stops with LockBusy naming the file and the process;
- the holder of memsync's lock writes its pid, host, start time, boot id and process start ticks
  into the lock file and empties it on release; a record found by the next holder means the
  previous one died holding the lock, and git lock files made since it started are its orphans,
  removed at once;
- any other git lock file no process here holds (a git killed on this machine, or one running on
  another machine that shares the directory) is removed once it is FOREIGN_STALE_AFTER (10
  minutes) old.

Times are read on one clock, the file system's: a lock file's mtime is compared with the mtime
memsync's own lock file got when it was written, plus the monotonic time since, never with the
process's clock, which a sandbox may have set anywhere.
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from memsync.errors import LockBusy, RepoError
from memsync.util import envcheck, holders
from memsync.util.records import recordclass

DEFAULT_TIMEOUT = 30.0
# A git lock file that no dead memsync left behind is someone else's: it is removed only when it
# is this old (a `git commit` waiting in an editor holds index.lock for as long as the editor is open).
FOREIGN_STALE_AFTER = 600.0
_CLOCK_SLACK = 2.0  # file systems with coarse timestamps
_TOP_LEVEL_LOCKS = ("index.lock", "HEAD.lock", "config.lock", "packed-refs.lock", "ORIG_HEAD.lock")


@recordclass(frozen=True)
class Tenure:
    """What taking a lock found out. `crashed_since`: when a holder that died holding it had
    started, on the file system's clock (None: the previous holder released it normally, or this
    platform keeps no record; -inf: it died, but its start time is not on this clock). `fs_now`,
    `taken`: the file system's clock when the lock was taken and the monotonic clock then, so that
    ages of git lock files are measured on the clock that stamped them."""

    crashed_since: float | None = None
    fs_now: float | None = None
    taken: float = 0.0

    def file_system_now(self) -> float:
        """Now, on the file system's clock (the process's own clock where none was read)."""
        if self.fs_now is None:
            return time.time()
        return self.fs_now + (time.monotonic() - self.taken)


def lock_timeout() -> float:
    """Seconds to wait for a busy memory (MEMSYNC_LOCK_TIMEOUT, as util/envcheck.py checked it)."""
    return envcheck.number("MEMSYNC_LOCK_TIMEOUT", DEFAULT_TIMEOUT)


@contextmanager
def held(lock_file: Path, what: str, timeout: float | None = None) -> Iterator[Tenure]:
    """Hold `lock_file` for the block; wait up to `timeout`, then fail with LockBusy."""
    wait = lock_timeout() if timeout is None else timeout
    try:
        release, tenure = _handed(lock_file) or _acquire(lock_file, wait)
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


# A lock taken at the top of the command line (take_early), for the command's first `held` of it.
_early: dict[str, tuple[Callable[[], None], Tenure]] = {}


def take_early(lock_file: Path, before_release: Callable[[], None]) -> Tenure | None:
    """Take `lock_file` now if it is free (never waits) and keep it for this process's next
    `held` of the same file, which then takes it over instead of taking it again (core/lockfirst.py).
    `before_release`: what must end before the lock is let go (the work begun under it)."""
    try:
        release, tenure = _acquire(lock_file, 0)
    except (TimeoutError, OSError):
        return None

    def end() -> None:
        try:
            before_release()
        finally:
            release()

    _early[os.path.realpath(lock_file)] = (end, tenure)
    return tenure


def release_early() -> None:
    """Let go of a lock taken early that no `held` took over (the command stopped before it)."""
    while _early:
        _early.popitem()[1][0]()


def _handed(lock_file: Path) -> tuple[Callable[[], None], Tenure] | None:
    return _early.pop(os.path.realpath(lock_file), None) if _early else None


def _acquire(lock_file: Path, wait: float) -> tuple[Callable[[], None], Tenure]:
    """flock(2) directly on POSIX, as filelock does there (its import slows start-up:
    docs/PERFORMANCE.md); filelock elsewhere. Raises TimeoutError after `wait` seconds (negative:
    wait forever)."""
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
    """Read the previous holder's record (left only if it died holding the lock), write ours:
    `pid host start boot ticks`, `start` on the file system's clock (the lock file's mtime once
    written), `boot ticks` naming the process beyond its pid (holders.py). Ours keeps a dead
    holder's start time, so that dying in turn before its orphans are cleared still leaves them
    recognisable."""
    try:
        previous = os.pread(fd, 512, 0).decode("utf-8", "replace").split()
    except OSError:
        previous = []
    crashed = _dead_holders_start(previous)
    me = holders.current()
    try:
        os.ftruncate(fd, 0)
        # first the dead holder's start, if any (`-`: none; no git lock file is made before the
        # second write, so dying in between leaves nothing of ours to clear)
        first = "-" if crashed is None else f"{crashed:.3f}"
        os.pwrite(fd, f"{me.pid} {me.host} {first} {me.boot or '-'} {me.started or '-'}\n".encode(), 0)
        taken = time.monotonic()
        fs_now = os.fstat(fd).st_mtime  # the write stamped it: the file system's clock, now
        if crashed is not None and crashed > fs_now + _CLOCK_SLACK:
            crashed = -math.inf  # a start after now on this clock: not a time of this clock
        since = fs_now if crashed is None else min(crashed, fs_now)
        record = f"{me.pid} {me.host} {since:.3f} {me.boot or '-'} {me.started or '-'}\n"
        os.ftruncate(fd, 0)
        os.pwrite(fd, record.encode(), 0)
    except OSError:  # a read-only file system: no records, foreign-lock rules only
        return Tenure()
    return Tenure(crashed, fs_now, taken)


def _dead_holders_start(record: list[str]) -> float | None:
    """The start time in a record left behind (`pid host start [boot ticks]`), if its holder is
    gone. The lock is ours, so the holder no longer holds it; a holder this machine still sees
    running (it passed the file on, or the lock is not honoured across hosts) is no dead one."""
    if len(record) < 3:
        return None
    try:
        pid, start = int(record[0]), float(record[2])
    except ValueError:
        return None
    boot, started = ([None if value == "-" else value for value in record[3:5]] + [None, None])[:2]
    if boot is not None and pid != os.getpid() \
            and holders.may_be_alive(holders.ProcessIdentity(pid, record[1], boot, started)):
        return None
    return start if math.isfinite(start) else -math.inf


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
    (`tenure`: what taking it found). A lock file that a live process may hold (holders.py) is
    never removed: it is waited for up to `wait` seconds (default MEMSYNC_LOCK_TIMEOUT), then
    LockBusy. One that no process here may hold is removed if the dead holder of memsync's lock
    made it, or once it is FOREIGN_STALE_AFTER old on the file system's clock (a `git` on another
    machine sharing the directory is invisible here)."""
    removed: list[Path] = []
    tenure = tenure or Tenure()
    crashed = tenure.crashed_since
    limit = lock_timeout() if wait is None else wait
    deadline = time.monotonic() + limit if limit >= 0 else float("inf")
    places = [git_dir, git_dir.parent] if git_dir.name == ".git" else [git_dir]
    for lock in list(git_lock_files(git_dir)):
        while True:
            try:
                made = lock.stat().st_mtime
            except FileNotFoundError:
                break  # its owner finished
            age = tenure.file_system_now() - made
            orphan = crashed is not None and made >= crashed - _CLOCK_SLACK
            # made after now on this clock: its time says nothing about its age
            old = age >= FOREIGN_STALE_AFTER or age < -_CLOCK_SLACK
            holder = _holder(lock, places) if orphan or old else None
            if (orphan or old) and holder is None:
                lock.unlink(missing_ok=True)
                removed.append(lock)
                break
            if time.monotonic() >= deadline:
                raise _busy(lock, what or str(git_dir), holder or _holder(lock, places), age)
            time.sleep(0.1)
    return removed


def _busy(lock: Path, where: str, holder: int | None, age: float) -> LockBusy:
    if holder is not None:
        return LockBusy(f"{where} is busy: {lock} is held by another git command (process {holder} is "
                        f"running there)", "wait for it to finish (set MEMSYNC_LOCK_TIMEOUT to wait longer)")
    return LockBusy(
        f"{where} is busy: {lock} is held by another git command (made {max(age, 0):.0f}s ago)",
        f"wait for it to finish; if no git command is running there, remove {lock} "
        f"(memsync removes such a file itself once it is {FOREIGN_STALE_AFTER / 60:.0f} minutes old)")


def _holder(lock: Path, places: list[Path]) -> int | None:
    """A live process that may hold `lock`: one that has it open, or a git working there."""
    return holders.open_elsewhere(lock) or holders.git_working_in(places)
