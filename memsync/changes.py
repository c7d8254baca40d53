"""Noticing changes in a memory directory (watchdog), without commit loops.

Events under `.git/` and `.vm0/`, and paths git ignores (editor swap files, write-then-rename temp
files, `.gitignore`d paths), never count as changes. If the OS runs out of inotify watches the
monitor falls back to polling and says so.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memsync.git.repo import IgnoreRules

_SKIP_DIRS = (".git", ".vm0")


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

    # called from watchdog's thread
    def _on_event(self, event: Any) -> None:
        paths = [getattr(event, "src_path", ""), getattr(event, "dest_path", "")]
        if not any(self._relevant(p) for p in paths if p):
            return
        with self.lock:
            self.dirty = True
            self.events += 1
            self.last_event = time.monotonic()

    def _relevant(self, raw: str | bytes) -> bool:
        path = os.fsdecode(raw)
        try:
            rel = Path(path).resolve().relative_to(self.root) if os.path.isabs(path) else Path(path)
        except ValueError:
            return False
        parts = rel.parts
        if not parts or parts[0] in _SKIP_DIRS:
            return False
        return not self.ignore.is_ignored(rel.as_posix())

    def take(self) -> tuple[bool, float]:
        """(dirty, last_event) and reset dirty: the caller is about to snapshot."""
        with self.lock:
            dirty, last = self.dirty, self.last_event
            self.dirty = False
            return dirty, last

    def peek(self) -> tuple[bool, float]:
        with self.lock:
            return self.dirty, self.last_event

    def mark_dirty(self) -> None:
        with self.lock:
            self.dirty = True
            self.last_event = time.monotonic()

    def start(self) -> None:
        from watchdog.events import FileSystemEventHandler

        monitor = self

        class Handler(FileSystemEventHandler):
            def on_any_event(self, event: Any) -> None:
                if getattr(event, "event_type", "") in ("opened", "closed_no_write"):
                    return
                monitor._on_event(event)

        try:
            from watchdog.observers import Observer

            observer = Observer()
            observer.schedule(Handler(), str(self.root), recursive=True)
            observer.start()
        except OSError as exc:
            from watchdog.observers.polling import PollingObserver

            self.notice(f"file events unavailable ({exc.strerror or exc}); polling {self.root} instead "
                        "(raise fs.inotify.max_user_watches to avoid this)")
            observer = PollingObserver(timeout=1.0)
            observer.schedule(Handler(), str(self.root), recursive=True)
            observer.start()
            self.polling = True
        self._observer = observer

    def stop(self) -> None:
        if self._observer is not None:
            self._observer.stop()
            self._observer.join(timeout=5)
            self._observer = None
