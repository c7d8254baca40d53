"""A push's or a status's walk of the work tree, begun while the command is still starting.

A cold `push` or `status` spends ~20 ms importing its modules, reading its configuration and
taking the memory's lock before it scans, and the scan's index-to-work-tree diff (git/workdiff.py)
is ~20 ms of lstat() at 10,000 files, spent in libgit2 without Python's lock. `start` runs that
diff in a thread as soon as the command line is read, on its own handle of the repository (libgit2
objects are used by one thread at a time), so the two overlap on a machine with a second core.

The walk only reads: it writes nothing, and what it found is used only by the command's first scan
(GitRepo.scan), which runs with the memory's lock held and after every check the command makes,
and only if `claim` finds the repository as the walk saw it:
- the same repository (the work tree's realpath, the .git directory's device and inode);
- the same flags, no change tracker (git/hints.py), nothing staged meanwhile in this process;
- the index file, HEAD's commit, git's config, exclude and attribute files unchanged (their
  inode, size, mtime and ctime), no index.lock and no interrupted checkout (checkoutjournal.py)
  at either end.
Every commit, checkout, rollback or index refresh (memsync's or git's) rewrites the index or
moves HEAD, so a walk that overlapped one is dropped and the scan walks again. What an agent
writes meanwhile is like a write just after a scan: seen by the next one.

The walk runs without UPDATE_INDEX (with it libgit2 writes the index from inside the diff, which
must not happen before the lock). The scan settles the entries the walk hashed (unsettled.py) and
drops the walk if it cannot account for every hash; the index and the handle it belongs to then
become the command's (GitRepo._early_walk).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pygit2
from pygit2.enums import DiffOption

from memsync.git import engine, hints
from memsync.git.workdiff import diff_to_workdir, prepare
from memsync.util.records import dataclass

__all__ = ["Walk", "claim", "drop", "start"]


@dataclass
class Walk:
    """What the early walk found, and the handle whose index it refreshed."""

    repo: pygit2.Repository
    index: pygit2.Index
    deltas: list[pygit2.DiffDelta]
    hashed: int | None
    stamp: tuple[Any, ...]


class _Pending:
    def __init__(self, root: Path, flags: int) -> None:
        self.root = root
        self.flags = flags
        self.walk: Walk | None = None
        self.thread = threading.Thread(target=self._run, name="memsync-early-scan", daemon=True)

    def _run(self) -> None:
        try:
            git_dir = self.root / ".git"
            before = _stamp(git_dir, None)
            if before is None:
                return
            repo = engine.repository(git_dir)
            workdir = repo.workdir
            if workdir is None or os.path.realpath(workdir) != str(self.root):
                return  # GitRepo.open refuses it (core.worktree, core.bare): nothing to offer
            head = None if repo.head_is_unborn else str(repo.head.target)
            index = repo.index
            # never UPDATE_INDEX: libgit2 would write the index from here, before the lock
            walk_flags = DiffOption(self.flags) & ~DiffOption.UPDATE_INDEX
            deltas, hashed = diff_to_workdir(repo, index, walk_flags)
            self.walk = Walk(repo, index, deltas, hashed, (head, *before, *_extra(repo)))
        except Exception:  # any failure: the scan walks as it always did, and reports it there
            self.walk = None


_pending: _Pending | None = None
_lock = threading.Lock()


def start(root: Path, flags: int) -> None:
    """Begin the walk of the memory at `root` (its config found) with the scan's `flags`."""
    global _pending
    if hints.source is not None:
        return
    real = Path(os.path.realpath(root))
    if not (real / ".git").is_dir():
        return
    pending = _Pending(real, flags)
    with _lock:
        if _pending is not None:
            return
        _pending = pending
    import atexit

    pending.thread.start()
    atexit.register(pending.thread.join)  # never inside libgit2 while the interpreter shuts down
    prepare()  # what the walk needs last (ctypes), loaded here while it starts


def drop() -> None:
    """Forget a walk not taken (it finishes on its own; its thread does not keep the process)."""
    global _pending
    with _lock:
        _pending = None


def claim(root: Path, git_dir: Path, flags: int, head: str | None,
          extra: tuple[str | None, ...], meanwhile: Callable[[], None] | None = None) -> Walk | None:
    """The early walk of this repository, if it stands for a walk made now (module docstring);
    at most once. Waits for the walk to finish, running `meanwhile` first if it is still going.
    `head`: HEAD's commit now; `extra`: the config's core.excludesFile and core.attributesFile now."""
    global _pending
    with _lock:
        pending, _pending = _pending, None
    if pending is None or pending.flags != flags or hints.source is not None:
        return None
    if os.path.realpath(root) != str(pending.root) or os.path.realpath(git_dir) != str(pending.root / ".git"):
        return None
    if meanwhile is not None and pending.thread.is_alive():
        meanwhile()
    pending.thread.join()
    walk = pending.walk
    if walk is None:
        return None
    now = _stamp(git_dir, extra)
    if now is None or walk.stamp != (head, *now):
        return None
    return walk


# (checkoutjournal.JOURNAL, named here: that module imports repo.py, which imports this one)
_WATCHED = ("index", "index.lock", "memsync-checkout.json", "HEAD")


def _stamp(git_dir: Path, extra: tuple[str | None, ...] | None) -> tuple[Any, ...] | None:
    """The files a walk's result depends on besides the work tree; None if the repository is
    mid-write (an index.lock, an interrupted checkout), when no walk is worth keeping."""
    parts: list[Any] = []
    for name in _WATCHED:
        try:
            st = os.stat(git_dir / name)
        except OSError:
            parts.append(None)
            continue
        if name != "index" and name != "HEAD":
            return None
        parts.append((st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns))
    if extra is not None:
        parts.append(hints.fingerprint(git_dir, 0, extra))
    return tuple(parts)


def _extra(repo: pygit2.Repository) -> tuple[str]:
    """The stamp's last part, as the walk began: git's files and core.excludesFile /
    core.attributesFile, read from the walk's own handle."""
    found: list[str | None] = []
    try:
        config = repo.config
        for key in ("core.excludesFile", "core.attributesFile"):
            try:
                found.append(str(config[key]))
            except (KeyError, ValueError, pygit2.GitError):
                found.append(None)
    except pygit2.GitError:
        found = [None, None]
    return (hints.fingerprint(Path(repo.path.rstrip("/")), 0, tuple(found)),)
