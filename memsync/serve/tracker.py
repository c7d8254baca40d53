"""Change trackers: which paths of a memory's work tree were touched, for `memsync serve`.

The resident server keeps one watchdog observer (observer.py: inotify) on each memory its
commands used (the first scan of a memory starts it), and numbers the events it delivers. A
worker's scan asks "what may have changed since the last baseline?" and hands its result back as
the new baseline (git/hints.py says why that is exact). Events arrive on the observer's threads,
a moment after the change; so before it answers, the tracker flushes: it makes a cookie file in
the memory's .git (treewatch.py) and waits until the observer has delivered that file's event.
inotify queues an event inside the system call that made the change, in order, so every change
made before the question is then in the answer. If the cookie's event does not come within
`Limits.flush_wait`, the answer says nothing of paths and the scan is a full one.

Whenever the tracker cannot be sure, it starts over, which drops the baseline, and the next scan
is a full one:
- the kernel's event queue overflowed;
- a folder was moved or renamed, or one moved in or out (the watches are then set up again);
- the memory's root, or its .git, was removed, moved or replaced (likewise);
- more paths were touched than a narrowed scan would save (`Limits.max_paths`).
And every `Limits.full_every` seconds a scan is a full one anyway: what inotify cannot see
(below) waits at most that long.
While a folder of the memory holds a repository of its own (a .git), or a .gitignore or
.gitattributes is a symlink, scans are never narrowed.
A memory with more than `Limits.max_dirs` folders, with a folder that cannot be watched (out of
inotify watches, or unreadable), on a file system not known to be local (LOCAL_FILESYSTEMS: a
network or FUSE file system can change without an event here), or with another file system
mounted inside it, is not tracked; its scans stay full ones. Neither is one where watchdog has no
native observer that reports lost events (observer.py: Linux only); polling is never a tracker.

What inotify cannot see, a tracker cannot either: writes through a shared memory map, and writes
to a file through another of its hard links (the event names only the path written through).
docs/SECURITY.md says what that means for a run's record.
"""

from __future__ import annotations

import os
import stat
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from memsync.git import hints
from memsync.serve import treewatch
from memsync.serve.treewatch import LOCAL_FILESYSTEMS, Unwatchable, filesystem
from memsync.util.records import recordclass

__all__ = ["LOCAL_FILESYSTEMS", "Limits", "Tracker", "Trackers", "Unwatchable", "filesystem"]

_QUIET = frozenset({"opened", "closed_no_write"})  # reads


@recordclass(frozen=True)
class Limits:
    """A tracker's windows and sizes; the defaults are the server's."""

    full_every: float = 300.0  # seconds: a baseline older than this (since its last full scan) is not used
    max_dirs: int = 20_000  # folders tracked per memory
    max_paths: int = hints.MAX_PATHS  # paths a narrowed scan is given at most (twice that touched: start over)
    flush_wait: float = 2.0  # seconds `since` waits for its cookie's event (docs/PERFORMANCE.md: far less)
    max_memories: int = 16  # memories tracked at once (the least recently used is dropped)
    retry: float = 60.0  # seconds before a memory that could not be tracked is tried again


@recordclass(frozen=True)
class Baseline:
    token: int
    tree: str
    fingerprint: str
    paths: frozenset[str]
    full_at: float  # when the full scan this baseline descends from ran (time.monotonic())


def _in_repo(rel: str | None) -> bool:
    """Inside the memory's own .git (not .git itself), or outside the memory."""
    return rel is None or rel.startswith(".git/")


