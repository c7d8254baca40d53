"""Files and folders an agent-facing tool creates are the operator's alone: 0600 and 0700 whatever
the process umask (a container's umask is often 0, which would make them world-writable).

Only what the tool itself creates is set; an existing file keeps the mode it has, and an existing
folder is never touched.
"""

from __future__ import annotations

import os
from pathlib import Path

FILE_MODE = 0o600
DIR_MODE = 0o700


def make_dirs(path: Path) -> None:
    """Create `path` and every missing parent, each 0700. `mkdir(parents=True)` would give the
    parents the umask's mode: under umask 0 a world-writable folder someone else could swap for a
    symlink between the tool's path check and its write."""
    missing: list[Path] = []
    current = path
    while not os.path.lexists(current):
        missing.append(current)
        if current.parent == current:
            break
        current = current.parent
    for directory in reversed(missing):
        try:
            directory.mkdir(mode=DIR_MODE)
        except FileExistsError:  # made meanwhile by someone else: theirs, left as it is
            continue
        os.chmod(directory, DIR_MODE)  # mkdir's mode passes through the umask; chmod's does not


__all__ = ["DIR_MODE", "FILE_MODE", "make_dirs"]
