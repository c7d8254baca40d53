"""Keeping a repository compact: count loose objects and packs, pack the loose objects, and repack
everything into one pack.

Every memsync commit writes loose objects and every push into a local hub adds a pack; after
thousands of runs both slow every command down. `repack` writes every object the repository has
into one new pack and only then removes what it has read: old packs and loose objects. Nothing is
pruned, reachable or not, so a repack never loses an object, and a kill -9 at any moment leaves at
worst objects stored twice, which the next repack tidies. A memory is repacked under its lock; a
hub beside its lock (core/maintenance.auto_beside): a push meanwhile only adds a pack of its own,
which the repack neither lists nor removes, and every object it removes is in the new pack.

`pack_loose` is the lighter step git's `gc --auto` takes when only loose objects are too many
(`git repack -d`): the loose objects go into new packs, a bounded batch at a time, and the packs
already there stay as they are.
"""

from __future__ import annotations

import contextlib
import itertools
import mmap
import os
import struct
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

import pygit2

from memsync.errors import RepoError
from memsync.git import engine
from memsync.util.records import recordclass

# git estimates the loose objects from one of the 256 fan-out directories (`gc --auto` reads
# objects/17); so do we: one directory listing instead of 256.
_SAMPLE_DIR = "17"
# The loose objects one pack of pack_loose takes. A pack build holds a few hundred bytes for each
# object it packs, its indexer as much again: all of a first push's loose objects packed at once
# were the push's peak (docs/PERFORMANCE.md, "Figures behind the code's speed mechanisms").
LOOSE_BATCH = 20_000


@recordclass(frozen=True)
class ObjectCounts:
    loose: int  # an estimate, as git's `gc --auto` makes it
    packs: int


@recordclass(frozen=True)
class RepackResult:
    objects: int
    packs_before: int
    loose_before: int  # exact: the loose objects the repack folded in
    seconds: float


def _objects_dir(git_dir: Path) -> Path:
    return git_dir / "objects"


def _pack_files(objects: Path) -> list[Path]:
    try:
        return sorted(p for p in (objects / "pack").iterdir() if p.suffix == ".pack")
    except FileNotFoundError:
        return []


def counts(git_dir: Path, exact: bool = False) -> ObjectCounts:
    """Cheap (two directory listings): fine to call after every command. `exact` lists all 256
    fan-out directories instead of estimating from one."""
    objects = _objects_dir(git_dir)
    if exact:
        return ObjectCounts(loose=sum(1 for _ in _loose_files(objects)), packs=len(_pack_files(objects)))
    try:
        sample = sum(1 for e in os.scandir(objects / _SAMPLE_DIR) if len(e.name) == 38)
    except FileNotFoundError:
        sample = 0
    return ObjectCounts(loose=sample * 256, packs=len(_pack_files(objects)))


def _loose_files(objects: Path) -> Iterator[str]:
    """Every loose object's path, one at a time: a first push leaves one loose object per file,
    and 100,000 paths held at once were ~12 MB of a repack's peak."""
    for fan in range(256):
        try:
            entries = os.scandir(objects / f"{fan:02x}")
        except FileNotFoundError:
            continue
        with entries:
            for entry in entries:
                if len(entry.name) == 38:
                    yield entry.path


def repack(git_dir: Path) -> RepackResult:
    """One pack holding every object; the old packs and loose objects go once it is written.
    Holds no Python object per object: the ids go straight into libgit2's pack builder, and a
    loose object is removed only if the new pack's index lists it (_PackIndex)."""
    started = time.monotonic()
    objects = _objects_dir(git_dir)
    old_packs = _pack_files(objects)
    loose_before = sum(1 for _ in _loose_files(objects))
    if len(old_packs) <= 1 and not loose_before:  # already one pack (or empty): nothing to do, not an error
        return RepackResult(0, len(old_packs), 0, time.monotonic() - started)
    repo = engine.for_packing(git_dir)
    listed = [0]

    def add_all(builder: pygit2.PackBuilder) -> None:
        # every object of every backend (loose and packed), reachable or not; an object stored
        # twice (in two packs, or packed and loose) is added once
        for oid in repo.odb:
            builder.add(oid)
        listed[0] = len(builder)

    try:
        written = repo.pack(pack_delegate=add_all)
    except pygit2.GitError as exc:
        raise RepoError(f"cannot repack {git_dir}: {exc}", "check free disk space, then run `memsync gc`") from exc
    if not listed[0]:
        return RepackResult(0, len(old_packs), 0, time.monotonic() - started)
    new_packs = set(_pack_files(objects)) - set(old_packs)
    if written != listed[0] or len(new_packs) != 1:
        raise RepoError(f"repack of {git_dir} wrote {written} of {listed[0]} objects; nothing was removed")
    _fsync_dir(objects / "pack")
    for pack in old_packs:
        if pack in new_packs:  # identical content gives the identical name: nothing to remove
            continue
        # the index first: a pack without its index is ignored, an index without its pack is an error
        for suffix in (".idx", ".rev", ".mtimes", ".keep"):
            pack.with_suffix(suffix).unlink(missing_ok=True)
        pack.unlink(missing_ok=True)
    _remove_packed(_loose_files(objects), new_packs)
    _remove_empty_fans(objects)
    return RepackResult(written, len(old_packs), loose_before, time.monotonic() - started)


