"""libgit2 where pygit2 does not reach: every call memsync makes through pygit2's private cffi
handles (`pygit2.ffi`), with a cffi FFI of its own, or through ctypes (the pack indexer, which
pygit2 does not declare).

pygit2 keeps these private, so a pygit2 release may move them; pyproject.toml pins pygit2 and
this is the one module to adjust when the pin moves (tests/test_layers.py fails on such an
import anywhere else). Each function says why memsync does not use pygit2's own API for it.
Nothing here is imported at start-up beyond what `import pygit2` loads already: cffi's
Python part comes on first use.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any

import pygit2
from pygit2.errors import check_error
from pygit2.ffi import C, ffi

__all__ = ["ERROR", "EUSER", "IndexerError", "PackIndexer", "add_config_file", "address", "append_index",
           "callback", "checkout_tree", "define_extern", "diff_index_to_workdir", "from_handle", "is_handle", "is_null",
           "own_ffi", "release_free_heap", "remote_heads", "text", "trim_push_heads"]

ERROR = int(C.GIT_ERROR)  # a callback's refusal
EUSER = int(C.GIT_EUSER)  # a refusal whose exception pygit2 re-raises once libgit2 returns


# -- calls pygit2 does not wrap -------------------------------------------------------------------
def add_config_file(repo: pygit2.Repository, path: bytes, level: int) -> None:
    """Add a configuration file to `repo`'s configuration at `level`: pygit2 refuses `add_file`
    on a repository's configuration, libgit2 allows it (engine.for_packing). A failure leaves
    the configuration as it was."""
    config = ffi.new("git_config **")
    if C.git_repository_config(config, repo._repo) != 0:
        return
    try:
        C.git_config_add_file_ondisk(config[0], path, level, repo._repo, 0)
    finally:
        C.git_config_free(config[0])


def checkout_tree(repo: pygit2.Repository, tree: pygit2.Tree, payload: Any) -> None:
    """git_checkout_tree with pygit2's checkout options `payload` as the caller set them
    (pygit2's checkout_tree has no switch for libgit2's filters: filters.checkout)."""
    target = ffi.new("git_object **")
    ffi.buffer(target)[:] = tree._pointer[:]
    payload.check_error(C.git_checkout_tree(repo._repo, target[0], payload.checkout_options))


def append_index(index: pygit2.Index, other: pygit2.Index) -> bool:
    """Add `other`'s entries to `index` as they are, stat data and the in-memory up-to-date flag
    included (pygit2's IndexEntry copies neither: firstcheckout); False if libgit2 refused one."""
    for position in range(C.git_index_entrycount(other._index)):
        entry = C.git_index_get_byindex(other._index, position)
        if C.git_index_add(index._index, entry) != 0:
            return False
    return True


def remote_heads(remote: pygit2.Remote, prefix: bytes | None = None,
                 exact: bytes | None = None) -> tuple[int, dict[str, str]]:
    """(how many refs the connection's advertisement held, the refs named `exact` or under
    `prefix` with their tips), read from libgit2's list without a Python object per ref
    (pygit2's list_heads makes one, which a hub of many memories feels: docs/PERFORMANCE.md)."""
    refs = ffi.new("git_remote_head ***")
    size = ffi.new("size_t *")
    check_error(C.git_remote_ls(refs, size, remote._remote))
    count = int(size[0])
    found: dict[str, str] = {}
    if prefix is None and exact is None:
        return count, found
    heads = refs[0]
    if exact is not None and prefix is None:
        at = _bisect(heads, count, exact)
        if at is not None:
            found[exact.decode("utf-8", "surrogateescape")] = bytes(ffi.buffer(heads[at].oid.id)[:]).hex()
            return count, found
    for i in range(count):
        name = ffi.string(heads[i].name)
        if name == exact or (prefix is not None and name.startswith(prefix)):
            found[name.decode("utf-8", "surrogateescape")] = bytes(ffi.buffer(heads[i].oid.id)[:]).hex()
            if name == exact:
                break
    return count, found


def _bisect(heads: Any, count: int, name: bytes) -> int | None:
    """The index of the head named `name` in an advertisement in git's order (HEAD, then the refs
    sorted by name), found in ~17 looks at 100,000 refs instead of one per ref; None if not found
    so (absent, or an advertisement out of order: the caller then reads every head). Only an
    exact match is returned, so an order a server got wrong costs time, never a wrong answer."""
    lo, hi = 0, count
    while lo < hi:
        mid = (lo + hi) // 2
        here = ffi.string(heads[mid].name)
        if here == name:
            return mid
        if here < name:
            lo = mid + 1
        else:
            hi = mid
    return None


# libgit2's `struct git_remote` begins with three strings (name, url, pushurl) and then the
# `git_vector refs` a push negotiates with: {size_t _alloc_size; git_vector_cmp _cmp; void
# **contents; size_t length; uint32_t flags} (src/libgit2/remote.h, src/util/vector.h, the same in
# every 1.9.x). Read as machine words from the remote's start: the vector's fields at these indexes.
_NAME, _URL, _PUSHURL, _ALLOC, _CMP, _CONTENTS, _LENGTH = range(7)
_LAYOUT_VERSION = (1, 9)  # the libgit2 minor whose layout the above is


def trim_push_heads(remote: pygit2.Remote, keep: frozenset[bytes]) -> tuple[int, int] | None:
    """During a push's negotiation (libgit2 calls the push_negotiation callback between copying
    every advertised head into the remote's `refs` and hiding each of them from the pack's walk),
    keep in `refs` only the heads whose raw 20-byte id is in `keep`; (heads advertised, heads
    kept). Hiding a head the memory does not hold costs libgit2 a miss that re-reads the pack
    folder, and a hub of many memories advertises many such heads (docs/PERFORMANCE.md).

    The structure is libgit2's private one, so every field is checked before anything is
    written: the strings against libgit2's own accessors, the vector against the advertisement
    (`git_remote_ls`) it was copied from, head for head. Anything unexpected (another libgit2,
    another platform's word size, not inside a push's negotiation): None, `refs` untouched, and
    the push negotiates with every head as libgit2 does, slower, as correct. The heads belong to
    the transport, not to the vector, so shortening the vector frees nothing."""
    if tuple(pygit2.LIBGIT2_VER[:2]) != _LAYOUT_VERSION or ffi.sizeof("size_t") != ffi.sizeof("void *"):
        return None
    words = ffi.cast("uintptr_t *", remote._remote)
    expected = {_NAME: C.git_remote_name(remote._remote), _URL: C.git_remote_url(remote._remote),
                _PUSHURL: C.git_remote_pushurl(remote._remote)}
    if any(int(words[i]) != address(pointer) for i, pointer in expected.items()) or int(words[_CMP]) != 0:
        return None
    heads = ffi.new("git_remote_head ***")
    size = ffi.new("size_t *")
    if C.git_remote_ls(heads, size, remote._remote) != 0:
        return None
    count, length, alloc = int(size[0]), int(words[_LENGTH]), int(words[_ALLOC])
    if count == 0 or length != count or alloc < length or int(words[_CONTENTS]) == 0:
        return None
    contents = ffi.cast("git_remote_head **", words[_CONTENTS])
    advertised = heads[0]
    kept = []
    for i in range(count):
        head = contents[i]
        if head != advertised[i]:
            return None  # not the advertisement's copy: leave it as it is
        if bytes(ffi.buffer(head.oid.id, 20)) in keep:
            kept.append(head)
    for i, head in enumerate(kept):
        contents[i] = head
    words[_LENGTH] = len(kept)
    return count, len(kept)


def diff_index_to_workdir(repo: pygit2.Repository, index: pygit2.Index, flags: int,
                          path: str | None) -> pygit2.Diff:
    """git_diff_index_to_workdir with a pathspec taken literally (pygit2 passes none through)."""
    copts = ffi.new("git_diff_options *")
    check_error(C.git_diff_options_init(copts, 1))
    copts.flags = flags
    if path is not None:
        name = ffi.new("char[]", path.encode("utf-8", "surrogateescape"))
        strings = ffi.new("char *[]", [name])
        copts.pathspec.strings = strings
        copts.pathspec.count = 1
    cdiff = ffi.new("git_diff **")
    check_error(C.git_diff_index_to_workdir(cdiff, repo._repo, index._index, copts))
    return pygit2.Diff.from_c(bytes(ffi.buffer(cdiff)[:]), repo)  # owns (and frees) the git_diff


# -- callbacks: pygit2's cffi externs and handles (interrupts.py, hostkeys.py) ----------------------
def define_extern(name: str, function: Callable[..., int], error: int,
                  onerror: Callable[..., int]) -> None:
    """(Re-)bind pygit2's cffi extern `name` (one of the callbacks libgit2 calls) to `function`."""
    ffi.def_extern(name=name, error=error, onerror=onerror)(function)


def callback(signature: str, function: Callable[..., int], error: int, onerror: Callable[..., int]) -> Any:
    """A libgit2 callback of C type `signature` that calls `function` (kept alive by the caller)."""
    return ffi.callback(signature, function, error=error, onerror=onerror)


def from_handle(handle: Any) -> Any:
    """The Python object behind a callback's payload handle."""
    return ffi.from_handle(handle)


def is_handle(value: Any) -> bool:
    """Whether `value` is a cffi pointer (a payload handle not looked up yet), not an object."""
    return isinstance(value, ffi.CData)


def is_null(pointer: Any) -> bool:
    return bool(pointer == ffi.NULL)


def text(pointer: Any) -> bytes:
    """The C string at `pointer` (b"" for NULL)."""
    return b"" if pointer == ffi.NULL else bytes(ffi.string(pointer))


def address(pointer: Any) -> int:
    return int(ffi.cast("uintptr_t", pointer))


_TRIM_ABOVE = 64 * 1024 * 1024  # resident bytes
_libc: list[Any] = []  # [(the FFI, the C library)] once looked up; [None] where it has no malloc_trim


def release_free_heap() -> None:
    """Give the C heap's free pages back to the system (glibc's malloc_trim; nothing elsewhere).
    A pack build (engine.for_packing) follows the walk, index and Python objects of a whole
    memory, which glibc keeps mapped once freed: ~30 MB at 100,000 files that the pack builder's
    own peak then came on top of. Not a libgit2 call: pygit2 has none, and the C library is
    reached through a cffi FFI of memsync's own, and only by a process grown past
    _TRIM_ABOVE (a push of a few files does not parse a cdef for nothing)."""
    try:
        with open("/proc/self/statm", "rb") as fh:
            resident = int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return
    if resident < _TRIM_ABOVE:
        return
    if not _libc:
        try:
            made = own_ffi("int malloc_trim(size_t pad);")
            _libc.append((made, made.dlopen(None)))
            _libc[0][1].malloc_trim  # noqa: B018 - absent outside glibc: AttributeError
        except (ImportError, OSError, AttributeError):
            _libc[:] = [None]
    if _libc[0] is not None:
        _libc[0][1].malloc_trim(0)


@functools.cache
def own_ffi(cdef: str) -> Any:  # a cffi.FFI
    """A cffi FFI of memsync's own with `cdef` declared, for a structure pygit2's declarations
    lack (hostkeys.py: the SSH host key libgit2 hands the certificate check). Built on first use:
    parsing a cdef loads pycparser (docs/PERFORMANCE.md)."""
    import cffi  # type: ignore[import-untyped]

    made = cffi.FFI()
    made.cdef(cdef)
    return made


# -- a received pack written through libgit2's indexer (git/fetchv2.py) ----------------------------
# pygit2 declares no indexer (its cdef lacks git_indexer_new), and a cffi FFI of memsync's own
# would parse a cdef (importing pycparser: docs/PERFORMANCE.md); ctypes reaches the same libgit2
# the process loaded for pygit2. The structures are libgit2 1.9's (include/git2/indexer.h, errors.h).
@functools.cache
def _libgit2() -> Any:
    """(libgit2 as this process loaded it for pygit2, found among its mappings, with its indexer's
    functions declared; the structures); None where it cannot be found, or is not the 1.9 whose
    structures these are. ctypes is imported here, on a fetch's first use, not at start-up."""
    if tuple(pygit2.LIBGIT2_VER[:2]) != _LAYOUT_VERSION:
        return None
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as fh:
            paths = {line.split(None, 5)[-1].strip() for line in fh if "libgit2" in line}
    except OSError:
        return None
    found = [p for p in paths if p.startswith("/") and os.path.basename(p).startswith("libgit2")]
    if len(found) != 1:
        return None
    import ctypes

    class Progress(ctypes.Structure):
        _fields_ = [("total_objects", ctypes.c_uint), ("indexed_objects", ctypes.c_uint),
                    ("received_objects", ctypes.c_uint), ("local_objects", ctypes.c_uint),
                    ("total_deltas", ctypes.c_uint), ("indexed_deltas", ctypes.c_uint),
                    ("received_bytes", ctypes.c_size_t)]

    callback = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(Progress), ctypes.c_void_p)

    class Options(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint), ("progress_cb", callback), ("progress_cb_payload", ctypes.c_void_p),
                    ("verify", ctypes.c_ubyte)]

    class Error(ctypes.Structure):
        _fields_ = [("message", ctypes.c_char_p), ("klass", ctypes.c_int)]

    p, out, progress = ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(Progress)
    signatures: dict[str, tuple[Any, list[Any]]] = {
        "git_indexer_options_init": (ctypes.c_int, [ctypes.POINTER(Options), ctypes.c_uint]),
        "git_indexer_new": (ctypes.c_int, [out, ctypes.c_char_p, ctypes.c_uint, p, ctypes.POINTER(Options)]),
        "git_indexer_append": (ctypes.c_int, [p, ctypes.c_char_p, ctypes.c_size_t, progress]),
        "git_indexer_commit": (ctypes.c_int, [p, progress]),
        "git_indexer_name": (ctypes.c_char_p, [p]),
        "git_indexer_free": (None, [p]),
        "git_repository_odb": (ctypes.c_int, [out, p]),
        "git_odb_free": (None, [p]),
        "git_odb_refresh": (ctypes.c_int, [p]),
        "git_error_last": (ctypes.POINTER(Error), []),
    }
    try:
        lib = ctypes.CDLL(found[0])
        for name, (restype, argtypes) in signatures.items():
            function = getattr(lib, name)
            function.restype, function.argtypes = restype, argtypes
    except (OSError, AttributeError):
        return None
    return lib, ctypes, Progress, Options, callback


