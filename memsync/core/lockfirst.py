"""push and status take the memory's lock first, at the top of the command line, and begin the
work tree's walk under it while the command imports its modules (git/earlyscan.py), as git's
`status` takes index.lock, refreshes, and writes once.

The lock is taken only if it is free at that instant (busy: nothing is walked early, and the
command waits for it as it always does), and the command's own `held` of it takes it over
(core/locking.py): it is taken once. Nothing is walked early when the command will write the
index or the work tree before its first scan: when the lock's last holder died (its git lock
files are cleared first), or the repository holds an index.lock, an interrupted checkout, a
read-only protection or a run's marker (each recovered from first, and the scan then walks itself).
`MEMSYNC_NO_EARLY_WALK=1` turns all of it off: the lock is taken when the command asks for it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from memsync.core import locking
from memsync.core.root import find_root

__all__ = ["RECOVERIES", "enabled", "walking"]

# checkoutjournal.JOURNAL, readonly.MARK and memory.RUN_MARKER, named here so that the top of the
# command line imports none of those modules (tests/stories/test_early_walk.py holds them equal)
RECOVERIES = ("index.lock", "memsync-checkout.json", "memsync-ro-guard.json", "memsync-run.json")


def enabled() -> bool:
    return os.environ.get("MEMSYNC_NO_EARLY_WALK", "") in ("", "0")


@contextmanager
def walking(start: Path) -> Iterator[None]:
    """Around a push or status run from `start`: its memory's lock taken and its walk begun
    (when they can be), the lock let go at the end if the command never took it over."""
    try:
        if enabled():
            _begin(start)
        yield
    finally:
        locking.release_early()


def _begin(start: Path) -> None:
    try:
        root = find_root(start)
    except OSError:
        return
    if root is None or not (root / ".git").is_dir():
        return
    git_dir = root / ".git"
    tenure = locking.take_early(git_dir / "memsync.lock", _walk_done)
    if tenure is None or tenure.crashed_since is not None:
        return
    if any(os.path.lexists(git_dir / name) for name in RECOVERIES):
        return
    from memsync.git import earlyscan
    from memsync.git.workdiff import scan_flags

    earlyscan.start(root, int(scan_flags()))


def _walk_done() -> None:
    """Before the lock is let go: the walk begun under it has ended (it may write the index), and
    is never used once the lock is gone."""
    earlyscan = sys.modules.get("memsync.git.earlyscan")
    if earlyscan is not None:
        earlyscan.forget()
