"""A first checkout (a clone's): every file of a version written into a work tree that has none.

It is written in parts of about PART_FILES files (top-level entries, in tree order, so a root
.gitattributes is still written first): libgit2 holds a delta per file of a checkout on top of
the index, and one call for 100,000 files peaked ~50 MB above the index alone.
MEMSYNC_CHECKOUT_PART_FILES sets another part size, MEMSYNC_CHECKOUT_THREADS the number of threads
(1: one thread, the parallel writing off), for tuning and for tests (docs/ENVIRONMENT.md).

When no content filter can apply (filters.unneeded: no file's bytes depend on another file's
attributes, so the order of writing does not matter) and the machine has more than one CPU, the
parts are written by up to WORKERS threads at once. Each thread has its own handle on the
repository (libgit2 lets a thread use a handle no other thread uses, and releases the GIL for a
checkout) and writes a contiguous run of top-level entries; each handle's in-memory index gains
the entries of the files it wrote, with their stat data, and is never written. The entries of
the later runs are then appended to the first handle's index, which is written once: the index
is the one a checkout in a single call leaves (and `status` after it reads no file). The threads
write parts of PART_FILES / threads files, so together they hold the deltas of one sequential
part, and libgit2's object cache is kept small meanwhile (lean_cache). Measured on 2 CPUs, on
tmpfs: 10,000 files 0.30 s in one thread, 0.19 s in two (0.02 s of it the merge); a clone of
100,000 files 4.9 s and 71 MB peak in one, 2.4 s and 70 MB in two (`git clone`: 3.2 s, 79 MB).
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
from collections.abc import Iterator

import pygit2
from pygit2.enums import CheckoutStrategy

from memsync.git import filters, native
from memsync.util import envcheck
from memsync.util.threads import helper_body, join_all

__all__ = ["MIN_FILES_PER_WORKER", "PART_FILES", "WORKERS", "lean_cache", "write_all"]

PART_FILES = 8192  # files a first checkout writes per libgit2 call
WORKERS = 4  # threads at most (each holds one part's delta at a time)
MIN_FILES_PER_WORKER = 1000  # below this a thread costs more than it saves
# libgit2's object cache during a first checkout (lean_cache): with the default each handle kept
# its own copy of every tree it read, +20 MB at 100,000 files on 2 threads; this one costs no time
_FIRST_CHECKOUT_CACHE = 1 << 20
_PLAIN = re.compile(r"[A-Za-z0-9_.][A-Za-z0-9_.-]*")  # read as itself by libgit2's pathspec


def write_all(repo: pygit2.Repository, tree: pygit2.Tree, totals: dict[str, tuple[int, int]], *,
              filtered: bool, part_files: int | None = None, threads: int | None = None) -> None:
    """Check every file of `tree` out (SAFE) into a work tree with none, in parts, in parallel
    when it can be. pygit2.GitError as a checkout raises it (the first failure of any thread).
    `part_files`: files per libgit2 call (None: MEMSYNC_CHECKOUT_PART_FILES, else PART_FILES);
    `threads`: how many write at once (None: MEMSYNC_CHECKOUT_THREADS, else by CPUs and size)."""
    size = int(envcheck.number("MEMSYNC_CHECKOUT_PART_FILES", PART_FILES)) if part_files is None else part_files
    counted = _counted(tree, totals)
    runs = [] if filtered or counted is None else _runs(counted, _workers(sum(n for _, n in counted), threads))
    if len(runs) < 2:
        for part in _parts(counted, size):
            filters.checkout(repo, tree, CheckoutStrategy.SAFE, part, filters=filtered)
        return
    _write_runs(repo, tree, runs, size)


@contextlib.contextmanager
def lean_cache() -> Iterator[None]:
    """libgit2's object cache held small for a first checkout (its checks and its writing): the
    default (256 MB) keeps every tree read, once per handle; reading one again costs ~nothing."""
    previous = pygit2.settings.cached_memory[1]
    pygit2.settings.cache_max_size(_FIRST_CHECKOUT_CACHE)
    try:
        yield
    finally:
        pygit2.settings.cache_max_size(previous)


def _write_runs(repo: pygit2.Repository, tree: pygit2.Tree, runs: list[list[tuple[str, int]]],
                part_files: int) -> None:
    handles = [repo, *(pygit2.Repository(repo.path) for _ in runs[1:])]
    failures: list[BaseException | None] = [None] * len(runs)
    size = max(1, part_files // len(runs))  # the threads together hold one sequential part's deltas

    def write_run(number: int) -> None:
        handle = handles[number]
        target = handle[tree.id].peel(pygit2.Tree)
        try:
            for part in _split(runs[number], size):
                filters.checkout(handle, target, CheckoutStrategy.SAFE | CheckoutStrategy.DONT_WRITE_INDEX,
                                 part, filters=False)
        except BaseException as exc:  # handed to the calling thread, which raises it
            failures[number] = exc

    threads = [threading.Thread(target=helper_body(write_run), args=(n,), name=f"memsync-checkout-{n}", daemon=True)
               for n in range(1, len(runs))]
    for thread in threads:
        thread.start()
    write_run(0)
    join_all(threads)  # none left writing into a work tree the caller may remove
    index = repo.index
    for failure in failures:
        if failure is not None:
            index.read(force=True)  # drop the entries of what was written: the index on disk is as it was
            raise failure
    for handle in handles[1:]:
        _append(index, handle.index)
        handle.free()
    index.write()


def _parts(counted: list[tuple[str, int]] | None, size: int) -> list[list[str] | None]:
    """The top-level names in parts of about `size` files; [None] (one call) when the tree
    is small, a top-level name is not plain (it could read as a pattern) or a folder was not
    counted (`totals`, from hubtree.tree_totals): `counted` is None."""
    found = [] if counted is None else _split(counted, size)
    return found if len(found) > 1 else [None]


def _counted(tree: pygit2.Tree, totals: dict[str, tuple[int, int]]) -> list[tuple[str, int]] | None:
    """(name, files below it) of each top-level entry in tree order, or None (see _parts)."""
    counted = []
    for entry in tree:
        name = entry.name or ""
        files = totals.get(str(entry.id), (None, 0))[0] if entry.type_str == "tree" else 1
        if not _PLAIN.fullmatch(name) or files is None:
            return None
        counted.append((name, files))
    return counted


def _split(counted: list[tuple[str, int]], limit: int) -> list[list[str] | None]:
    groups: list[list[str] | None] = []
    current: list[str] = []
    count = 0
    for name, files in counted:
        if current and count + files > limit:
            groups.append(current)
            current, count = [], 0
        current.append(name)
        count += files
    if current:
        groups.append(current)
    return groups


def _workers(files: int, threads: int | None) -> int:
    """`threads` when given, else MEMSYNC_CHECKOUT_THREADS when set, else by CPUs and `files`."""
    chosen = envcheck.number("MEMSYNC_CHECKOUT_THREADS", 0) if threads is None else threads
    if chosen:
        return max(1, int(chosen))
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return max(1, min(WORKERS, cpus, files // MIN_FILES_PER_WORKER))


def _runs(counted: list[tuple[str, int]], workers: int) -> list[list[tuple[str, int]]]:
    """`counted` cut into at most `workers` contiguous runs of about equal files."""
    if workers < 2:
        return []
    total = sum(files for _, files in counted)
    runs: list[list[tuple[str, int]]] = [[]]
    done = 0
    for name, files in counted:
        if runs[-1] and len(runs) < workers and done >= total * len(runs) / workers:
            runs.append([])
        runs[-1].append((name, files))
        done += files
    return runs


def _append(index: pygit2.Index, other: pygit2.Index) -> None:
    """Add `other`'s entries to `index` as they are (stat data and the in-memory up-to-date flag
    included). Entries that sort after all of `index`'s are appended, not inserted."""
    if not native.append_index(index, other):
        raise pygit2.GitError("cannot merge the index entries of a parallel checkout")
