"""watchdog's inotify observer as the change trackers (tracker.py) need it; imported only when one starts.

It is watchdog's own `InotifyObserver` (one recursive watch, symlinks never followed; a move in
or out of the tree reported as a move from or to "", not as a creation or deletion), with two
reports watchdog otherwise keeps to its log, both of which mean "some change may come without an
event": the kernel's event queue overflowed (watchdog then rebuilds its watches, but the events
are gone), and a folder could not be watched (out of inotify watches, or no permission to read
it: watchdog skips such a folder below the root). Its threads (the inotify reader, the emitter,
the dispatcher) live in the server only; a worker forked from it never starts or touches them.

Below a `.git` folder (the memory's own or a nested repository's) nothing is watched: the folder
itself is (its replacement, the flush cookie), its objects, refs and logs are not (a commit of
10,000 files made ~100,000 events there, ~1.2 CPU-seconds of the server's, all dropped). That
reaches into watchdog's watch group (`_add_all_callbacks`), so pyproject caps watchdog below 8.

Only watchdog's inotify backend reports both, so only Linux is tracked: its FSEvents backend
drops the "events were lost, rescan" flags (watchdog 7.1), and `memsync serve` itself runs on
Linux only (it checks its peers with SO_PEERCRED).
"""

from __future__ import annotations

import contextlib
import errno
import os
import warnings
from collections.abc import Callable

from watchdog.events import (
    DirAttribEvent,
    DirCreatedEvent,
    DirDeletedEvent,
    DirMovedEvent,
    FileAttribEvent,
    FileClosedEvent,
    FileCreatedEvent,
    FileDeletedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileSystemEvent,
    FileSystemEventHandler,
)
from watchdog.observers.api import BaseObserver
from watchdog.observers.inotify import InotifyFullEmitter, InotifyWatchGroup
from watchdog.observers.inotify_c import CallbackId, InotifyEvent, InotifyFD, Mask, WatchCallback, WatchDescriptor

__all__ = ["TreeObserver", "observe"]

# What can change what git sees. Left out, so never asked of the kernel: opens and closes without
# a write (every read of every file, .git's included, would pass through three threads), and
# watchdog's own note that a folder's entries changed (each change has its own event).
EVENTS: list[type[FileSystemEvent]] = [FileCreatedEvent, DirCreatedEvent, FileDeletedEvent, DirDeletedEvent,
                                       FileModifiedEvent, FileAttribEvent, DirAttribEvent, FileMovedEvent,
                                       DirMovedEvent, FileClosedEvent]
_GONE = (errno.ENOENT, errno.ENOTDIR)  # a folder removed while watches were added: its parent's event names it


class _Reader(InotifyFD):
    """watchdog's inotify reader (its own thread), telling `overflowed` and `unwatched` what its log says."""

    def __init__(self, overflowed: Callable[[], None], unwatched: Callable[[str], None]) -> None:
        super().__init__()
        self._overflowed = overflowed
        self._unwatched = unwatched

    def handle_event(self, event: InotifyEvent) -> None:
        if event.is_queue_overflow:
            self._overflowed()
        super().handle_event(event)

    def add_callback(self, path: bytes, mask: Mask, callback: WatchCallback, id_: CallbackId) -> WatchDescriptor:
        try:
            wd = super().add_callback(path, mask, callback, id_)
        except OSError as exc:
            if exc.errno not in _GONE:
                self._unwatched(f"cannot watch {os.fsdecode(path)}: {exc.strerror}")
            raise
        if wd == -1:  # watchdog passes EACCES over and keeps a watch that sees nothing
            self._unwatched(f"cannot watch {os.fsdecode(path)}: permission denied")
        return wd


class _Group(InotifyWatchGroup):
    """watchdog's recursive watches, except below a `.git` (the memory's own, or a nested
    repository's): the folder itself is watched (its replacement, the flush cookie), what is below
    it is not (objects, refs, logs: events by the thousand a commit, which the tracker drops)."""

    def _add_all_callbacks(self, path: bytes) -> None:
        self._add_callback(path)
        if not self.is_recursive or os.path.basename(path) == b".git" or not os.path.isdir(path):
            return
        for top, dirnames, _ in os.walk(path):
            dirnames[:] = [d for d in dirnames if not os.path.islink(os.path.join(top, d))]
            for name in dirnames:
                self._add_callback(os.path.join(top, name))
            dirnames[:] = [d for d in dirnames if d != b".git"]


class _Emitter(InotifyFullEmitter):
    def on_thread_start(self) -> None:
        self._inotify = _Group(self._inotify_fd, os.fsencode(self.watch.path), is_recursive=self.watch.is_recursive,
                               event_mask=self.get_event_mask_from_filter(), follow_symlink=self.watch.follow_symlink)


class TreeObserver(BaseObserver):
    """An observer with its own inotify reader, as watchdog's InotifyObserver builds one (with
    `generate_full_events`)."""

    def __init__(self, overflowed: Callable[[], None], unwatched: Callable[[str], None]) -> None:
        self.reader = _Reader(overflowed, unwatched)
        self.reader.start()
        super().__init__(_Emitter, inotify_fd=self.reader)

    def on_thread_stop(self) -> None:
        super().on_thread_stop()
        self.reader.stop()
        with contextlib.suppress(RuntimeError):
            self.reader.join(timeout=5)

    def healthy(self) -> bool:
        """Every thread of it still runs (one that died delivers nothing more)."""
        return self.is_alive() and self.reader.is_alive() and all(e.is_alive() for e in self.emitters)


class _Handler(FileSystemEventHandler):
    def __init__(self, on_event: Callable[[FileSystemEvent], None]) -> None:
        self._on_event = on_event

    def on_any_event(self, event: FileSystemEvent) -> None:
        self._on_event(event)


def observe(root: str, on_event: Callable[[FileSystemEvent], None], overflowed: Callable[[], None],
            unwatched: Callable[[str], None]) -> TreeObserver:
    """A started observer of `root` and everything below it. When this returns, every folder is
    watched (watchdog adds the watches in the caller's thread), so a change from here on is
    reported; `on_event` is called on the observer's thread, in the order the kernel queued them."""
    from memsync.live.changes import quiet_watchdog
    from memsync.util.threads import stops_blocked

    quiet_watchdog()
    # watchdog re-adds the watches of a folder it already watches, with a warning that would reach
    # the server's terminal; the watch is the same either way
    warnings.filterwarnings("ignore", message="Callback with id", category=RuntimeWarning)
    with stops_blocked():  # the observer's threads never take the server's stop signals
        observer = TreeObserver(overflowed, unwatched)
        try:
            observer.schedule(_Handler(on_event), root, recursive=True, event_filter=EVENTS)
            observer.start()
        except BaseException:
            stop(observer)
            raise
    return observer


def stop(observer: TreeObserver) -> None:
    with contextlib.suppress(Exception):
        observer.stop()
    with contextlib.suppress(RuntimeError):
        observer.join(timeout=5)
