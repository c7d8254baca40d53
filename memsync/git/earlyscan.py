"""A scan's walk of the work tree begun early, in a thread, under the memory's lock: a push's or a
status's while the command still imports its modules, a run's snapshot before it starts while
the run asks the hub for its version.

git orders `status` as lock, refresh, write once; memsync does the same with the lock taken first,
at the top of the command line (core/lockfirst.py): with the memory's lock held, `start` runs the
scan's index-to-work-tree diff (git/workdiff.py), index refresh included (libgit2 writes the index
itself when it refreshed an entry), in a thread, on its own handle of the repository (libgit2
objects are used by one thread at a time), so the lstat() of every file overlaps the imports on a
machine with a second core (docs/PERFORMANCE.md). The command's first scan (GitRepo.scan) takes the
walk's deltas instead of walking again. A run's pull (run/mounts.py) starts one under the lock it
takes to save local changes before merging the hub's: the walk overlaps the fetch's round trips.

The invariant, in one place:
- the walk runs only while this process holds the memory's lock (handed from the command line to
  the command, core/locking.py, or taken by the run's pull itself), and only when nothing writes
  the index or the work tree before the scan that takes it (no crash to recover from:
  lockfirst.py; a fetch writes neither);
- nothing in the process uses a repository's index before the walk has finished (`wait`, called
  by GitRepo.index), and the lock is not let go before it has (`forget`, which also drops a walk
  no scan took), so the walk is the index's only writer and is never used under another lock;
- the first scan takes it only for the same work tree, the same diff flags, no change tracker
  (git/hints.py), and an index that scan's repository has not touched yet; anything else walks
  again. What an agent or a plain `git` writes meanwhile is like a write just after a scan: the
  next scan sees it.
core/lockfirst.py and run/mounts.py start it (`MEMSYNC_NO_EARLY_WALK=1` turns both off).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

import pygit2

from memsync.git import engine, hints
from memsync.git.workdiff import Walked, diff_to_workdir
from memsync.util.threads import helper_body, join_all

__all__ = ["forget", "start", "take", "wait"]


class _Walk:
    def __init__(self, root: str, flags: int) -> None:
        self.root = root
        self.flags = flags
        self.deltas: Walked | None = None
        self.thread = threading.Thread(target=helper_body(self._run), name="memsync-early-walk", daemon=True)

    def _run(self) -> None:
        try:
            repo = engine.repository(os.path.join(self.root, ".git"))
            workdir = repo.workdir
            if workdir is None or os.path.realpath(workdir) != self.root:
                return  # GitRepo.open refuses it (core.worktree, core.bare): nothing to offer
            self.deltas = diff_to_workdir(repo, repo.index, pygit2.enums.DiffOption(self.flags))
        except Exception:  # any failure: the scan walks as it always did, and reports it there
            self.deltas = None


_walk: _Walk | None = None
_lock = threading.Lock()


def start(root: Path, flags: int) -> None:
    """Walk the memory at `root` with the scan's `flags`; the caller holds the memory's lock."""
    global _walk
    if hints.source is not None:
        return
    walk = _Walk(os.path.realpath(root), flags)
    with _lock:
        if _walk is not None:
            return
        _walk = walk
    import atexit

    walk.thread.start()
    atexit.register(walk.thread.join)  # never inside libgit2 while the interpreter shuts down


def wait() -> None:
    """Let a walk still running finish (it may be writing the index), keeping its result."""
    walk = _walk
    if walk is not None and walk.thread.is_alive():
        join_all([walk.thread])  # through Ctrl-C: the lock is let go only after it


def forget() -> None:
    """The lock the walk was made under is let go: let it finish, and never use it."""
    global _walk
    wait()
    with _lock:
        _walk = None


def take(root: Path, flags: int, meanwhile: Callable[[], None] | None = None) -> Walked | None:
    """The walk's deltas (as paths: workdiff.Walked) if it walked `root` with `flags` (at most
    once; the caller checks the rest of the module's rule). Waits for it, running `meanwhile`
    first if it is still going."""
    global _walk
    with _lock:
        walk, _walk = _walk, None
    if walk is None:
        return None
    if meanwhile is not None and walk.thread.is_alive():
        meanwhile()
    walk.thread.join()
    if walk.flags != flags or walk.root != os.path.realpath(root) or hints.source is not None:
        return None
    return walk.deltas
