"""A full disk, named as such wherever it surfaces (exit 7, never "this is a bug").

libgit2 reports a full disk in many words, not all of which say so: "failed to write out file:
No space left on device", but also "no error" or "object not found - failed to find pack entry"
when a pack or object it had just written was cut short. Python's own writes raise
OSError(ENOSPC). An OSError or GitError that reaches a command's boundary is a full disk when its
errno or its text says so, or when a file system the command writes to (the one its error names,
the current memory's, memsync's home with the embedded hub) has less than LOW bytes left.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pygit2

from memsync.errors import DiskFull, MemsyncError, OutputFailed

__all__ = ["LOW", "explain", "full_place", "low_on_space", "renamed", "says_full"]

LOW = 1024 * 1024  # bytes: less than this left, a write failure is taken for a full disk
_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}
_TEXTS = ("no space left on device", "disk quota exceeded", "file too large")


def low_on_space(path: Path) -> bool:
    """Whether the file system holding `path` (or its nearest existing parent) is (almost) full."""
    for candidate in (path, *path.parents):
        try:
            st = os.statvfs(candidate)
        except OSError:
            continue
        return st.f_bavail * st.f_frsize < LOW
    return False


def full_place(text: str, places: list[Path | None]) -> Path:
    """Where a write failed for want of space: of the file a libgit2 message names in quotes
    (its folder) and `places`, the first that is low on space; else the first of them."""
    import re

    quoted = [Path(q).parent for q in re.findall(r"'(/[^']+)'", text)]
    candidates = quoted + [p for p in places if p is not None]
    return next((p for p in candidates if low_on_space(p)), candidates[0] if candidates else Path.cwd())


def says_full(exc: BaseException) -> bool:
    """Whether the error itself says a disk is full (its errno, or libgit2's text)."""
    text = str(exc).lower()
    return getattr(exc, "errno", None) in _ERRNOS or any(t in text for t in _TEXTS)


def renamed(error: MemsyncError) -> MemsyncError:
    """A memsync error raised for an OSError or GitError that says a disk is full (a RepoError
    "cannot write X: No space left on device"), as a DiskFull keeping its message; else itself."""
    cause = error.__cause__
    if isinstance(error, (DiskFull, OutputFailed)) or "disk is full" in error.message or cause is None \
            or not says_full(cause):
        return error  # already says so, with its own hint on what was kept
    named = getattr(cause, "filename", None)
    where = Path(os.fsdecode(named)).parent if isinstance(named, (str, bytes)) else Path.cwd()
    return DiskFull(where, error.message)


def explain(exc: BaseException, places: list[Path]) -> DiskFull | None:
    """`exc` as a DiskFull naming where, if it is one (see the module's text); else None.
    `places`: the directories the command writes to, first the most telling."""
    if not isinstance(exc, (OSError, pygit2.GitError)):
        return None
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    named = getattr(exc, "filename", None)
    candidates = ([Path(os.fsdecode(named)).parent] if isinstance(named, (str, bytes)) else []) + places
    says_so = says_full(exc)
    full = next((p for p in candidates if low_on_space(p)), None)
    if not says_so and full is None:
        return None
    where = full or (candidates[0] if candidates else Path.cwd())
    return DiskFull(where, text)
