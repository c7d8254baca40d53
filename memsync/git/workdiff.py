"""The index-to-work-tree diff a scan makes.

With UPDATE_INDEX, libgit2 refreshes the stat data of an entry whose file it hashed and found
unchanged, and writes the index itself, from inside the diff, only when it refreshed one: a scan
that found nothing stale writes nothing (the caller holds the memory's lock, as git holds
index.lock for its refresh).

The diff's deltas are read one at a time and kept as paths only (`Walked`): a pygit2 `DiffDelta`
per file (with its two `DiffFile`s and ids) held 105-129 MB at 100,000 new files, a first push's
largest peak; the paths alone are ~15 MB. Nothing a scan reads is lost: it reads a delta's status
only to tell ignored entries from the rest, and the old and new paths of the rest.
"""

from __future__ import annotations

import time

import pygit2
from pygit2.enums import DeltaStatus, DiffOption

from memsync.git import native
from memsync.util.records import recordclass

__all__ = ["Walked", "collect", "diff_to_workdir", "scan_flags"]


@recordclass(slots=True)
class Walked:
    """What an index-to-work-tree diff reported, without a Python object per delta."""

    ignored: list[str]  # the paths of its ignored entries (a folder as "dir/"), in the diff's order
    changed: set[str]  # the old and new paths of every other entry

    def paths(self) -> set[str]:
        """Every path the diff named."""
        return self.changed.union(self.ignored)


def scan_flags() -> DiffOption:
    """The diff a scan makes (scan.py). Ignored entries come from the same walk, file by
    file: which ignore rules count is memsync's to decide (localignores.py), never a .gitignore
    from the hub, and a `*` rule would hide the whole work tree from a walk that stops at ignored
    folders, without so much as an "ignored" entry."""
    return (DiffOption.INCLUDE_UNTRACKED | DiffOption.RECURSE_UNTRACKED_DIRS | DiffOption.UPDATE_INDEX
            | DiffOption.INCLUDE_TYPECHANGE | DiffOption.INCLUDE_IGNORED | DiffOption.RECURSE_IGNORED_DIRS)


def diff_to_workdir(repo: pygit2.Repository, index: pygit2.Index, flags: DiffOption,
                    paths: list[str] | None = None) -> Walked:
    """`index.diff_to_workdir(flags)`'s deltas, as paths (`Walked`). With `paths` (top-level entries of the work tree),
    only those entries, and all below them, are looked at: the same deltas a full diff reports for
    them, and nothing else.

    One diff per entry: libgit2 1.9 given a path list holding both `notes` and `notes-r1` (a
    name, and the same name followed by a byte that sorts before "/") skips index entries under
    `notes/` and reports their files as untracked."""
    walked = Walked([], set())
    for path in [None] if paths is None else paths:
        _diff(repo, index, flags, path, walked)
    return walked


def collect(diff: pygit2.Diff, into: Walked) -> None:
    """Add `diff`'s deltas to `into`, one at a time: each pygit2 delta is dropped once read."""
    ignored = DeltaStatus.IGNORED
    keep = into.changed.add
    for delta in diff.deltas:  # an iterator: one DiffDelta alive at a time
        new = delta.new_file.path
        if delta.status == ignored:
            into.ignored.append(new)
            continue
        keep(new)
        old = delta.old_file.path
        if old != new:
            keep(old)


_ATTEMPTS = 5
_PATIENCE = 2.0  # seconds of such retries (at least _ATTEMPTS of them) before the failure is the caller's


def _diff(repo: pygit2.Repository, index: pygit2.Index, flags: DiffOption,
          path: str | None, into: Walked) -> None:
    literal = int(flags) | (int(DiffOption.DISABLE_PATHSPEC_MATCH) if path is not None else 0)
    give_up = time.monotonic() + _PATIENCE
    attempt = 0
    while True:
        try:
            diff = native.diff_index_to_workdir(repo, index, literal, path)
        except pygit2.GitError:
            # A file that goes between libgit2's lstat and its read ("error reading file for
            # hashing", "could not find ... to open"): someone writes the tree meanwhile, an agent
            # racing memsync included. A fresh walk sees the tree as it is now.
            attempt += 1
            if attempt >= _ATTEMPTS and time.monotonic() >= give_up:
                raise
            time.sleep(min(0.01 * attempt, 0.1))
            continue
        collect(diff, into)  # (the diff itself, libgit2's, is freed with `diff` on return)
        return
