"""Small file-system and process facts that several modules need."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
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


def place(full: Path, data: bytes, mode: int) -> None:
    """Put exactly `data` at `full` as git's `mode` says (a symlink whose target is `data` for a
    link, else a file, executable or not), atomically: written beside it and renamed over
    whatever is there, which is replaced, never written through. The caller has checked that
    every folder on the way is a real one. OSError on failure, leaving `full` as it was."""
    tmp = full.with_name(f".memsync-{os.getpid()}-{full.name}")
    tmp.unlink(missing_ok=True)
    try:
        if stat.S_ISLNK(mode):
            os.symlink(os.fsdecode(data), tmp)
        else:
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
            with os.fdopen(os.open(tmp, flags, 0o755 if mode & 0o111 else 0o644), "wb") as fh:
                fh.write(data)
        os.replace(tmp, full)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


_FRESH_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


def _fresh_file(target: Path) -> tuple[int, str]:
    """A new file beside `target`, created O_EXCL with mode 0600, and its path: mkstemp's
    contract without importing tempfile and random (~1.5 ms of a cold push)."""
    for _ in range(100):
        tmp = os.path.join(target.parent, f".{target.name}.{os.urandom(6).hex()}.tmp")
        try:
            return os.open(tmp, _FRESH_FLAGS, 0o600), tmp
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no unused temporary file name", str(target.parent))


def atomic_write(target: Path, data: bytes, *, mode: int | None = None, keep_mode: bool = False,
                 durable: bool = True) -> None:
    """Replace `target` with exactly `data`, all or nothing: written to a fresh temp file in the same
    folder (mkstemp: a new name opened O_EXCL, so nothing planted there is followed or written
    through), flushed to disk when `durable`, given its mode, then renamed over `target`. A
    symlink at `target` is replaced, never written through. Mode: `mode` if given, else the
    existing file's when `keep_mode`, else 0600 (mkstemp's). A failure (a full disk) leaves
    `target` as it was and no temp file behind."""
    if mode is None and keep_mode:
        with contextlib.suppress(FileNotFoundError):
            st = os.lstat(target)
            if stat.S_ISREG(st.st_mode):
                mode = stat.S_IMODE(st.st_mode)
    fd, tmp = _fresh_file(target)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            if mode is not None:
                os.fchmod(fh.fileno(), mode)
            if durable:
                fh.flush()
                os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
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