def pack_loose(git_dir: Path, batch: int = LOOSE_BATCH) -> RepackResult:
    """The loose objects into new packs of at most `batch` objects each; the packs already there
    are left alone. A loose object is removed only once a pack's index lists it, so a kill -9
    midway leaves at worst objects stored twice, which the next step tidies."""
    started = time.monotonic()
    objects = _objects_dir(git_dir)
    packs_before = len(_pack_files(objects))
    loose = _loose_files(objects)
    repo: pygit2.Repository | None = None
    written = taken = 0
    while paths := list(itertools.islice(loose, batch)):
        if repo is None:
            repo = engine.for_packing(git_dir)
        written += _pack_these(repo, objects, paths)
        taken += len(paths)
    _remove_empty_fans(objects)
    return RepackResult(written, packs_before, taken, time.monotonic() - started)


def _pack_these(repo: pygit2.Repository, objects: Path, paths: list[str]) -> int:
    """One new pack of the loose objects at `paths`, which are then removed."""
    before = set(_pack_files(objects))
    names = [_loose_name(path) for path in paths]

    def add(builder: pygit2.PackBuilder) -> None:
        for name in names:
            builder.add(pygit2.Oid(raw=name))

    try:
        written = repo.pack(pack_delegate=add)
    except pygit2.GitError as exc:
        raise RepoError(f"cannot pack the loose objects of {objects.parent}: {exc}",
                        "check free disk space, then run `memsync gc`") from exc
    if written != len(names):
        raise RepoError(f"a pack of {objects.parent}'s loose objects took {written} of {len(names)}; "
                        "nothing was removed")
    _fsync_dir(objects / "pack")
    # the new pack; none when a pack of exactly these objects was there already (a step killed
    # after writing its pack, before removing what it packed): then any pack may hold them
    holders = (set(_pack_files(objects)) - before) or before
    _remove_packed(paths, holders)
    return written


def _loose_name(path: str) -> bytes:
    """The object a loose file is: <objects>/ab/cdef... holds the object abcdef..."""
    return bytes.fromhex(path[-41:-39] + path[-38:])


def _remove_packed(paths: Iterable[str], packs: Iterable[Path]) -> None:
    """Remove each loose object at `paths` that one of `packs` lists in its index."""
    indexes = [_PackIndex(p.with_suffix(".idx")) for p in packs if p.with_suffix(".idx").is_file()]
    try:
        for path in paths:
            name = _loose_name(path)
            if any(index.holds(name) for index in indexes):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
    finally:
        for index in indexes:
            index.close()


def _remove_empty_fans(objects: Path) -> None:
    for fan in range(256):
        with contextlib.suppress(OSError):  # not empty (an object written meanwhile), or absent
            (objects / f"{fan:02x}").rmdir()


class _PackIndex:
    """The object names a pack index (version 2) lists, looked up in place (mapped, not read
    into objects): its fan-out table narrows a name to ~1/256 of them, a binary search does the rest."""

    _NAMES = 8 + 256 * 4  # header, then the fan-out table, then the sorted 20-byte names

    def __init__(self, path: Path) -> None:
        with open(path, "rb") as fh:
            self._map = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        if self._map[:8] != b"\xfftOc\x00\x00\x00\x02":
            self._map.close()
            raise RepoError(f"unexpected pack index format in {path}; nothing was removed")
        self._fanout = struct.unpack_from(">256I", self._map, 8)

    def holds(self, name: bytes) -> bool:
        first = name[0]
        lo, hi = (self._fanout[first - 1] if first else 0), self._fanout[first]
        while lo < hi:
            mid = (lo + hi) // 2
            at = self._NAMES + 20 * mid
            found = self._map[at:at + 20]
            if found == name:
                return True
            if found < name:
                lo = mid + 1
            else:
                hi = mid
        return False

    def close(self) -> None:
        self._map.close()


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


__all__ = ["LOOSE_BATCH", "ObjectCounts", "RepackResult", "counts", "pack_loose", "repack"]
