"""Small file-system and process facts that several modules need."""

from __future__ import annotations

import os
import stat
from pathlib import Path, PurePosixPath


def real_folders(root: Path, rel: str) -> bool:
    """Every folder on the way to `rel` exists and is a real folder, not a symlink (which could
    lead outside the memory) nor a file."""
    here = root
    for part in PurePosixPath(rel).parts[:-1]:
        here = here / part
        try:
            if not stat.S_ISDIR(here.lstat().st_mode):
                return False
        except OSError:
            return False
    return True


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
