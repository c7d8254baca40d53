"""Where a memory is: the nearest folder holding `.vm0/storage.yaml`.

Apart from config.py, which parses that file, so that `push` and `status` can find the memory
before importing the parser (cli/fastpath.py starts the work-tree walk with it).
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["CONFIG_DIR", "CONFIG_FILE", "find_root"]

CONFIG_DIR = ".vm0"
CONFIG_FILE = "storage.yaml"


def find_root(start: Path) -> Path | None:
    """The nearest directory at or above `start` holding `.vm0/storage.yaml`."""
    start = start.resolve()
    for candidate in (start, *start.parents):
        if (candidate / CONFIG_DIR / CONFIG_FILE).exists():
            return candidate
    return None
