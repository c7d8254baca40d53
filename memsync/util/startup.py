"""Python's cyclic garbage collector held off while a cold command imports its modules.

Importing pygit2 and memsync allocates some 100,000 objects and none of them is garbage, yet the
collector runs dozens of times over them, most of it during `import pygit2` (figures:
docs/PERFORMANCE.md, "Figures behind the code's speed mechanisms").
The entry point pauses it before its first import and resumes it before the command's body runs,
moving everything imported so far out of its sight (`gc.freeze`), so later collections do not
walk the modules either. The body runs with the collector on as always: nothing a command does
is done with it off.
"""

from __future__ import annotations

import gc

__all__ = ["pause_gc", "resume_gc"]

_paused = False


def pause_gc() -> None:
    """Hold the collector off (entry.py, before anything is imported)."""
    global _paused
    if gc.isenabled():
        gc.disable()
        _paused = True


def resume_gc() -> None:
    """Turn it back on if pause_gc turned it off; what exists now is left out of later collections."""
    global _paused
    if _paused:
        _paused = False
        gc.freeze()
        gc.enable()
