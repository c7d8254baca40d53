"""What a change tracker (tracker.py) looks at besides its events: the tree's folders, its flush
cookies, the file system it is on, and the descriptors a forked worker must not keep.

A flush cookie is an empty file `.git/memsync-flush-<pid>-<32 random hex digits>` of the memory:
the tracker's own watch sees it (it watches `.git` too), while no scan, status or commit ever
does (git never lists its own folder). It is made through a descriptor of `.git` opened without
following a link, with O_CREAT|O_EXCL|O_NOFOLLOW, so it is never written through a link an agent
planted, and never one that already existed; it is removed right after its event came. One left
by a server that was killed is removed by the next tracker of that memory (COOKIE_STALE).
docs/SECURITY.md ("The resident server") says why an agent cannot fake one.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import stat
import time

from memsync.git import hints
from memsync.util.records import recordclass

__all__ = ["COOKIE_PREFIX", "LOCAL_FILESYSTEMS", "Survey", "Unwatchable", "close_inherited_watches", "cookie_name",
           "filesystem", "make_cookie", "open_tree", "remove_cookie", "survey", "sweep_cookies"]

COOKIE_PREFIX = "memsync-flush-"
COOKIE_STALE = 60.0  # seconds: a cookie this old is a killed server's (a live one's lasts milliseconds)
# File systems whose every change is made by this kernel, so inotify reports it.
LOCAL_FILESYSTEMS = frozenset({"ext2", "ext3", "ext4", "xfs", "btrfs", "tmpfs", "overlay", "zfs", "f2fs",
                               "bcachefs", "reiserfs", "jfs", "ramfs", "nilfs2", "hfsplus", "vfat", "exfat",
                               "ntfs3"})
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class Unwatchable(Exception):
    """This memory cannot be tracked (any more)."""


@recordclass(frozen=True)
class Survey:
    dirs: int  # folders of the work tree (not .git's)
    nested: frozenset[str]  # folders holding a .git of their own
    linked: frozenset[str]  # .gitignore/.gitattributes that are symlinks


def survey(root: str, device: int, max_dirs: int) -> Survey:
    """The work tree's folders, walked without following links (Unwatchable: more than
    `max_dirs`, or another file system mounted inside)."""
    stack, dirs, nested, linked = [""], 0, set(), set()
    while stack:
        rel = stack.pop()
        full = os.path.join(root, rel) if rel else root
        try:
            if os.lstat(full).st_dev != device:
                raise Unwatchable(f"another file system is mounted at {full}")
        except FileNotFoundError:
            continue
        dirs += 1
        if dirs > max_dirs:
            raise Unwatchable(f"more than {max_dirs} folders")
        with contextlib.suppress(OSError), os.scandir(full) as entries:
            for entry in entries:
                if entry.name == ".git":
                    if rel:
                        nested.add(rel)
                elif entry.name in hints.RULE_FILES and entry.is_symlink():
                    linked.add(f"{rel}/{entry.name}" if rel else entry.name)
                elif entry.is_dir(follow_symlinks=False):
                    stack.append(f"{rel}/{entry.name}" if rel else entry.name)
    return Survey(dirs, frozenset(nested), frozenset(linked))


def open_tree(root: str) -> tuple[int, int]:
    """Descriptors of `root` and its `.git`, neither reached through a symlink (OSError)."""
    root_fd = os.open(root, _DIR_FLAGS)
    try:
        return root_fd, os.open(".git", _DIR_FLAGS, dir_fd=root_fd)
    except BaseException:
        os.close(root_fd)
        raise


def cookie_name() -> str:
    """Unique to this process and flush, and not to be guessed: an agent cannot make it first."""
    return f"{COOKIE_PREFIX}{os.getpid()}-{secrets.token_hex(16)}"


def make_cookie(git_fd: int, name: str) -> bool:
    """A new empty file `name` in the folder `git_fd`. False: something is there already (a file,
    or a link an agent planted, which is never followed), or it cannot be made."""
    try:
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=git_fd)
    except OSError:
        return False
    os.close(fd)
    return True


def remove_cookie(git_fd: int, name: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(name, dir_fd=git_fd)  # never follows a link


def sweep_cookies(git_fd: int, now: float | None = None) -> None:
    """Remove the cookies a killed server left (older than COOKIE_STALE)."""
    now = time.time() if now is None else now
    with contextlib.suppress(OSError), os.scandir(git_fd) as entries:
        for entry in entries:
            if not entry.name.startswith(COOKIE_PREFIX):
                continue
            with contextlib.suppress(OSError):
                st = entry.stat(follow_symlinks=False)
                if not stat.S_ISDIR(st.st_mode) and now - st.st_mtime > COOKIE_STALE:
                    os.unlink(entry.name, dir_fd=git_fd)


def close_inherited_watches(fds: str = "/proc/self/fd") -> None:
    """In a process forked from the server: close the inotify descriptors it inherited. watchdog
    makes them without close-on-exec, and a process reading one would take the server's events
    (so a tracker would miss a change)."""
    try:
        names = os.listdir(fds)
    except OSError:
        return
    for name in names:
        with contextlib.suppress(OSError, ValueError):
            if os.readlink(f"{fds}/{name}") == "anon_inode:inotify":
                os.close(int(name))


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
