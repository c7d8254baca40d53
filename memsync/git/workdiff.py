"""The index-to-work-tree diff, and whether it refreshed any of the index's stat data.

With UPDATE_INDEX, libgit2 updates an index entry's stat data only for a file whose stat did not
match and whose content it hashed (git_diff__oid_for_entry); every such hash is counted in the
diff's perf data (`oid_calculations`). No hash means no entry changed, so the index need not be
written (~8 ms at 10,000 files, on every status). pygit2 does not expose `git_diff_get_perfdata`:
it is called through ctypes on the libgit2 the process already has loaded, and checked against
the diff pygit2 sees (its delta count). Anything unexpected answers None: "unknown", and the
caller writes the index as before.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterator
from typing import Any

import pygit2
from pygit2.enums import DiffOption
from pygit2.errors import check_error
from pygit2.ffi import C, ffi

_PERFDATA_VERSION = 1


def scan_flags() -> DiffOption:
    """The diff a scan makes (GitRepo.scan). Ignored entries come from the same walk, file by
    file: which ignore rules count is memsync's to decide (localignores.py), never a .gitignore
    from the hub, and a `*` rule would hide the whole work tree from a walk that stops at ignored
    folders, without so much as an "ignored" entry."""
    return (DiffOption.INCLUDE_UNTRACKED | DiffOption.RECURSE_UNTRACKED_DIRS | DiffOption.UPDATE_INDEX
            | DiffOption.INCLUDE_TYPECHANGE | DiffOption.INCLUDE_IGNORED | DiffOption.RECURSE_IGNORED_DIRS)
_lib: Any = None  # the loaded libgit2 through ctypes; False once it could not be found
_PerfData: Any = None  # git_diff_perfdata as a ctypes structure, made with _lib
_loading = threading.Lock()


def prepare() -> None:
    """Import ctypes (~1 ms) and find the loaded libgit2 now: the early walk's thread starts
    first, and the main thread does this while it runs, off the walk's path."""
    _libgit2()


def _libgit2() -> Any:
    global _lib, _PerfData
    with _loading:
        if _lib is None:
            import ctypes  # (only the diff's perf data needs it)

            class PerfData(ctypes.Structure):
                _fields_ = [("version", ctypes.c_uint), ("stat_calls", ctypes.c_size_t),
                            ("oid_calculations", ctypes.c_size_t)]

            _lib = False
            for path in _candidates():
                try:
                    lib = ctypes.CDLL(path, mode=getattr(os, "RTLD_NOLOAD", 0) | getattr(os, "RTLD_NOW", 2))
                    perf, count = lib.git_diff_get_perfdata, lib.git_diff_num_deltas
                except (OSError, AttributeError):
                    continue
                perf.argtypes, perf.restype = [ctypes.POINTER(PerfData), ctypes.c_void_p], ctypes.c_int
                count.argtypes, count.restype = [ctypes.c_void_p], ctypes.c_size_t
                _lib, _PerfData = lib, PerfData
                break
    return _lib or None


def _candidates() -> Iterator[str]:
    """The libgit2 mapped into this process: the copy a pygit2 wheel bundles (found without
    reading the ~300 lines of /proc/self/maps, ~1 ms), else whichever the maps show (the
    system's), then pygit2's own extension in case libgit2 is linked into it. The caller's
    RTLD_NOLOAD keeps out any that is not already loaded; it stops at the first that is."""
    with contextlib.suppress(OSError):
        bundled = os.path.join(os.path.dirname(os.path.dirname(pygit2.__file__)), "pygit2.libs")
        for name in sorted(os.listdir(bundled)):
            if name.startswith("libgit2"):
                yield os.path.join(bundled, name)
    found: list[str] = []
    with contextlib.suppress(OSError), open("/proc/self/maps", encoding="utf-8", errors="replace") as fh:
        for line in fh:
            path = line.rstrip("\n").split(None, 5)[-1] if line.count(" ") >= 5 else ""
            if os.path.basename(path).startswith("libgit2") and path not in found:
                found.append(path)
    yield from found
    with contextlib.suppress(ImportError, AttributeError):
        from pygit2 import _libgit2

        yield str(_libgit2.__file__)


def diff_to_workdir(repo: pygit2.Repository, index: pygit2.Index, flags: DiffOption,
                    paths: list[str] | None = None) -> tuple[list[pygit2.DiffDelta], int | None]:
    """`index.diff_to_workdir(flags)`'s deltas and how many files libgit2 hashed for it (None:
    unknown). With `paths` (top-level entries of the work tree), only those entries, and all below
    them, are looked at: the same deltas a full diff reports for them, and nothing else.

    One diff per entry: libgit2 1.9 given a path list holding both `notes` and `notes-r1` (a
    name, and the same name followed by a byte that sorts before "/") skips index entries under
    `notes/` and reports their files as untracked."""
    if paths is None:
        return _diff(repo, index, flags, None)
    deltas: list[pygit2.DiffDelta] = []
    hashed: int | None = 0
    for path in paths:
        found, count = _diff(repo, index, flags, path)
        deltas += found
        hashed = None if hashed is None or count is None else hashed + count
    return deltas, hashed


_ATTEMPTS = 5
_PATIENCE = 2.0  # seconds of such retries (at least _ATTEMPTS of them) before the failure is the caller's


def _diff(repo: pygit2.Repository, index: pygit2.Index, flags: DiffOption,
          path: str | None) -> tuple[list[pygit2.DiffDelta], int | None]:
    copts = ffi.new("git_diff_options *")
    check_error(C.git_diff_options_init(copts, 1))
    copts.flags = int(flags) | (int(DiffOption.DISABLE_PATHSPEC_MATCH) if path is not None else 0)
    if path is not None:
        name = ffi.new("char[]", path.encode("utf-8", "surrogateescape"))
        strings = ffi.new("char *[]", [name])
        copts.pathspec.strings = strings
        copts.pathspec.count = 1
    cdiff = ffi.new("git_diff **")
    give_up = time.monotonic() + _PATIENCE
    attempt = 0
    while True:
        try:
            check_error(C.git_diff_index_to_workdir(cdiff, repo._repo, index._index, copts))
            break
        except pygit2.GitError:
            # A file that goes between libgit2's lstat and its read ("error reading file for
            # hashing", "could not find ... to open"): someone writes the tree meanwhile, an agent
            # racing memsync included. A fresh walk sees the tree as it is now.
            attempt += 1
            if attempt >= _ATTEMPTS and time.monotonic() >= give_up:
                raise
            time.sleep(min(0.01 * attempt, 0.1))
    diff = pygit2.Diff.from_c(bytes(ffi.buffer(cdiff)[:]), repo)  # owns (and frees) the git_diff
    return list(diff.deltas), _hashed(cdiff[0], diff)


def _hashed(cdiff: Any, diff: pygit2.Diff) -> int | None:
    lib = _libgit2()
    if lib is None:
        return None
    import ctypes

    try:
        pointer = ctypes.c_void_p(int(ffi.cast("uintptr_t", cdiff)))
        if lib.git_diff_num_deltas(pointer) != len(diff):
            return None
        perf = _PerfData(_PERFDATA_VERSION, 0, 0)
        if lib.git_diff_get_perfdata(ctypes.byref(perf), pointer) != 0:
            return None
        return int(perf.oid_calculations)
    except (OSError, AttributeError, TypeError, ValueError, ctypes.ArgumentError):
        return None