class Tracker:
    """The watch on one work tree, and the paths touched since each event number. Events are
    taken on the observer's thread; `since` and `hand_back` are called on the server's."""

    def __init__(self, root: str, limits: Limits | None = None, cookie_name: Callable[[], str] | None = None) -> None:
        self.root = root
        self.limits = limits or Limits()
        self._cookie_name = cookie_name or treewatch.cookie_name
        self._prefix = root.rstrip("/") + "/"
        self.lock = threading.Lock()
        self.gen = 0  # the number of the last event taken
        self.reset_gen = 0  # baselines older than this are void
        self.dirty: dict[str, int] = {}  # path -> number of the last event that touched it
        self.baseline: Baseline | None = None
        self.dirs = 0
        self.nested: set[str] = set()  # folders holding a .git of their own
        self.linked_rules: set[str] = set()  # .gitignore/.gitattributes that are symlinks
        self.observer: Any = None
        self._epoch = 0  # events of an observer replaced since are dropped
        self._stale: str | None = None  # why the watches must be set up again
        self._lost: str | None = None  # why this memory cannot be tracked any more
        self._awaiting: tuple[str, threading.Event] | None = None  # the flush's cookie
        self._fds = (-1, -1)  # the root and its .git
        self._identity = (0, 0, 0)
        self._start()

    # -- watching (the server's thread) ---------------------------------------------------------
    def _start(self) -> None:
        self.close()
        try:
            self._fds = treewatch.open_tree(self.root)
            root_st, git_st = os.fstat(self._fds[0]), os.fstat(self._fds[1])
            self._identity = (root_st.st_dev, root_st.st_ino, git_st.st_ino)
            treewatch.sweep_cookies(self._fds[1])
            treewatch.survey(self.root, root_st.st_dev, self.limits.max_dirs)  # too big: never watched
            self.observer = self._observe()
            # after the watches: a change meanwhile is either seen by this walk or reported
            found = treewatch.survey(self.root, root_st.st_dev, self.limits.max_dirs)
        except OSError as exc:
            self.close()
            raise Unwatchable(f"cannot watch {self.root}: {exc.strerror or exc}") from exc
        except BaseException:
            self.close()
            raise
        with self.lock:
            self.dirs = found.dirs
            self.nested |= found.nested  # | what events said meanwhile: at worst a full scan too many
            self.linked_rules |= found.linked
            self._forget()

    def _observe(self) -> Any:
        if not sys.platform.startswith("linux"):
            raise Unwatchable("no native file events that report lost ones (observer.py)")
        try:
            from memsync.serve import observer
        except (ImportError, OSError) as exc:  # watchdog without libc inotify
            raise Unwatchable(f"no inotify: {exc}") from exc
        with self.lock:
            self._epoch += 1
            epoch = self._epoch
            self._stale = self._lost = None
            self.nested, self.linked_rules = set(), set()
        return observer.observe(self.root, lambda event: self._event(epoch, event), lambda: self._overflowed(epoch),
                                lambda reason: self._unwatched(epoch, reason))

    def _forget(self) -> None:
        """Everything may have changed: no baseline until the next full scan (the lock is held)."""
        self.gen += 1
        self.reset_gen = self.gen
        self.baseline = None
        self.dirty.clear()

    def _tend(self) -> None:
        """Set the watches up again if they no longer name the tree as it is (Unwatchable: the
        memory cannot be tracked any more)."""
        with self.lock:
            lost, stale = self._lost, self._stale
        if lost:
            raise Unwatchable(lost)
        if stale or self._replaced() or not self.observer.healthy():
            self._start()

    def _replaced(self) -> bool:
        try:
            root_st = os.lstat(self.root)
            git_st = os.lstat(os.path.join(self.root, ".git"))
        except OSError:
            return True
        return (root_st.st_dev, root_st.st_ino, git_st.st_ino) != self._identity or not stat.S_ISDIR(git_st.st_mode)

    def close(self) -> None:
        observer, self.observer = self.observer, None
        if observer is not None:
            from memsync.serve.observer import stop

            stop(observer)
        self.abandon()

    def abandon(self) -> None:
        """Close the descriptors only (what a forked worker does: the observer's threads were not copied)."""
        fds, self._fds = self._fds, (-1, -1)
        for fd in fds:
            if fd >= 0:
                os.close(fd)

    def _flush(self) -> bool:
        """Make the cookie and wait for its event: then every event before it has been taken."""
        name, arrived = self._cookie_name(), threading.Event()
        with self.lock:
            self._awaiting = (name, arrived)
        made = treewatch.make_cookie(self._fds[1], name)
        try:
            return made and arrived.wait(self.limits.flush_wait)
        finally:
            with self.lock:
                self._awaiting = None
            if made:
                treewatch.remove_cookie(self._fds[1], name)

    # -- events (the observer's thread) ---------------------------------------------------------
    def _overflowed(self, epoch: int) -> None:
        with self.lock:
            if epoch == self._epoch:
                self._forget()

    def _unwatched(self, epoch: int, reason: str) -> None:
        with self.lock:
            if epoch == self._epoch:
                self._lost = reason

    def _event(self, epoch: int, event: Any) -> None:
        kind = event.event_type
        if kind in _QUIET:
            return
        try:
            src = self._rel(event.src_path)
            dest = self._rel(event.dest_path) if kind == "moved" else None
            with self.lock:
                if epoch != self._epoch:
                    return
                if kind == "moved" and event.is_directory and not (_in_repo(src) and _in_repo(dest)):
                    # watchdog follows a folder moved inside the tree, and reports what one moved in holds,
                    # but start over all the same (src or dest is None: moved in or out)
                    self._stale = "a folder was moved"
                for rel, arriving in ((src, kind != "deleted" and kind != "moved"), (dest, True)):
                    if rel is not None:
                        self._take(kind, bool(event.is_directory), rel, arriving)
        except Exception:  # never let an event stop the observer's thread: start over instead
            with self.lock:
                self._stale = "an event could not be taken"

    def _rel(self, path: str | bytes) -> str | None:
        text = os.fsdecode(path)
        if text == self.root:
            return ""
        return text[len(self._prefix):] if text.startswith(self._prefix) else None

    def _take(self, kind: str, is_dir: bool, rel: str, arriving: bool) -> None:
        """One path of one event (the lock is held)."""
        if not rel:
            if kind == "deleted":
                self._stale = "the memory's folder was removed"
            elif kind == "attrib":
                self._forget()  # the root's own mode: what is below may read differently
            return
        parts = rel.split("/")
        if parts[0] == ".git":
            if len(parts) == 1 and kind in ("created", "deleted", "moved"):
                self._stale = "the repository was replaced"
            elif len(parts) == 2 and kind == "created" and self._awaiting and parts[1] == self._awaiting[0]:
                self._awaiting[1].set()
            return
        if ".git" in parts:  # a repository inside the memory: git reports its folder
            folder = "/".join(parts[:parts.index(".git")])
            if os.path.lexists(os.path.join(self.root, folder, ".git")):
                self.nested.add(folder)
            else:
                self.nested.discard(folder)
            self._touch(folder)
            return
        if is_dir and kind == "modified":
            return  # watchdog's note on a folder whose entries changed: their own events name them
        if is_dir and kind == "created" and arriving:
            self._new_folder(rel)
        elif is_dir and kind == "deleted":
            self.dirs -= 1
        elif parts[-1] in hints.RULE_FILES:  # a symlinked one changes with its target, unseen
            if os.path.islink(os.path.join(self.root, rel)):
                self.linked_rules.add(rel)
            else:
                self.linked_rules.discard(rel)
        self._touch(rel)

    def _new_folder(self, rel: str) -> None:
        """A folder made or moved in (watchdog watches it, then reports what it holds)."""
        self.dirs += 1
        if self.dirs > self.limits.max_dirs:
            self._lost = f"more than {self.limits.max_dirs} folders"
            return
        full = os.path.join(self.root, rel)
        try:
            with os.scandir(full) as entries:
                for entry in entries:
                    if entry.name == ".git":
                        self.nested.add(rel)
                    elif entry.name in hints.RULE_FILES and entry.is_symlink():
                        self.linked_rules.add(f"{rel}/{entry.name}")
        except OSError:
            return  # gone already: its own event says so

    def _touch(self, rel: str) -> None:
        self.gen += 1
        self.dirty[rel] = self.gen
        if len(self.dirty) > 2 * self.limits.max_paths:
            self._forget()

    # -- what a worker asks and tells (the server's thread) -------------------------------------
    def since(self) -> dict[str, Any]:
        self._tend()
        flushed = self._flush()
        self._tend()  # what the flush brought in may say: start over, or stop
        with self.lock:
            reply: dict[str, Any] = {"token": self.gen}
            base = self.baseline
            if (not flushed or base is None or base.token < self.reset_gen or self.nested or self.linked_rules
                    or time.monotonic() - base.full_at > self.limits.full_every):
                # Not every event taken yet; no baseline; a repository inside this one (libgit2
                # narrowed may not report it as a full diff does: tests/servers/test_tracker.py
                # found such trees); or a rule file that is a symlink (its target changes the
                # rules without an event for the rule file itself).
                return reply
            paths = set(base.paths)
            paths.update(p for p, n in self.dirty.items() if n > base.token)
            if len(paths) <= self.limits.max_paths:
                reply.update(tree=base.tree, fingerprint=base.fingerprint, paths=sorted(paths))
            return reply

    def hand_back(self, token: int, tree: str, fingerprint: str, paths: list[str], full: bool) -> None:
        with self.lock:
            if token < self.reset_gen or (self.baseline is not None and token < self.baseline.token):
                return  # a scan that started before what is known now
            if full:
                full_at = time.monotonic()
            elif self.baseline is not None:
                full_at = self.baseline.full_at
            else:
                return
            self.baseline = Baseline(token, tree, fingerprint, frozenset(paths), full_at)
            self.dirty = {p: n for p, n in self.dirty.items() if n > token}


