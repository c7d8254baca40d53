"""A checked-out file rewritten in place under its write lease (util/leases.py), never by name.

libgit2's checkout opens a file by name to rewrite it, which would break memsync's own lease (an
open by the lease holder breaks it too) and, without a lease, races a writer: it judges the file
unmodified, then truncates it under lines appended meanwhile. So a file both versions hold as a
regular file is written here instead, through the descriptor the lease was taken on: first every
such file is read back through it and compared with the version the merge was based on (one that
differs is the writer's: nothing is written, and the caller snapshots it and merges again), then
each is truncated and rewritten. While the lease is held nobody can open the file, so no process
ever sees a half-written one, and a writer that tries waits and then appends to the new content.
A crash in the middle leaves a prefix of the new content, which the checkout journal rolls back.
Nothing else runs while the leases are held: libgit2 opens files by name (its index write reads
recently written ones back), so its checkout of the other paths and the staging come after.
"""

from __future__ import annotations

import os

import pygit2
from pygit2.enums import FileMode, FilterMode

_REGULAR = (FileMode.BLOB, FileMode.BLOB_EXECUTABLE)


def candidates(old: pygit2.Tree, new: pygit2.Tree, paths: list[str], exclude: set[str]) -> list[str]:
    """The paths whose file changes content but stays a regular file of the same mode."""
    found = []
    for path in paths:
        if path in exclude or path.rsplit("/", 1)[-1] == ".gitattributes":
            continue
        before, after = _entry(old, path), _entry(new, path)
        if before is None or after is None or before.filemode != after.filemode or before.id == after.id:
            continue
        found.append(path)
    return found


def versions(repo: pygit2.Repository, old: pygit2.Tree, new: pygit2.Tree,
             paths: list[str]) -> dict[str, tuple[bytes, bytes]]:
    """Each path's old and new bytes as a checkout writes them, read before any lease is taken:
    loading a filter list reads .gitattributes files, and an open by the lease holder breaks it."""
    found = {}
    for path in paths:
        before, after = _entry(old, path), _entry(new, path)
        assert before is not None and after is not None
        found[path] = (_worktree_bytes(repo, path, before.id), _worktree_bytes(repo, path, after.id))
    return found


def differing(fds: dict[str, int], wanted: dict[str, tuple[bytes, bytes]]) -> list[str]:
    """The paths whose file (read through its descriptor) is no longer the old version's."""
    return [path for path, fd in fds.items() if _read(fd) != wanted[path][0]]


def write(fds: dict[str, int], wanted: dict[str, tuple[bytes, bytes]]) -> None:
    """Rewrite each file through its descriptor with the new version's bytes."""
    for path, fd in fds.items():
        data = wanted[path][1]
        os.ftruncate(fd, 0)
        view = memoryview(data)
        offset = 0
        while offset < len(data):
            offset += os.pwrite(fd, view[offset:], offset)


def stage(repo: pygit2.Repository, new: pygit2.Tree, paths: list[str]) -> None:
    """Stage the new version of the files written, once their leases are released: staged without
    stat data (libgit2 would read them by name), so the next scan hashes them and finds them as
    written, or changed by a writer since."""
    index = repo.index
    index.read(force=False)
    for path in paths:
        entry = _entry(new, path)
        assert entry is not None
        index.add(pygit2.IndexEntry(path, entry.id, entry.filemode))
    index.write()


def _worktree_bytes(repo: pygit2.Repository, path: str, oid: pygit2.Oid) -> bytes:
    """A blob as a checkout writes it (line-ending and ident filters applied)."""
    data: bytes = repo[oid].peel(pygit2.Blob).data
    filters = repo.load_filter_list(path, FilterMode.TO_WORKTREE)
    return data if filters is None else bytes(filters.apply_to_buffer(data))


def _read(fd: int) -> bytes:
    chunks = []
    offset = 0
    while chunk := os.pread(fd, 1 << 20, offset):
        chunks.append(chunk)
        offset += len(chunk)
    return b"".join(chunks)


def _entry(tree: pygit2.Tree, path: str) -> pygit2.Object | None:
    try:
        obj = tree[path]
    except KeyError:
        return None
    return obj if obj.filemode in _REGULAR else None


__all__ = ["candidates", "differing", "stage", "versions", "write"]