class IndexerError(Exception):
    """libgit2's indexer refused the pack (its message, which names no credential)."""


class PackIndexer:
    """libgit2's indexer (git_indexer_new / append / commit) writing a received pack into a
    repository's pack folder: each object hashed as it comes, deltas resolved at `commit`
    (thin packs completed from the repository's objects), every object a commit, tree or tag
    of the pack names checked to be in the pack or the repository (`verify`; a shallow clone's
    pack names its tip's parents, which it leaves out: its caller checks instead). Until `commit`
    the pack is a temporary file libgit2 removes on `close`. `available()`: whether this
    libgit2 is one memsync can drive so.

    It is given no progress callback: libgit2 would call it per object received and per delta
    resolved, each call taking the GIL back from the thread that reads and checks the pack
    meanwhile (fetchv2.IndexBeside, which runs the indexer in a thread of its own). `stats` is
    read as the pieces go in; the caller's network watch is told that the process works while it
    commits (netlimits.Watch.working)."""

    def __init__(self, repo: pygit2.Repository, verify: bool = True) -> None:
        loaded = _libgit2()
        if loaded is None:
            raise IndexerError("libgit2's indexer is not reachable")
        lib, ctypes, progress, options, _callback = loaded
        self._lib, self._ctypes = lib, ctypes
        self.stats = progress()
        odb = ctypes.c_void_p()
        self._check(lib.git_repository_odb(ctypes.byref(odb), address(repo._repo)))
        self._odb = odb
        opts = options()
        lib.git_indexer_options_init(ctypes.byref(opts), 1)
        opts.verify = int(verify)
        indexer = ctypes.c_void_p()
        pack_dir = os.path.join(repo.path, "objects", "pack").encode()
        error = lib.git_indexer_new(ctypes.byref(indexer), pack_dir, 0, odb, ctypes.byref(opts))
        if error != 0:
            lib.git_odb_free(odb)
            self._check(error)
        self._indexer: Any = indexer

    @staticmethod
    def available() -> bool:
        return _libgit2() is not None

    def append(self, data: bytes) -> None:
        self._check(self._lib.git_indexer_append(self._indexer, data, len(data), self._ctypes.byref(self.stats)))

    def commit(self) -> str:
        """Resolve the deltas, write the pack's index; the pack's name (its checksum)."""
        self._check(self._lib.git_indexer_commit(self._indexer, self._ctypes.byref(self.stats)))
        self._lib.git_odb_refresh(self._odb)
        return bytes(self._lib.git_indexer_name(self._indexer)).decode("ascii")

    def close(self) -> None:
        if self._indexer is not None:
            self._lib.git_indexer_free(self._indexer)  # an uncommitted pack's file goes with it
            self._lib.git_odb_free(self._odb)
            self._indexer = None

    def _check(self, error: int) -> None:
        if error == 0:
            return
        last = self._lib.git_error_last()
        said = last.contents.message if last and last.contents.message else b"unknown"
        raise IndexerError(said.decode("utf-8", "replace"))
