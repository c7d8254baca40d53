"""Noticing changes in a memory directory (watchdog), without commit loops.

Events under `.git/` and `.vm0/`, and paths git ignores (editor swap files, write-then-rename temp
files, `.gitignore`d paths), never count as changes. One watchdog observer watches the work tree
(inotify on Linux, FSEvents on macOS, ReadDirectoryChangesW on Windows, kqueue on the BSDs: the
platform's own); where none can be set up (the system ran out of inotify watches, say), the
monitor polls the tree's file sizes and times instead, and says so. watchdog is imported only
when a monitor starts: a run starts its monitors after its command has lasted a moment
(run/session.py, _Watching), and most commands end before.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any

from memsync.git.repo import IgnoreRules, tree_blob_id
from memsync.util.threads import helper_body, stops_blocked

_SKIP_DIRS = (".git", ".vm0")
EXPECT_FOR = 10.0  # seconds memsync's own writes (a checkout) are recognised as such
_MAX_PATHS = 10_000
POLL_EVERY = 1.0  # seconds between two looks at the tree when polling


class ChangeMonitor:
    """Counts relevant file events below `root`; `dirty` and `last_event` drive checkpoints."""

    def __init__(self, root: Path, notice: Callable[[str], None] | None = None, *, poll_every: float = POLL_EVERY,
                 observe: Callable[[Path, Callable[[Any], None]], Any] | None = None) -> None:
        """`poll_every`: seconds between two looks when file events are unavailable; `observe`
        starts the file events (watchdog's observer, the default)."""
        self.root = root.resolve()
        self.poll_every = poll_every
        self._start_observer = observe or _observe
        self.notice = notice or (lambda _msg: None)
        self.ignore = IgnoreRules(self.root)
        self.lock = threading.Lock()
        self.dirty = False
        self.events = 0
        self.last_event = 0.0
        self.polling = False
        self._observer: Any = None  # watchdog's Observer while file events are seen
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._stamp: frozenset[tuple[str, int, int, int]] = frozenset()
        self.changed: set[str] = set()  # paths behind `dirty` (bounded); `_unknown`: not only those
        self._unknown = False
        self._expected: dict[str, str | None] = {}
        self._expected_until = 0.0

    # called from the monitor's thread
    def _on_paths(self, raw: list[str]) -> None:
        paths = [self._rel(p) for p in raw]
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
        self._stopping.clear()
        try:
            self._observer = self._start_observer(self.root, self._on_event)
        except Exception as exc:  # no watches to be had (out of inotify watches, no backend)
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc) or type(exc).__name__
            self.notice(f"file events unavailable ({reason}); polling {self.root} instead "
                        "(on Linux, raise fs.inotify.max_user_watches to avoid this)")
            self.polling = True
            self._stamp = self._tree_stamp()
            self._thread = threading.Thread(target=helper_body(self._loop), name="memsync-changes", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        observer, self._observer = self._observer, None
        if observer is not None:
            with contextlib.suppress(Exception):
                observer.stop()
                observer.join(timeout=5)

    # -- file events (watchdog's thread) --------------------------------------------------------
    def _on_event(self, event: Any) -> None:
        try:
            self._take_event(event)
        except Exception:  # never let an event stop the observer's thread: the next scan looks
            self.mark_dirty()

    def _take_event(self, event: Any) -> None:
        if event.event_type in ("opened", "closed_no_write") or (event.is_directory and event.event_type == "modified"):
            return  # reads, and a folder's own mtime: the event for the file inside it is what counts
        paths = [os.fsdecode(p) for p in (event.src_path, getattr(event, "dest_path", "")) if p]
        if event.is_directory and event.event_type in ("created", "moved") \
                and any(self._rel(p) is not None for p in paths):
            self.mark_dirty()  # what came in with a folder is found by the next scan
        self._on_paths(paths)

    def _loop(self) -> None:
        while not self._stopping.is_set():
            try:
                self._poll()
            except Exception:  # the thread must live on, or no more checkpoints: the next scan finds what changed
                self.mark_dirty()
                self._stopping.wait(self.poll_every)

    # -- polling --------------------------------------------------------------------------------
    def _poll(self) -> None:
        self._stopping.wait(self.poll_every)
        stamp = self._tree_stamp()
        if stamp != self._stamp:
            self._stamp = stamp
            self.mark_dirty()

    def _tree_stamp(self) -> frozenset[tuple[str, int, int, int]]:
        """(path, size, mtime, mode) of every entry but .git/.vm0, never following a symlink."""
        found: set[tuple[str, int, int, int]] = set()
        for here, dirs, files in os.walk(self.root):
            if Path(here) == self.root:
                dirs[:] = [d for d in dirs if d not in _SKIP_DIRS]
            for name in (*dirs, *files):
                path = os.path.join(here, name)
                with contextlib.suppress(OSError):
                    st = os.lstat(path)
                    found.add((path, st.st_size, st.st_mtime_ns, st.st_mode))
        return frozenset(found)


def _observe(root: Path, on_event: Callable[[Any], None]) -> Any:
    """A started watchdog observer calling `on_event` (on its own thread) for every event below
    `root`, .git and .vm0 included (`_rel` drops those: one recursive watch, not one per folder)."""
    from watchdog.events import FileSystemEvent, FileSystemEventHandler
    from watchdog.observers import Observer

    class Handler(FileSystemEventHandler):
        def on_any_event(self, event: FileSystemEvent) -> None:
            on_event(event)

    quiet_watchdog()
    with stops_blocked():  # its threads never take a stop signal the main thread must (util/threads.py)
        observer = Observer()
        observer.daemon = True
        try:
            observer.schedule(Handler(), str(root), recursive=True)
            observer.start()
        except BaseException:
            with contextlib.suppress(Exception):
                observer.stop()
            raise
    return observer


def quiet_watchdog() -> None:
    """watchdog logs a stopped emitter's last read (logger.error) and an overflowed inotify queue
    (a warning); with no handler configured Python's last resort would print them into the output
    of the command a run watches, or of `memsync serve`."""
    import logging

    quiet = logging.getLogger("watchdog")
    if not quiet.handlers:
        quiet.addHandler(logging.NullHandler())
