"""Index entries memsync staged without stat data, and their later settling.

A file read while it was still fresh (written in the last 2 s, snapshot._settled) is staged
without stat data, so that a second write in the same timestamp tick cannot hide behind it: the
next scan hashes it again. A scan with UPDATE_INDEX lets libgit2 refresh such an entry (and write
the index from inside the diff); the early walk (earlyscan.py) may not write anything, so it walks
without UPDATE_INDEX, and the entries it hashed are settled here instead, under the memory's lock:
each path memsync staged that way is listed in .git/memsync-unsettled, and `settle` names the
entries to be given their stat: those whose file is no longer fresh and still holds their bytes.
It reads and hashes those files against HEAD's blobs while the walk is still running (the scan's
wait, GitRepo._early_walk), and the scan then gives the stat only to an index entry that holds
the same blob.

The list only saves work: a path missing from it is hashed again by later scans (the early walk is
then not used, and a full scan refreshes it); a path that should not be in it (an agent can write
.git) is checked like any other and changes nothing unless the file matches its entry.
"""

from __future__ import annotations

import contextlib
import os
import stat
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import pygit2

from memsync.util.dirfd import Tree
from memsync.util.fs import atomic_write, read_private

__all__ = ["LEDGER", "MAX_PATHS", "Found", "note", "settle"]

LEDGER = "memsync-unsettled"
MAX_PATHS = 4096  # past this many, the list is dropped: a full scan refreshes them all
SETTLED_NS = 2_000_000_000  # as snapshot._SETTLED_NS: a file older than this gets a later stamp from any write
_MAX_BYTES = 1 << 20  # a larger file is left to a full scan
_BUDGET = 16 << 20  # bytes read in all: what is listed past it waits for a later scan (or a full one)


def note(git_dir: Path, paths: Iterable[str]) -> None:
    """Add `paths` (staged without stat data, in an index just written) to the list."""
    new = sorted(set(paths))
    if not new:
        return
    known = _read(git_dir)
    merged = known + [p for p in new if p not in set(known)]
    _write(git_dir, merged if len(merged) <= MAX_PATHS else [])


Found = tuple[str, pygit2.Oid, int]  # a listed path, and the blob id and mode its file holds


def settle(root: Path, git_dir: Path, expected: Callable[[str], tuple[pygit2.Oid, int] | None],
           mode_of: Callable[[os.stat_result], int]) -> tuple[list[tuple[Found, os.stat_result]], list[Found]]:
    """The listed paths whose file holds the blob and mode `expected` names for it (HEAD's, or
    the index's: the caller checks the index holds the same before it uses a result; modes as
    `mode_of` reads a stat): those settled, with the stat to give their entry, and those still
    fresh (left for a later scan). The list keeps only the fresh ones."""
    paths = _read(git_dir)
    if not paths:
        return [], []
    ready: list[tuple[Found, os.stat_result]] = []
    fresh: list[Found] = []
    keep: list[str] = []
    now = time.time_ns()
    spent = 0
    with Tree(root) as tree:
        for path in paths:
            if spent > _BUDGET:  # a list an agent filled with large files costs a bounded read
                keep.append(path)
                continue
            try:
                want = expected(path)
                if want is None:
                    continue  # no longer in the version: nothing left to settle
                st = tree.lstat(path)
                if stat.S_ISLNK(st.st_mode):
                    data: bytes | None = tree.readlink(path)
                    after: os.stat_result | None = tree.lstat(path)
                else:
                    got = tree.read(path, _MAX_BYTES)
                    data, after = (None, None) if got is None else got
            except (KeyError, OSError, ValueError, pygit2.GitError):
                continue  # gone from the tree, or unreadable: the scan says what it is
            oid, mode = want
            spent += 0 if data is None else len(data)
            if data is None or after is None or mode_of(st) != mode or pygit2.hash(data) != oid:
                continue  # changed: the scan reports it, and staging it lists it again if need be
            if (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns) != (
                    after.st_ino, after.st_size, after.st_mtime_ns, after.st_ctime_ns) \
                    or now - max(st.st_mtime_ns, st.st_ctime_ns) < SETTLED_NS:
                keep.append(path)  # fresh, or written while read: left for a later scan
                fresh.append((path, oid, mode))
                continue
            ready.append(((path, oid, mode), st))
    if keep != paths:
        _write(git_dir, keep)
    return ready, fresh


_MAX_FILE = 1 << 20  # the list's own size: 4,096 paths of 256 bytes


def _read(git_dir: Path) -> list[str]:
    """The listed paths; none if the file is missing, not a plain file (a symlink, a FIFO,
    /dev/zero planted there is never followed or read) or past its bound."""
    try:
        raw = read_private(git_dir / LEDGER, _MAX_FILE + 1)
    except OSError:
        return []
    if len(raw) > _MAX_FILE:
        return []
    return [os.fsdecode(p) for p in raw.split(b"\0") if p][:MAX_PATHS]


def _write(git_dir: Path, paths: list[str]) -> None:
    """The list replaced whole (util/fs.atomic_write: a fresh name, never through a planted link);
    a failure is ignored: the list only saves work that a later full scan does."""
    target = git_dir / LEDGER
    with contextlib.suppress(OSError):
        if not paths:
            target.unlink(missing_ok=True)
            return
        atomic_write(target, b"".join(os.fsencode(p) + b"\0" for p in paths), durable=False)
