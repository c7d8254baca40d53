"""Noticing changes in a memory directory (inotify), without commit loops.

Events under `.git/` and `.vm0/`, and paths git ignores (editor swap files, write-then-rename temp
files, `.gitignore`d paths), never count as changes. One inotify instance watches every folder of
the work tree but `.git` and `.vm0` (the same library and approach as `memsync serve`'s change
trackers, serve/tracker.py); where inotify is not available (not Linux) or the system runs out of
watches, the monitor polls the tree's file sizes and times instead, and says so.
"""

from __future__ import annotations

import contextlib
import errno
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any

from memsync.git.repo import IgnoreRules, tree_blob_id

_api: Any = None  # inotify_simple, loaded when a monitor first starts; False where unavailable


def _inotify() -> Any:
    """inotify_simple, or None (not Linux, or no inotify in this libc). Loaded on first use: a
    run watches only once its command has lasted a moment, and most commands end before."""
    global _api
    if _api is None:
        try:
            import inotify_simple
        except (ImportError, OSError):
            _api = False
        else:
            _api = inotify_simple
    return _api or None


def _mask(flags: Any) -> int:
    # Reads (open / close-without-write) are not subscribed to: an agent or the initial scan
    # reading 10,000 files would otherwise flood the queue.
    return int(flags.MODIFY | flags.ATTRIB | flags.CLOSE_WRITE | flags.CREATE | flags.DELETE | flags.MOVED_FROM
               | flags.MOVED_TO | flags.DELETE_SELF | flags.MOVE_SELF | flags.ONLYDIR | flags.DONT_FOLLOW
               | flags.EXCL_UNLINK)

_SKIP_DIRS = (".git", ".vm0")
EXPECT_FOR = 10.0  # seconds memsync's own writes (a checkout) are recognised as such
_MAX_PATHS = 10_000
POLL_EVERY = 1.0  # seconds between two looks at the tree when polling


class _OutOfWatches(Exception):
    pass


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
        self._inotify: Any = None
        self._dirs: dict[int, str] = {}  # watch descriptor -> folder (relative, "" the root)
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
        api = _inotify()
        if api is not None:
            try:
                self._inotify = api.INotify()
                self._watch_tree("")
            except (OSError, _OutOfWatches) as exc:
                self._close_inotify()
                reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
                self.notice(f"file events unavailable ({reason}); polling {self.root} instead "
                            "(raise fs.inotify.max_user_watches to avoid this)")
        if self._inotify is None:
            self.polling = True
            self._stamp = self._tree_stamp()
        self._thread = threading.Thread(target=self._loop, name="memsync-changes", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        self._close_inotify()

    # -- inotify ------------------------------------------------------------------------------------
    def _watch_tree(self, top: str) -> None:
        """A watch on `top` and every folder below it but .git/.vm0: each watch is added before its
        folder is listed, so a folder made meanwhile is either listed or reported."""
        assert self._inotify is not None
        mask = _mask(_inotify().flags)
        stack = [top]
        while stack:
            rel = stack.pop()
            full = os.path.join(self.root, rel) if rel else str(self.root)
            try:
                wd = self._inotify.add_watch(full, mask)
            except OSError as exc:
                if rel and exc.errno in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP):
                    continue  # gone already (or a symlink now): its parent's event names it
                if exc.errno == errno.ENOSPC:
                    raise _OutOfWatches("out of inotify watches") from exc
                raise
            self._dirs[wd] = rel
            with contextlib.suppress(OSError), os.scandir(full) as entries:
                for entry in entries:
                    if not rel and entry.name in _SKIP_DIRS:
                        continue
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(f"{rel}/{entry.name}" if rel else entry.name)

    def _close_inotify(self) -> None:
        if self._inotify is not None:
            with contextlib.suppress(OSError):
                self._inotify.close()
            self._inotify = None
        self._dirs = {}

    def _loop(self) -> None:
        while not self._stopping.is_set():
            try:
                if self._inotify is not None:
                    self._read_events()
                else:
                    self._poll()
            except Exception:  # the thread must live on, or no more checkpoints: the next scan finds what changed
                self.mark_dirty()
                if self._inotify is None:
                    self._stopping.wait(POLL_EVERY)

    def _read_events(self) -> None:
        assert self._inotify is not None
        try:
            events = self._inotify.read(timeout=200)
        except _OutOfWatches:
            raise
        except OSError:
            self._fall_back("the event queue could not be read")
            return
        found: list[str] = []
        flags = _inotify().flags
        for event in events:
            if event.mask & flags.Q_OVERFLOW:
                self.mark_dirty()  # events were lost: the next scan looks at everything
                continue
            if event.mask & flags.IGNORED:
                self._dirs.pop(event.wd, None)
                continue
            folder = self._dirs.get(event.wd)
            if folder is None or event.mask & (flags.DELETE_SELF | flags.MOVE_SELF):
                continue  # the folder's own end: its parent's event names it
            path = f"{folder}/{event.name}" if folder else event.name
            if event.mask & flags.ISDIR:
                if not folder and event.name in _SKIP_DIRS:
                    continue
                if event.mask & (flags.CREATE | flags.MOVED_TO):
                    try:
                        self._watch_tree(path)
                    except _OutOfWatches:
                        self._fall_back("out of inotify watches")
                        return
                    self.mark_dirty()  # what was moved in with it is found by the next scan
                    continue
                if event.mask & flags.ATTRIB or event.mask & flags.MODIFY:
                    continue  # a folder's own mtime: the event for the file inside it is what counts
            found.append(path)
        if found:
            self._on_paths(found)

    def _fall_back(self, reason: str) -> None:
        self._close_inotify()
        self.polling = True
        self._stamp = self._tree_stamp()
        self.notice(f"file events unavailable ({reason}); polling {self.root} instead")
        self.mark_dirty()

    # -- polling --------------------------------------------------------------------------------
    def _poll(self) -> None:
        self._stopping.wait(POLL_EVERY)
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
