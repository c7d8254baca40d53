"""The command line that starts memsync again: hooks written into coding agents' settings, the
resident server's restart after an upgrade.

`python -m memsync` puts the working directory first on sys.path, and the agents run their hooks
in the project the user opened: a `memsync/` package or a `yaml.py` in any repository would run
as the user at every session start. `-P` (Python 3.11+) leaves the working directory off
sys.path and changes nothing else; 3.10 has no such flag, so there it is `-I` (isolated mode: it
also ignores PYTHON* variables and the user's site-packages).
"""

from __future__ import annotations

import sys

__all__ = ["SAFE_PATH_FLAG", "memsync_command"]

SAFE_PATH_FLAG = "-P" if sys.version_info >= (3, 11) else "-I"


def memsync_command(*args: str) -> list[str]:
    """This interpreter's memsync, never code from the working directory: argv for exec/shlex."""
    return [sys.executable, SAFE_PATH_FLAG, "-m", "memsync", *args]
