"""Noticing changes in a memory directory (watchdog), without commit loops.

Events under `.git/` and `.vm0/`, and paths git ignores (editor swap files, write-then-rename temp
files, `.gitignore`d paths), never count as changes. If the OS runs out of inotify watches the
monitor falls back to polling and says so.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any

from memsync.git.repo import IgnoreRules, tree_blob_id

# watchdog reports its own hiccups (an observer stopping) through logging, and a directory that
# appears and vanishes during its recursive walk through a RuntimeWarning naming its internals;
# neither may reach stderr, where it would land unprefixed between the command's lines.
logging.getLogger("watchdog").addHandler(logging.NullHandler())
warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"watchdog(\.|$)")

_SKIP_DIRS = (".git", ".vm0")
EXPECT_FOR = 10.0  # seconds memsync's own writes (a checkout) are recognised as such
_MAX_PATHS = 10_000
# Each top-level directory gets a recursive watch of its own, so that `.git/` (hundreds of object
# directories, written on every commit) is never watched. Past this many top-level directories
# one recursive watch of the root is cheaper than one watcher thread each.
_MAX_TOP_WATCHES = 64


class ChangeMonitor:
    """Counts relevant file events below `root`; `dirty` and `last_event` drive checkpoints."""

    def __init__(self, root: Path, notice: Callable[[str], None] | None = None) -> None:
        self.root = root.resolve()
        self.notice = notice or (lambda _msg: None)
        self.ignore = IgnoreRules(self.root)
        self.lock = threading.Lock()
        self.dirty = False
        self.events = 0
        self.last_event = 0.0
        self.polling = False
        self._observer: Any = None
        self.changed: set[str] = set()  # paths behind `dirty` (bounded); `_unknown`: not only those
        self._unknown = False
        self._expected: dict[str, str | None] = {}
        self._expected_until = 0.0
        self._handler: Any = None
        self._dir_watches: dict[str, Any] = {}  # top-level directory name -> its watch
        self._per_dir = False  # False: one recursive watch of the root (too many top-level directories)
        self._wanted: list[Any] = []

    # called from watchdog's thread
    def _on_event(self, event: Any) -> None:
        if getattr(event, "is_directory", False) and getattr(event, "event_type", "") == "modified":
            return  # a directory's own mtime: the event for the file inside it is what counts
        paths = [self._rel(p) for p in (getattr(event, "src_path", ""), getattr(event, "dest_path", "")) if p]
        found = [rel for rel in paths if rel is not None and not self._as_expected(rel)]
        if not found:
            return
        with self.lock:
            self.dirty = True
            self.events += 1
            self.last_event = time.monotonic()
            if len(self.changed) < _MAX_PATHS:
                self.changed.update(found)
            else:
                self._unknown = True

    def _rel(self, raw: str | bytes) -> str | None:
        """The path relative to the root if an event there can matter, else None."""
        path = os.fsdecode(raw)
        # by name only: resolving would follow the symlinks an agent puts there (a loop raises)
        try:
            rel = PurePosixPath(path).relative_to(self.root) if os.path.isabs(path) else PurePosixPath(path)
        except ValueError:
            return None
        parts = rel.parts
        if ".." in parts:
            return None
        if not parts or parts[0] in _SKIP_DIRS or self.ignore.is_ignored(rel.as_posix()):
            return None
        return rel.as_posix()

    # memsync's own writes -------------------------------------------------------------------
    def expect(self, contents: dict[str, str | None]) -> None:
        """memsync itself wrote these files (path -> blob id, None = removed), e.g. a checkout:
        for a short while an event that leaves a file with exactly that content is not a change,
        and events already counted for such files are dropped, so a merge costs no scan."""
        with self.lock:
            self._expected = dict(contents)
            self._expected_until = time.monotonic() + EXPECT_FOR
            if not self.dirty or self._unknown:
                return
            still = {rel for rel in self.changed if not self._matches(rel)}
            self.changed = still
            self.dirty = bool(still)

    def forget_expected(self) -> None:
        """HEAD moved on (a new commit): expected contents no longer mean "unchanged"."""
        with self.lock:
            self._expected = {}

    def _as_expected(self, rel: str) -> bool:
        with self.lock:
            return self._matches(rel)

    def _matches(self, rel: str) -> bool:
        if rel not in self._expected or time.monotonic() > self._expected_until:
            return False
        return tree_blob_id(self.root, rel) == self._expected[rel]

    # the checkpoint loop's side ---------------------------------------------------------------
    def take(self) -> tuple[bool, float]:
        """(dirty, last_event) and reset dirty: the caller is about to snapshot."""
        with self.lock:
            dirty, last = self.dirty, self.last_event
            self.dirty = False
            self.changed = set()
            self._unknown = False
            return dirty, last

    def peek(self) -> tuple[bool, float]:
        with self.lock:
            return self.dirty, self.last_event

    def pending(self) -> int:
        """How many paths changed since the last snapshot (at least 1 if dirty)."""
        with self.lock:
            return max(len(self.changed), 1) if self.dirty else 0

    def mark_dirty(self, touch: bool = True) -> None:
        """Something still needs a snapshot; `touch=False` keeps the time of the last event (a
        held-back file must not restart the quiet period)."""
        with self.lock:
            self.dirty = True
            self._unknown = True
            if touch:
                self.last_event = time.monotonic()

    def start(self) -> None:
        from watchdog import events as ev
        from watchdog.events import FileSystemEventHandler

        monitor = self
        # Reads (open / close-without-write) are not subscribed to: an agent or the initial scan
        # reading 10,000 files would otherwise flood the inotify queue.
        wanted: list[type[ev.FileSystemEvent]] = [
            ev.FileCreatedEvent, ev.FileModifiedEvent, ev.FileDeletedEvent, ev.FileMovedEvent,
            ev.FileClosedEvent, ev.DirCreatedEvent, ev.DirDeletedEvent, ev.DirMovedEvent]

        class Handler(FileSystemEventHandler):
            def on_any_event(self, event: Any) -> None:
                if getattr(event, "event_type", "") in ("opened", "closed_no_write"):
                    return
                try:
                    if getattr(event, "is_directory", False):
                        monitor._follow_top_level(event)
                    monitor._on_event(event)
                except Exception:  # an exception here would end watchdog's thread: no more checkpoints
                    monitor.mark_dirty()  # something changed; the next scan finds what

        self._handler = Handler()
        self._wanted = wanted
        try:
            from watchdog.observers import Observer

            self._observer = Observer()
            self._schedule_all()
            self._observer.start()
        except OSError as exc:
            from watchdog.observers.polling import PollingObserver

            self.notice(f"file events unavailable ({exc.strerror or exc}); polling {self.root} instead "
                        "(raise fs.inotify.max_user_watches to avoid this)")
            self._observer = PollingObserver(timeout=1.0)
            self._schedule_all()
            self._observer.start()
            self.polling = True

    # which directories are watched: the root itself, and each top-level directory but .git/.vm0
    def _schedule_all(self) -> None:
        top = [e.name for e in os.scandir(self.root)
               if e.name not in _SKIP_DIRS and e.is_dir(follow_symlinks=False)]
        if len(top) > _MAX_TOP_WATCHES:
            self._observer.schedule(self._handler, str(self.root), recursive=True, event_filter=self._wanted)
            self._per_dir = False
            return
        self._per_dir = True
        self._observer.schedule(self._handler, str(self.root), recursive=False, event_filter=self._wanted)
        self._dir_watches = {name: None for name in top}
        for name in top:
            self._watch_dir(name)

    def _watch_dir(self, name: str) -> None:
        try:
            self._dir_watches[name] = self._observer.schedule(
                self._handler, str(self.root / name), recursive=True, event_filter=self._wanted)
        except OSError as exc:  # it vanished already, or the system ran out of watches
            self._dir_watches.pop(name, None)
            if (self.root / name).is_dir():
                self.notice(f"cannot watch {name}/ ({exc.strerror or exc}); its changes are found by the next scan")
                self.mark_dirty()

    def _follow_top_level(self, event: Any) -> None:
        """A top-level directory appeared or went: watch it, or drop its watch (watchdog thread)."""
        if not self._per_dir:
            return
        kind = getattr(event, "event_type", "")
        for raw, appeared in ((getattr(event, "src_path", ""), False), (getattr(event, "dest_path", ""), True)):
            if not raw:
                continue
            path = Path(os.fsdecode(raw))
            if path.parent != self.root or path.name in _SKIP_DIRS:
                continue
            came = appeared or kind == "created"
            went = not appeared and kind in ("deleted", "moved")
            if went and self._dir_watches.get(path.name) is not None:
                watch = self._dir_watches.pop(path.name)
                with contextlib.suppress(KeyError, OSError):
                    self._observer.unschedule(watch)
            elif came and path.name not in self._dir_watches and len(self._dir_watches) < _MAX_TOP_WATCHES:
                self._watch_dir(path.name)

    def stop(self) -> None:
        if self._observer is not None:
            self._observer.stop()
            self._observer.join(timeout=5)
            self._observer = None
