"""Noticing changes in a memory directory (watchdog), without commit loops.

Events under `.git/` and `.vm0/`, and paths git ignores (editor swap files, write-then-rename temp
files, `.gitignore`d paths), never count as changes. If the OS runs out of inotify watches the
monitor falls back to polling and says so.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memsync.git.repo import IgnoreRules, file_blob_id

# watchdog reports its own hiccups (an observer stopping) through logging; with no handler they
# would reach stderr unprefixed, between the command's lines
logging.getLogger("watchdog").addHandler(logging.NullHandler())

_SKIP_DIRS = (".git", ".vm0")
EXPECT_FOR = 10.0  # seconds memsync's own writes (a checkout) are recognised as such
_MAX_PATHS = 10_000


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
        try:
            rel = Path(path).resolve().relative_to(self.root) if os.path.isabs(path) else Path(path)
        except ValueError:
            return None
        parts = rel.parts
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
        return file_blob_id(self.root / rel) == self._expected[rel]

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
                monitor._on_event(event)

        try:
            from watchdog.observers import Observer

            observer = Observer()
            observer.schedule(Handler(), str(self.root), recursive=True, event_filter=wanted)
            observer.start()
        except OSError as exc:
            from watchdog.observers.polling import PollingObserver

            self.notice(f"file events unavailable ({exc.strerror or exc}); polling {self.root} instead "
                        "(raise fs.inotify.max_user_watches to avoid this)")
            observer = PollingObserver(timeout=1.0)
            observer.schedule(Handler(), str(self.root), recursive=True, event_filter=wanted)
            observer.start()
            self.polling = True
        self._observer = observer

    def stop(self) -> None:
        if self._observer is not None:
            self._observer.stop()
            self._observer.join(timeout=5)
            self._observer = None
