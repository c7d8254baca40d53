"""Small file-system and process facts that several modules need."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path, PurePosixPath


def in_the_way(root: Path, rel: str) -> tuple[str, int] | None:
    """The first folder on the way to `rel` that is not a real folder: a symlink (it could lead
    anywhere, outside the memory included) or a file, as (its path under `root`, its st_mode).
    None when there is none; the walk stops at the first missing folder, which can be created
    as a real one. Never follows a symlink; an OSError other than a missing path is raised."""
    here = root
    for part in PurePosixPath(rel).parts[:-1]:
        here = here / part
        try:
            mode = here.lstat().st_mode
        except FileNotFoundError:
            return None
        if not stat.S_ISDIR(mode):
            return here.relative_to(root).as_posix(), mode
    return None


def real_folders(root: Path, rel: str) -> bool:
    """Every folder on the way to `rel` exists and is a real folder, not a symlink nor a file."""
    try:
        return in_the_way(root, rel) is None and os.path.lexists((root / rel).parent)
    except OSError:
        return False


def pid_alive(pid: int) -> bool:
    """Whether process `pid` exists (another user's counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_dead_stagings(parent: Path, prefix: str) -> None:
    """Remove the folders `parent/<prefix><pid>` whose process is gone: what a clone or an adoption
    killed mid-way (kill -9) left, so the next one recovers by itself."""
    import shutil

    for stale in parent.glob(f"{prefix}*"):
        pid = stale.name.rsplit("-", 1)[-1]
        if pid.isdigit() and not pid_alive(int(pid)):
            shutil.rmtree(stale, ignore_errors=True)


def place(full: Path, data: bytes, mode: int) -> None:
    """Put exactly `data` at `full` as git's `mode` says (a symlink whose target is `data` for a
    link, else a file, executable or not, as the umask allows), atomically (atomic_write): written
    beside it and renamed over whatever is there, which is replaced, never written through. The
    caller has checked that every folder on the way is a real one. OSError on failure, leaving
    `full` as it was."""
    atomic_write(full, data, link=stat.S_ISLNK(mode), create_mode=0o755 if mode & 0o111 else 0o644,
                 durable=False, temp=f".memsync-{os.getpid()}-{full.name}")


_FRESH_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
_NAME_MAX = 255


def _temp_names(name: str, temp: str | None) -> Iterator[str]:
    """The temp file's name: `temp` if the caller chose one, else fresh random names beside `name`
    (mkstemp's contract without importing tempfile and random, felt in a cold push)."""
    if temp is not None:
        yield temp
        return
    stem = os.fsdecode(os.fsencode(name)[:_NAME_MAX - 18])  # '.' + stem + '.' + 12 hex + '.tmp'
    for _ in range(100):
        yield f".{stem}.{os.urandom(6).hex()}.tmp"


def _made_beside(folder: str, name: str, dir_fd: int | None, temp: str | None, link: bytes | None,
                 create_mode: int) -> tuple[int | None, str]:
    """A new file (its descriptor) or symlink (None) made O_EXCL beside `name`, and its path."""
    for tmp_name in _temp_names(name, temp):
        tmp = os.path.join(folder, tmp_name)
        if temp is not None:  # the caller's own name: a leftover of an earlier try of its own goes
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp, dir_fd=dir_fd)
        try:
            if link is not None:
                os.symlink(os.fsdecode(link), tmp, dir_fd=dir_fd)
                return None, tmp
            return os.open(tmp, _FRESH_FLAGS, create_mode, dir_fd=dir_fd), tmp
        except FileExistsError:
            if temp is not None:
                raise
    raise FileExistsError(errno.EEXIST, "no unused temporary file name", folder or name)


def atomic_write(target: Path | str, data: bytes, *, mode: int | None = None, keep_mode: bool = False,
                 durable: bool = True, dir_fd: int | None = None, link: bool = False,
                 create_mode: int = 0o600, temp: str | None = None) -> None:
    """Replace `target` with exactly `data`, all or nothing: written to a fresh temp file in the same
    folder (a new name opened O_EXCL, so nothing planted there is followed or written through),
    flushed to disk when `durable`, given its mode, then renamed over `target`. A symlink at
    `target` is replaced, never written through. A failure (a full disk) leaves `target` as it was
    and no temp file behind. The one temp-and-rename writer of memsync.

    Mode: `mode` if given (set exactly), else the existing file's when `keep_mode`, else
    `create_mode` as the umask leaves it (0600 by default: mkstemp's; a checkout passes git's
    0644/0755). `link`: a symlink whose target is `data` instead of a file. `dir_fd`: `target`
    is a name in the folder open as `dir_fd`, and every call stays in that folder (a folder on
    the way swapped for a symlink is never followed). `temp`: the temp file's name, for a caller
    that clears its own leftovers by name (dirfd.py); a file already there is removed first."""
    path = os.fspath(target)
    if mode is None and keep_mode:
        with contextlib.suppress(FileNotFoundError):
            st = os.stat(path, dir_fd=dir_fd, follow_symlinks=False)
            if stat.S_ISREG(st.st_mode):
                mode = stat.S_IMODE(st.st_mode)
    folder, name = os.path.split(path)
    fd, tmp = _made_beside(folder, name, dir_fd, temp, data if link else None, create_mode)
    try:
        if fd is not None:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                if mode is not None:
                    os.fchmod(fh.fileno(), mode)
                if durable:
                    fh.flush()
                    os.fsync(fh.fileno())
        os.replace(tmp, path, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise


def write_private(target: Path, data: bytes) -> None:
    """Replace a cache file of memsync's own with `data` (atomic_write: a symlink or file
    planted in a shared hub is never followed or written through). Not flushed to disk: a cache
    lost in a crash is computed again."""
    atomic_write(target, data, durable=False)


def read_private(path: Path, limit: int = 16 * 1024 * 1024) -> bytes:
    """A cache file's bytes, never through a symlink and never from a FIFO or device (which
    would block or never end): OSError otherwise."""
    import stat

    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path} is not a regular file")
        return fh.read(limit)
