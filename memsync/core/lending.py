"""A work tree lent to another user (`run --as-user`) and taken back, through descriptors only.

The hand-over is run/runas.py's; the taking back lives here, below the memory, because it is done
either by the run itself when its command ends, or, when that run's memsync was killed, by the
next command as root (core/orphans.py), before it touches the tree.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from memsync.errors import RepoError
from memsync.util.records import field, recordclass

__all__ = ["Lent", "entries", "hand_back", "lent_fields", "lent_from", "open_entry"]

_OWN = (".git", ".vm0")


@recordclass(frozen=True)
class Lent:
    """What hand_over changed, for hand_back: the root folder's owner, group, mode and identity,
    the mode of every entry it lent (by path) and of memsync's own .git and .vm0."""
    uid: int
    gid: int
    mode: int
    dev: int
    ino: int
    modes: dict[str, tuple[int, int]] = field(default_factory=dict)  # path -> (file type, mode)
    own: dict[str, int] = field(default_factory=dict)  # .git / .vm0 -> mode


_ENTRY_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC


def entries(root_fd: int) -> Iterator[tuple[str, int, str]]:
    """(path, folder descriptor, name) of every entry of the work tree but .git and .vm0.
    os.fwalk opens each folder relative to its parent's descriptor and checks it is the folder
    it listed, so a folder swapped for a symlink is never entered."""
    for here, dirs, files, _fd in os.fwalk(".", dir_fd=root_fd, follow_symlinks=False):
        if here == ".":
            dirs[:] = [d for d in dirs if d not in _OWN]
            files = [f for f in files if f not in _OWN]
        prefix = "" if here == "." else here[2:] + "/"
        for name in dirs + files:
            yield prefix + name, _fd, name


def open_entry(folder: int, name: str) -> int | None:
    """A descriptor of the entry itself (never what a symlink names); None for a symlink, a
    socket, or an entry gone meanwhile."""
    try:
        return os.open(name, _ENTRY_FLAGS, dir_fd=folder)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOENT, errno.ENXIO, errno.EOPNOTSUPP):
            return None
        raise




def lent_fields(lent: Lent) -> dict[str, object]:
    """What the run's mark keeps of a hand-over: the root folder's and .git's / .vm0's, not every
    entry's mode (a tree of 100,000 files); a later taking back gives those the umask's modes."""
    return {"uid": lent.uid, "gid": lent.gid, "mode": lent.mode, "dev": lent.dev, "ino": lent.ino, "own": lent.own}


def lent_from(data: object) -> Lent | None:
    """The Lent a run's mark recorded (lent_fields), or None if it holds none memsync wrote."""
    if not isinstance(data, dict):
        return None
    try:
        own = {str(k): int(v) for k, v in dict(data.get("own") or {}).items() if k in _OWN}
        return Lent(int(data["uid"]), int(data["gid"]), int(data["mode"]) & 0o7777, int(data["dev"]),
                    int(data["ino"]), {}, own)
    except (KeyError, TypeError, ValueError):
        return None


def _umask() -> int:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o022


def hand_back(root: Path, lent: Lent, uid: int) -> None:
    """Give the work tree back: every entry the user owns (or that was lent) becomes the
    operator's again, with the mode it had when lent, or for a new entry the mode the operator's
    umask gives (no set-id or sticky bit); .git and .vm0 get their modes back. Refused
    (RepoError) if the root folder is not the one lent. The user's processes are ended first
    (util/processes.end_user), so nothing moves meanwhile; all the same, nothing is reached through a
    symlink."""
    from memsync.core.readonly import check_same_folder

    check_same_folder(root, (lent.dev, lent.ino))
    root_fd = os.open(root, _DIR_FLAGS | os.O_NOFOLLOW)
    try:
        st = os.fstat(root_fd)
        if (st.st_dev, st.st_ino) != (lent.dev, lent.ino):
            raise RepoError(f"{root} is no longer the memory's folder (replaced during the run); nothing was "
                            "changed there", "find the memory's folder where the command moved it")
        umask = _umask()
        for path, folder, name in entries(root_fd):
            fd = open_entry(folder, name)
            if fd is None:
                with contextlib.suppress(FileNotFoundError):
                    entry = os.stat(name, dir_fd=folder, follow_symlinks=False)
                    if entry.st_uid == uid:
                        os.chown(name, lent.uid, lent.gid, dir_fd=folder, follow_symlinks=False)
                continue
            try:
                _give_back(fd, lent, uid, path, umask)
            finally:
                os.close(fd)
        for own, mode in lent.own.items():
            fd = open_entry(root_fd, own)
            if fd is not None:
                try:
                    os.fchmod(fd, mode)
                finally:
                    os.close(fd)
        os.fchown(root_fd, lent.uid, lent.gid)
        os.fchmod(root_fd, lent.mode)
    finally:
        os.close(root_fd)


def _give_back(fd: int, lent: Lent, uid: int, path: str, umask: int) -> None:
    entry = os.fstat(fd)
    kind = stat.S_IFMT(entry.st_mode)
    was = lent.modes.get(path)
    if entry.st_uid != uid and was is None:
        return  # not the user's and not lent: someone else's file (a hard link), left alone
    if was is not None and was[0] == kind:
        mode = was[1]
    elif kind == stat.S_IFDIR or entry.st_mode & 0o100:
        mode = 0o777 & ~umask
    else:
        mode = 0o666 & ~umask
    if (entry.st_uid, entry.st_gid) != (lent.uid, lent.gid):
        os.fchown(fd, lent.uid, lent.gid)  # first: a chown clears set-id bits, the chmod sets the mode
    if stat.S_IMODE(entry.st_mode) != mode or entry.st_mode & 0o7000:
        os.fchmod(fd, mode)


