"""Keeping a repository compact: count loose objects and packs, and repack them into one pack.

Every memsync commit writes loose objects and every push into a local hub adds a pack; after
thousands of runs both slow every command down. `repack` writes every object the repository has
into one new pack and only then removes what it has read: old packs and loose objects. Nothing is
pruned, reachable or not, so a repack never loses an object, and a kill -9 at any moment leaves at
worst objects stored twice, which the next repack tidies. A memory is repacked under its lock; a
hub beside its lock (core/maintenance.auto_beside): a push meanwhile only adds a pack of its own,
which the repack neither lists nor removes, and every object it removes is in the new pack.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

import pygit2

from memsync.errors import RepoError
from memsync.git import engine
from memsync.util.records import dataclass

# git estimates the loose objects from one of the 256 fan-out directories (`gc --auto` reads
# objects/17); so do we: one directory listing instead of 256.
_SAMPLE_DIR = "17"


@dataclass(frozen=True)
class ObjectCounts:
    loose: int  # an estimate, as git's `gc --auto` makes it
    packs: int


@dataclass(frozen=True)
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
        return ObjectCounts(loose=len(_loose_files(objects)), packs=len(_pack_files(objects)))
    try:
        sample = sum(1 for e in os.scandir(objects / _SAMPLE_DIR) if len(e.name) == 38)
    except FileNotFoundError:
        sample = 0
    return ObjectCounts(loose=sample * 256, packs=len(_pack_files(objects)))


def _loose_files(objects: Path) -> list[str]:
    """Every loose object's path, as strings: a Path is several times the size, and a first push
    leaves one loose object per file (100,000 of them)."""
    found: list[str] = []
    for fan in range(256):
        try:
            entries = os.scandir(objects / f"{fan:02x}")
        except FileNotFoundError:
            continue
        with entries:
            found.extend(e.path for e in entries if len(e.name) == 38)
    return found


def repack(git_dir: Path) -> RepackResult:
    """One pack holding every object; the old packs and loose objects go once it is written."""
    started = time.monotonic()
    objects = _objects_dir(git_dir)
    old_packs = _pack_files(objects)
    loose = _loose_files(objects)
    if len(old_packs) <= 1 and not loose:  # already one pack (or empty): nothing to do, not an error
        return RepackResult(0, len(old_packs), 0, time.monotonic() - started)
    repo = engine.for_packing(git_dir)
    # every object of every backend (loose and packed), reachable or not; an object stored twice
    # (in two packs, or packed and loose) is listed once per copy
    ids = dict.fromkeys(repo.odb)  # in order, once each; also what the clean-up below looks up
    if not ids:
        return RepackResult(0, len(old_packs), 0, time.monotonic() - started)

    def add_all(builder: pygit2.PackBuilder) -> None:
        for oid in ids:
            builder.add(oid)

    try:
        written = repo.pack(pack_delegate=add_all)
    except pygit2.GitError as exc:
        raise RepoError(f"cannot repack {git_dir}: {exc}", "check free disk space, then run `memsync gc`") from exc
    new_packs = set(_pack_files(objects)) - set(old_packs)
    if written != len(ids) or not new_packs:
        raise RepoError(f"repack of {git_dir} wrote {written} of {len(ids)} objects; nothing was removed")
    _fsync_dir(objects / "pack")
    for pack in old_packs:
        if pack in new_packs:  # identical content gives the identical name: nothing to remove
            continue
        # the index first: a pack without its index is ignored, an index without its pack is an error
        for suffix in (".idx", ".rev", ".mtimes", ".keep"):
            pack.with_suffix(suffix).unlink(missing_ok=True)
        pack.unlink(missing_ok=True)
    for path in loose:  # <objects>/ab/cdef...: the object ab...
        if pygit2.Oid(hex=path[-41:-39] + path[-38:]) in ids:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
    for fan in range(256):
        with contextlib.suppress(OSError):  # not empty (an object written meanwhile), or absent
            (objects / f"{fan:02x}").rmdir()
    return RepackResult(len(ids), len(old_packs), len(loose), time.monotonic() - started)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


__all__ = ["ObjectCounts", "RepackResult", "counts", "repack"]
