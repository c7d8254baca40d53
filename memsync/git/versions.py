"""Reading a memory's history: versions, their ancestry, and what each changed.

`VersionReading` is the part of `GitRepo` (repo.py) that only reads commits and trees; `scan.py`
reads the work tree. Nothing here writes a ref, the index or the work tree; the one file written
is the cache of version sizes (.git/memsync-tree-stats.json).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pygit2
from pygit2.enums import FileMode

from memsync.git.hubtree import tree_totals
from memsync.util.fs import read_private, write_private
from memsync.util.records import recordclass

__all__ = ["CommitInfo", "VersionReading"]

_STATS_FILE = "memsync-tree-stats.json"
_STATS_KEEP = 256
_STATS_MAX_HOPS = 64
_ZERO_OID = bytes(20)


@recordclass(frozen=True)
class CommitInfo:
    oid: str
    parents: tuple[str, ...]
    message: str
    author_name: str
    author_email: str
    time: int
    offset: int

    @property
    def short(self) -> str:
        return self.oid[:8]


class VersionReading:
    """Commits and trees of a repository (mixed into GitRepo)."""

    _repo: pygit2.Repository
    _stats_memo: dict[str, tuple[int, int]]
    _stats_versions: dict[str, tuple[int, int]] | None

    if TYPE_CHECKING:  # GitRepo's own
        @property
        def git_dir(self) -> Path: ...

        @property
        def index(self) -> pygit2.Index: ...

    def commit_info(self, oid: str) -> CommitInfo:
        c = self._repo[oid].peel(pygit2.Commit)
        return CommitInfo(str(c.id), tuple(str(p) for p in c.parent_ids), c.message,
                          c.author.name, c.author.email, c.commit_time, c.commit_time_offset)

    def walk(self, tip: str, hide: str | None = None) -> Iterator[CommitInfo]:
        """History from `tip`, newest first, without what `hide` can reach."""
        walker = self._repo.walk(pygit2.Oid(hex=tip), pygit2.enums.SortMode.NONE)  # streamed: TIME reads all first
        if hide is not None:
            walker.hide(pygit2.Oid(hex=hide))
        for c in walker:
            yield CommitInfo(str(c.id), tuple(str(p) for p in c.parent_ids), c.message,
                             c.author.name, c.author.email, c.commit_time, c.commit_time_offset)

    def ahead_behind(self, local: str, upstream: str) -> tuple[int, int]:
        a, b = self._repo.ahead_behind(pygit2.Oid(hex=local), pygit2.Oid(hex=upstream))
        return int(a), int(b)

    def merge_base(self, one: str, two: str) -> str | None:
        base = self._repo.merge_base(pygit2.Oid(hex=one), pygit2.Oid(hex=two))
        return None if base is None else str(base)

    def is_ancestor(self, ancestor: str, descendant: str) -> bool:
        if ancestor == descendant:
            return True
        return bool(self._repo.descendant_of(pygit2.Oid(hex=descendant), pygit2.Oid(hex=ancestor)))

    def tree_counts(self, parent_tree: str | None, tree: str) -> tuple[int, int, int, list[str]]:
        """What `tree` changes against `parent_tree` (None: a first version), as `log` shows it:
        files changed, bytes added, bytes removed, conflict copies made (treediff.counts, taken as
        the walk goes: treediff.tally)."""
        from memsync.git import treediff

        old = None if parent_tree is None else pygit2.Oid(hex=parent_tree)
        return treediff.tally(self._repo, old, pygit2.Oid(hex=tree))

    def tree_stats(self, commit_oid: str) -> tuple[int, int]:
        """(files, bytes) of a version, reading object headers only. Versions already counted
        are remembered in .git/memsync-tree-stats.json; a new one is its nearest counted
        ancestor adjusted by a tree diff, so the cost follows what changed, not the memory's size."""
        cache = self._stats_cache()
        if commit_oid in cache:
            return cache[commit_oid]
        repo = self._repo
        commit = repo[commit_oid].peel(pygit2.Commit)
        stats = _stats_from_ancestor(repo, commit, cache)
        if stats is None:
            stats = tree_totals(repo, commit.tree, self._stats_memo, version=commit_oid)
        cache[commit_oid] = stats
        self._save_stats_cache(cache)
        return stats

    def _stats_cache(self) -> dict[str, tuple[int, int]]:
        if self._stats_versions is None:
            self._stats_versions = {}
            with contextlib.suppress(OSError, ValueError, TypeError):
                import json
                loaded = json.loads(read_private(self.git_dir / _STATS_FILE))
                self._stats_versions = {str(k): (int(v[0]), int(v[1])) for k, v in loaded.items()}
        return self._stats_versions

    def _save_stats_cache(self, cache: dict[str, tuple[int, int]]) -> None:
        keep = dict(list(cache.items())[-_STATS_KEEP:])
        with contextlib.suppress(OSError):  # only a cache: a read-only hub just recounts
            import json
            write_private(self.git_dir / _STATS_FILE, json.dumps({k: list(v) for k, v in keep.items()}).encode())

    def tracked_paths(self) -> list[str]:
        return [entry.path for entry in self.index]

    def tracked_paths_containing(self, needle: str) -> list[str]:
        """Tracked paths containing `needle`. Iterating a large index in Python is slow
        (docs/PERFORMANCE.md), so the index file is searched for the bytes first: paths are stored
        whole (or, in index v4, share a prefix with an earlier entry), so no match means no such
        path."""
        index_file = self.git_dir / "index"
        try:
            raw = index_file.read_bytes()
        except OSError:
            raw = None
        if raw is not None and needle.encode() not in raw and not any(self.git_dir.glob("sharedindex.*")):
            return []
        return [path for path in self.tracked_paths() if needle in path]

    def tree_changes(self, old: str | None, new: str) -> dict[str, str | None]:
        """Paths whose content differs between two versions: path -> blob id in `new` (None if
        gone). Compares trees only; the work tree is not read."""
        new_tree = self._repo[new].peel(pygit2.Commit).tree
        if old is None:
            diff = new_tree.diff_to_tree(swap=True)
        else:
            diff = self._repo[old].peel(pygit2.Commit).tree.diff_to_tree(new_tree)
        found: dict[str, str | None] = {}
        for delta in diff.deltas:
            found.setdefault(delta.old_file.path, None)
            if delta.status != pygit2.enums.DeltaStatus.DELETED:
                found[delta.new_file.path] = str(delta.new_file.id)
        return found


def _stats_from_ancestor(repo: pygit2.Repository, commit: pygit2.Commit,
                         cache: dict[str, tuple[int, int]]) -> tuple[int, int] | None:
    """Stats of `commit` from the nearest counted first-parent ancestor plus a tree diff."""
    base = commit
    for _ in range(_STATS_MAX_HOPS):
        if not base.parent_ids:
            return None
        base = repo[base.parent_ids[0]].peel(pygit2.Commit)
        if str(base.id) in cache:
            break
    else:
        return None
    files, size = cache[str(base.id)]
    for delta in base.tree.diff_to_tree(commit.tree).deltas:
        for side, sign in ((delta.old_file, -1), (delta.new_file, 1)):
            if side.mode in (0, int(FileMode.TREE), int(FileMode.COMMIT)) or side.id.raw == _ZERO_OID:
                continue
            files += sign
            size += sign * repo.odb.read_header(side.id)[1]
    return files, size
