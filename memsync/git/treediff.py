"""The paths that differ between two trees, walking only the subtrees whose ids differ.

libgit2's tree-to-tree diff iterates every entry of both trees (docs/PERFORMANCE.md, "Figures
behind the code's speed mechanisms"); comparing each folder's raw records and descending only
where they differ follows the change instead. Used for a version's changes (history.py) and for
the index entries that changed since a scan's baseline (scan.py).
"""

from __future__ import annotations

import re
from typing import Literal, Protocol

import pygit2
from pygit2.enums import FileMode

from memsync.git.hubtree import MAX_TREE_DEPTH, TreeTooLarge
from memsync.util.names import is_conflict_copy, is_gathered
from memsync.util.records import recordclass

__all__ = ["Found", "PathDelta", "counts", "deltas", "paths_between", "tally", "walk"]

DeltaKind = Literal["added", "modified", "deleted"]

_TREE_MODE = int(FileMode.TREE)
_LINK_MODE = int(FileMode.LINK)
_COMMIT_MODE = int(FileMode.COMMIT)
_RECORD = re.compile(rb"[0-7]+ [^\x00]*\x00.{20}", re.DOTALL)
FoundDelta = tuple[str, DeltaKind, pygit2.Oid | None, pygit2.Oid | None]
Found = list[FoundDelta]


class _Sink(Protocol):
    """Where `walk` puts each path it finds: a list (Found), or a running tally."""

    def append(self, found: FoundDelta, /) -> None: ...


def _kind_of(mode: int) -> int:
    """The type a diff compares (git's S_IFMT): tree, link, submodule or regular file."""
    return mode if mode in (_TREE_MODE, _LINK_MODE, _COMMIT_MODE) else 0


def _records(repo: pygit2.Repository, tree: pygit2.Oid | None) -> set[bytes]:
    """A tree's entries as raw records (`<mode> <name>\\0<20-byte id>`): comparing these sets
    finds the changed entries without building an object for every entry."""
    if tree is None:
        return set()
    return set(_RECORD.findall(repo.odb.read(tree)[1]))


def _parse(record: bytes) -> tuple[str, int, pygit2.Oid]:
    head, oid = record[:-21], record[-20:]
    mode, name = head.split(b" ", 1)
    return name.decode("utf-8", "surrogateescape"), int(mode, 8), pygit2.Oid(raw=oid)


def walk(repo: pygit2.Repository, old: pygit2.Oid | None, new: pygit2.Oid | None, prefix: str,
         found: _Sink, depth: int) -> None:
    if depth > MAX_TREE_DEPTH:
        raise TreeTooLarge(f"a version's tree is deeper than {MAX_TREE_DEPTH} directories ({prefix[:80]}...)",
                           "ask the hub's owner to revert that version")
    before_records, after_records = _records(repo, old), _records(repo, new)
    before = {name: (mode, oid) for name, mode, oid in map(_parse, before_records - after_records)}
    after = {name: (mode, oid) for name, mode, oid in map(_parse, after_records - before_records)}
    for name in before.keys() | after.keys():
        a, b = before.get(name), after.get(name)
        path = f"{prefix}{name}"
        if a is not None and b is not None and _kind_of(a[0]) == _kind_of(b[0]):
            if a[0] == _TREE_MODE:
                walk(repo, a[1], b[1], path + "/", found, depth + 1)
            else:
                found.append((path, "modified", a[1], b[1]))
            continue
        if a is not None:  # gone, or replaced by another type: deleted, then added
            if a[0] == _TREE_MODE:
                walk(repo, a[1], None, path + "/", found, depth + 1)
            else:
                found.append((path, "deleted", a[1], None))
        if b is not None:
            if b[0] == _TREE_MODE:
                walk(repo, None, b[1], path + "/", found, depth + 1)
            else:
                found.append((path, "added", None, b[1]))


def paths_between(repo: pygit2.Repository, old: str, new: str) -> list[tuple[str, DeltaKind]]:
    """Every file path whose entry differs between the trees `old` and `new` (hex ids), and how."""
    found: Found = []
    walk(repo, pygit2.Oid(hex=old), pygit2.Oid(hex=new), "", found, 1)
    return [(path, kind) for path, kind, _a, _b in found]


@recordclass(frozen=True)
class PathDelta:
    path: str
    kind: DeltaKind
    old_size: int
    new_size: int


def deltas(repo: pygit2.Repository, old: pygit2.Oid | None, new: pygit2.Oid) -> list[PathDelta]:
    """What libgit2's tree-to-tree diff (no options) reports, in its order, with each side's
    size (object headers only), walking only the subtrees whose ids differ (`walk`)."""
    found: Found = []
    walk(repo, old, new, "", found, 1)
    found.sort(key=lambda d: d[0].encode("utf-8", "surrogateescape"))
    return [PathDelta(path, kind, _size(repo, a) if a is not None else 0, _size(repo, b) if b is not None else 0)
            for path, kind, a, b in found]


def _size(repo: pygit2.Repository, oid: pygit2.Oid) -> int:
    try:
        return int(repo.odb.read_header(oid)[1])
    except (KeyError, ValueError, pygit2.GitError):
        return 0


class _Tally:
    """`counts` of a walk taken as it goes, holding nothing per path: a first version's walk
    finds every file of the memory (100,000 PathDeltas and their paths held ~35 MB at once)."""

    def __init__(self, repo: pygit2.Repository) -> None:
        self.repo = repo
        self.files = self.added = self.removed = 0
        self.copies: list[str] = []

    def append(self, found: FoundDelta, /) -> None:
        path, kind, a, b = found
        old_size = _size(self.repo, a) if a is not None else 0
        new_size = _size(self.repo, b) if b is not None else 0
        self.files += 1
        self.added += max(new_size - old_size, 0)
        self.removed += max(old_size - new_size, 0)
        if (kind == "added" and is_conflict_copy(path)) or (is_gathered(path) and new_size > old_size):
            self.copies.append(path)


def tally(repo: pygit2.Repository, old: pygit2.Oid | None, new: pygit2.Oid) -> tuple[int, int, int, list[str]]:
    """`counts(deltas(repo, old, new))`, without holding the deltas."""
    sink = _Tally(repo)
    walk(repo, old, new, "", sink, 1)
    return sink.files, sink.added, sink.removed, sorted(sink.copies)


def counts(found: list[PathDelta], created: list[str] | None = None) -> tuple[int, int, int, list[str]]:
    """What a log line shows of a version's deltas: files changed, bytes added, bytes removed,
    and the conflict copies it made (`created`, for a merge; else the copies it added and the
    gathered conflict files that grew). The one rule for the counts a version records when it is
    made (core/attribution.change_trailers) and for those `log` counts from a diff."""
    copies = created if created is not None else [
        d.path for d in found if (d.kind == "added" and is_conflict_copy(d.path))
        or (is_gathered(d.path) and d.new_size > d.old_size)]
    return (len(found), sum(max(d.new_size - d.old_size, 0) for d in found),
            sum(max(d.old_size - d.new_size, 0) for d in found), sorted(copies))