class Trackers:
    """The server's trackers, one per memory, started by the first scan that asks."""

    def __init__(self, enabled: bool = True, limits: Limits | None = None) -> None:
        self.enabled = enabled
        self.limits = limits or Limits()
        self.by_root: OrderedDict[str, Tracker] = OrderedDict()
        self._refused: dict[str, float] = {}

    def since(self, root: str) -> dict[str, Any] | None:
        tracker = self.by_root.get(root)
        if tracker is None:
            tracker = self._start(root)
            if tracker is None:
                return None
        self.by_root.move_to_end(root)
        try:
            return tracker.since()
        except Unwatchable:
            self.drop(root)
            return None

    def hand_back(self, root: str, token: int, tree: str, fingerprint: str, paths: list[str], full: bool) -> None:
        tracker = self.by_root.get(root)
        if tracker is not None:
            tracker.hand_back(token, tree, fingerprint, paths, full)

    def drop(self, root: str) -> None:
        tracker = self.by_root.pop(root, None)
        if tracker is not None:
            tracker.close()
            self._refused[root] = time.monotonic()

    def close(self) -> None:
        for tracker in self.by_root.values():
            tracker.close()
        self.by_root.clear()

    def abandon(self) -> None:
        """In a worker just forked from the server: let the trackers go without stopping their
        threads (only the forking thread is copied) or taking their locks (one may have been held
        at the fork), and close the descriptors they would leave open in the worker."""
        for tracker in self.by_root.values():
            tracker.abandon()
        self.by_root = OrderedDict()
        treewatch.close_inherited_watches()

    def _start(self, root: str) -> Tracker | None:
        if not self.enabled:
            return None
        refused = self._refused.get(root)
        if refused is not None and time.monotonic() - refused < self.limits.retry:
            return None
        if not os.path.isabs(root) or os.path.realpath(root) != root or not os.path.isdir(os.path.join(root, ".git")):
            return None
        if filesystem(root) not in LOCAL_FILESYSTEMS:
            self._refused[root] = time.monotonic()
            return None
        try:
            tracker = Tracker(root, self.limits)
        except (Unwatchable, OSError):
            self._refused[root] = time.monotonic()
            return None
        self._refused.pop(root, None)
        self.by_root[root] = tracker
        while len(self.by_root) > self.limits.max_memories:
            _, oldest = self.by_root.popitem(last=False)
            oldest.close()
        return tracker
