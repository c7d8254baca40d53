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
