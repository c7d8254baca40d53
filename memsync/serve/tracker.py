"""Change trackers: which paths of a memory's work tree were touched, for `memsync serve`.

The resident server keeps one inotify watch on every folder of each memory its commands used
(the first scan of a memory starts it), and numbers what it sees. A worker's scan asks "what may
have changed since the last baseline?" and hands its result back as the new baseline
(git/hints.py says why that is exact). The server reads the queue before it answers: inotify
queues an event inside the system call that changed the file, so every change a command could
have seen before asking is in the answer.

Whenever the tracker cannot be sure, it starts over, which drops the baseline, and the next scan
is a full one:
- the kernel's event queue overflowed;
- a watched folder was moved or renamed, or one moved in or out (its watch would name the old path);
- the memory's root, or its .git, was removed, moved or replaced;
- more paths were touched than a narrowed scan would save (`hints.MAX_PATHS`).
And every FULL_EVERY seconds a scan is a full one anyway: what inotify cannot see (below) waits
at most that long.
While a folder of the memory holds a repository of its own (a .git), or a .gitignore or
.gitattributes is a symlink, scans are never narrowed.
A memory with more than MAX_DIRS folders, where a watch cannot be added (out of inotify watches),
on a file system not known to be local (LOCAL_FILESYSTEMS: a network or FUSE file system can
change without an event here), or with another file system mounted inside it, is not tracked;
its scans stay full ones.

What inotify cannot see, a tracker cannot either: writes through a shared memory map, and writes to
a file through another of its hard links (the event names only the path written through).
docs/SECURITY.md says what that means for a run's record. Linux only; elsewhere (or without the
inotify_simple package) nothing is tracked.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import time
from collections import OrderedDict
from typing import Any

from memsync.git import hints
from memsync.util.records import recordclass

__all__ = ["LOCAL_FILESYSTEMS", "MAX_DIRS", "MAX_MEMORIES", "Tracker", "Trackers", "filesystem"]

MAX_DIRS = 20_000  # folders watched per memory
MAX_MEMORIES = 16  # memories tracked at once (the least recently used is dropped)
FULL_EVERY = 300.0  # seconds: a baseline older than this (since its last full scan) is not used
_RETRY = 60.0  # seconds before a memory that could not be watched is tried again
# File systems whose every change is made by this kernel, so inotify reports it.
LOCAL_FILESYSTEMS = frozenset({"ext2", "ext3", "ext4", "xfs", "btrfs", "tmpfs", "overlay", "zfs", "f2fs",
                               "bcachefs", "reiserfs", "jfs", "ramfs", "nilfs2", "hfsplus", "vfat", "exfat",
                               "ntfs3"})

try:
    from inotify_simple import INotify, flags
except (ImportError, OSError):  # pragma: no cover - not Linux, or no libc inotify
    INotify = None
    MASK = 0
else:
    MASK = (flags.MODIFY | flags.ATTRIB | flags.CREATE | flags.DELETE | flags.MOVED_FROM | flags.MOVED_TO
            | flags.DELETE_SELF | flags.MOVE_SELF | flags.ONLYDIR | flags.DONT_FOLLOW | flags.EXCL_UNLINK)


class _Restart(Exception):
    """The watches no longer name the tree as it is: start over."""


class _Lost(Exception):
    """This memory cannot be tracked (any more)."""


@recordclass(frozen=True)
class Baseline:
    token: int
    tree: str
    fingerprint: str
    paths: frozenset[str]
    full_at: float  # when the full scan this baseline descends from ran (time.monotonic())


class Tracker:
    """The watches of one work tree, and the paths touched since each event number."""

    def __init__(self, root: str) -> None:
        if INotify is None:
            raise _Lost("inotify is not available")
        self.root = root
        self.device = os.stat(root).st_dev
        self.gen = 0  # the number of the last event seen
        self.reset_gen = 0  # baselines older than this are void
        self.dirty: dict[str, int] = {}  # path -> number of the last event that touched it
        self.baseline: Baseline | None = None
        self.inotify: Any = None
        self.dirs: dict[int, str] = {}  # watch descriptor -> folder, relative to root ("" is root)
        self.nested: set[str] = set()  # folders holding a .git of their own
        self.linked_rules: set[str] = set()  # .gitignore/.gitattributes that are symlinks
        self._start()

    # -- watching ---------------------------------------------------------------------------
    def _start(self) -> None:
        self.close()
        self.inotify = INotify(nonblocking=True)
        self.dirs, self.nested, self.linked_rules = {}, set(), set()
        try:
            self._watch_tree("")
        except BaseException:
            self.close()
            raise
        self._forget()

    def _forget(self) -> None:
        """Everything may have changed: no baseline until the next full scan."""
        self.gen += 1
        self.reset_gen = self.gen
        self.baseline = None
        self.dirty.clear()

    def _watch_tree(self, top: str) -> None:
        """A watch on `top` and every folder below it (not .git): each watch is added before its
        folder is listed, so a folder made meanwhile is either listed or reported."""
        stack = [top]
        while stack:
            rel = stack.pop()
            full = os.path.join(self.root, rel) if rel else self.root
            try:
                wd = self.inotify.add_watch(full, MASK)
            except OSError as exc:
                if rel and exc.errno in (errno.ENOENT, errno.ENOTDIR):
                    continue  # gone already: its parent's event names it
                raise _Lost(f"cannot watch {full}: {exc.strerror}") from exc
            self.dirs[wd] = rel
            if len(self.dirs) > MAX_DIRS:
                raise _Lost(f"more than {MAX_DIRS} folders")
            try:
                if os.stat(full, follow_symlinks=False).st_dev != self.device:
                    raise _Lost(f"another file system is mounted at {full}")
            except FileNotFoundError:
                continue
            with contextlib.suppress(OSError), os.scandir(full) as entries:
                for entry in entries:
                    if entry.name == ".git":
                        if rel:
                            self.nested.add(rel)
                    elif entry.name in hints.RULE_FILES and entry.is_symlink():
                        self.linked_rules.add(f"{rel}/{entry.name}" if rel else entry.name)
                    elif entry.is_dir(follow_symlinks=False):
                        stack.append(f"{rel}/{entry.name}" if rel else entry.name)

    def fileno(self) -> int:
        return int(self.inotify.fileno())

    def close(self) -> None:
        if self.inotify is not None:
            with contextlib.suppress(OSError):
                self.inotify.close()
            self.inotify = None

    # -- events -----------------------------------------------------------------------------
    def drain(self) -> None:
        """Take in every event queued so far (_Lost: the memory cannot be tracked any more)."""
        try:
            while True:
                events = self.inotify.read(timeout=0)
                if not events:
                    break
                for event in events:
                    self._take(event.wd, event.mask, event.name)
        except _Restart:
            self._start()
        except OSError as exc:
            raise _Lost(str(exc)) from exc
        if len(self.dirty) > 2 * hints.MAX_PATHS:
            self._forget()

    def _take(self, wd: int, mask: int, name: str) -> None:
        if mask & flags.Q_OVERFLOW:
            raise _Restart
        if mask & flags.IGNORED:
            self.dirs.pop(wd, None)  # the folder is gone; its parent's event named it
            return
        folder = self.dirs.get(wd)
        if folder is None:
            return
        if mask & (flags.DELETE_SELF | flags.MOVE_SELF):
            if not folder or mask & flags.MOVE_SELF:
                raise _Restart
            return
        path = f"{folder}/{name}" if folder else name
        if name == ".git":
            if not folder:
                raise _Restart  # the repository itself
            path = folder  # a repository inside the memory: git reports its folder
            if mask & (flags.CREATE | flags.MOVED_TO):
                self.nested.add(folder)
            elif mask & (flags.DELETE | flags.MOVED_FROM):
                self.nested.discard(folder)
        elif mask & flags.ISDIR:
            if mask & (flags.MOVED_FROM | flags.MOVED_TO):
                raise _Restart
            if mask & flags.CREATE:
                self._watch_tree(path)
        elif name in hints.RULE_FILES:  # a symlinked one changes with its target, unseen
            if os.path.islink(os.path.join(self.root, path)):
                self.linked_rules.add(path)
            else:
                self.linked_rules.discard(path)
        self.gen += 1
        self.dirty[path] = self.gen

    # -- what a worker asks and tells ---------------------------------------------------------
    def since(self) -> dict[str, Any]:
        self.drain()
        reply: dict[str, Any] = {"token": self.gen}
        base = self.baseline
        if (base is None or base.token < self.reset_gen or self.nested or self.linked_rules
                or time.monotonic() - base.full_at > FULL_EVERY):
            # No baseline; or a repository inside this one (libgit2 narrowed may not report it as
            # a full diff does: tests/servers/test_tracker.py found such trees), or a rule file that is a
            # symlink (its target changes the rules without an event for the rule file itself).
            return reply
        paths = set(base.paths)
        paths.update(p for p, n in self.dirty.items() if n > base.token)
        if len(paths) <= hints.MAX_PATHS:
            reply.update(tree=base.tree, fingerprint=base.fingerprint, paths=sorted(paths))
        return reply

    def settled(self, token: int, tree: str, fingerprint: str, paths: list[str], full: bool) -> None:
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

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
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
        except _Lost:
            self.drop(root)
            return None

    def settled(self, root: str, token: int, tree: str, fingerprint: str, paths: list[str], full: bool) -> None:
        tracker = self.by_root.get(root)
        if tracker is not None:
            tracker.settled(token, tree, fingerprint, paths, full)

    def drain(self, tracker: Tracker) -> None:
        if self.by_root.get(tracker.root) is not tracker:
            return  # dropped since the selector saw its descriptor ready
        try:
            tracker.drain()
        except _Lost:
            self.drop(tracker.root)

    def drop(self, root: str) -> None:
        tracker = self.by_root.pop(root, None)
        if tracker is not None:
            tracker.close()
            self._refused[root] = time.monotonic()

    def close(self) -> None:
        for tracker in self.by_root.values():
            tracker.close()
        self.by_root.clear()

    def _start(self, root: str) -> Tracker | None:
        if not self.enabled:
            return None
        refused = self._refused.get(root)
        if refused is not None and time.monotonic() - refused < _RETRY:
            return None
        if not os.path.isabs(root) or os.path.realpath(root) != root or not os.path.isdir(os.path.join(root, ".git")):
            return None
        if filesystem(root) not in LOCAL_FILESYSTEMS:
            self._refused[root] = time.monotonic()
            return None
        try:
            tracker = Tracker(root)
        except (_Lost, OSError):
            self._refused[root] = time.monotonic()
            return None
        self._refused.pop(root, None)
        self.by_root[root] = tracker
        while len(self.by_root) > MAX_MEMORIES:
            _, oldest = self.by_root.popitem(last=False)
            oldest.close()
        return tracker


def filesystem(path: str, mountinfo: str = "/proc/self/mountinfo") -> str | None:
    """The type of the file system `path` (absolute, resolved) is on; None if unknown."""
    try:
        with open(mountinfo, encoding="utf-8", errors="surrogateescape") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return None
    best, kind = "", None
    for line in lines:
        left, sep, right = line.partition(" - ")
        fields = left.split()
        if not sep or len(fields) < 5 or not right.split():
            continue
        point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4])  # \040 is a space
        inside = path == point or path.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):
            best, kind = point, right.split()[0]
    return kind
