"""libgit2's callbacks fail closed: an exception that escapes one is a refusal, never "go on".

cffi answers libgit2 with a callback's `error` value (0 unless told otherwise) when an exception
escapes the Python function, and to libgit2 0 means "accept this server", "the server took this
ref", "continue". pygit2's callbacks catch exceptions only inside a `try` that starts after their
first lines, so a Ctrl-C landing on one of those lines (the SIGINT handler raises between any two
lines) used to read as success. Every callback memsync's network operations use is therefore
(re-)defined with `error=GIT_ERROR` and an `onerror` that keeps the exception on the callbacks
object, where pygit2 re-raises it once libgit2 returns: a Ctrl-C stays a Ctrl-C (exit 130), and
whatever cannot be kept still aborts the operation.
"""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType
from typing import Any

from pygit2 import callbacks as pygit2_callbacks

from memsync.git import native

# GIT_EUSER makes pygit2 re-raise the exception stored on the callbacks object; GIT_ERROR is for
# when none could be stored (pygit2 asserts on a bare GIT_EUSER).
REFUSE_STORED = native.EUSER
REFUSE = native.ERROR

# pygit2's callbacks for fetch, push and ls-remote (the certificate check is memsync's own).
PYGIT2_REMOTE_CALLBACKS = ("_credentials_cb", "_push_negotiation_cb", "_push_update_reference_cb",
                           "_sideband_progress_cb", "_transfer_progress_cb", "_push_transfer_progress_cb",
                           "_update_tips_cb")


def keep(data: Any, exc: BaseException) -> int:
    """Store `exc` on the callbacks object for pygit2 to re-raise; the refusal to return."""
    try:
        data._stored_exception = exc
    except BaseException:
        return REFUSE
    return REFUSE_STORED


def _callbacks_object(tb: TracebackType) -> Any:
    """The callbacks object of the callback whose frame `tb` starts in: from its `payload`
    handle (memsync's certificate check) or pygit2's wrapper's `args` (handle, or the object
    once the wrapper has looked it up)."""
    names = tb.tb_frame.f_locals
    if "payload" in names:
        return native.from_handle(names["payload"])
    last = names["args"][-1]
    return native.from_handle(last) if native.is_handle(last) else last


def on_escape(kind: type[BaseException], exc: BaseException, tb: TracebackType | None) -> int:
    """cffi's `onerror`: keep the escaped exception if the callbacks object can be found, and
    refuse in any case (an exception here too makes cffi answer `error`, also a refusal)."""
    try:
        return keep(_callbacks_object(tb), exc) if tb is not None else REFUSE
    except BaseException:
        return REFUSE


def define(name: str, function: Callable[..., int]) -> None:
    """Bind the cffi extern `name` to `function`, failing closed."""
    native.define_extern(name, function, REFUSE, on_escape)


def quiet_progress(tick: Callable[[], None]) -> Any:
    """A transfer-progress callback for libgit2 that shows nothing. libgit2 calls it once per
    object received and per delta resolved, so it is a plain cffi callback that calls `tick`,
    not pygit2's (a TransferProgress object and a method lookup per call, felt in a fetch of
    many objects: docs/PERFORMANCE.md). It stays a point where a Ctrl-C lands
    during the transfer, failing closed as every callback here does."""

    def progress(stats: Any, payload: Any) -> int:
        tick()
        return 0

    return native.callback("git_indexer_progress_cb", progress, REFUSE, on_escape)


def received_bytes_progress(report: Callable[[int, int, int], None]) -> Any:
    """A transfer-progress callback like quiet_progress's that hands `report` the bytes received
    so far (a count that stands still while libgit2 indexes what it received), the objects
    received and the objects the pack holds."""

    def progress(stats: Any, payload: Any) -> int:
        report(int(stats.received_bytes), int(stats.received_objects), int(stats.total_objects))
        return 0

    return native.callback("git_indexer_progress_cb", progress, REFUSE, on_escape)


def packbuilder_progress(tick: Callable[[], None]) -> Any:
    """A pack-building progress callback (libgit2 calls it while it prepares a push's pack,
    at most every half second) that calls `tick`."""

    def progress(stage: int, current: int, total: int, payload: Any) -> int:
        tick()
        return 0

    return native.callback("git_packbuilder_progress", progress, REFUSE, on_escape)


def _nothing() -> None:
    return None


QUIET_PROGRESS = quiet_progress(_nothing)

_done = False


def install() -> None:
    """Make pygit2's remote callbacks fail closed (idempotent)."""
    global _done
    if not _done:
        for name in PYGIT2_REMOTE_CALLBACKS:
            define(name, getattr(pygit2_callbacks, name))
        _done = True
