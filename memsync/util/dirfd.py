"""Reaching files under a work tree that someone else can write, without following a symlink.

memsync often runs as root over a tree an agent (another uid, `run --as-user`) is writing at the
same moment. A path checked with `lstat()` and then opened by name can have one of its folders
swapped for a symlink in between, and root would read, write or chown what the symlink names
(`/etc/shadow`, root's SSH keys). So every step here starts from a descriptor of the tree's root
and goes one name at a time with `O_NOFOLLOW`: a symlink or a file where a folder should be stops
the walk (ELOOP / ENOTDIR), and the last name is opened or changed relative to its folder's
descriptor (`openat`, `fstatat`, `readlinkat`, `renameat` with no-follow flags).

`Tree` keeps the descriptors of the folders on the way to the last path asked for, so reading
the changed files of one folder (paths come sorted) costs no more system calls than by name.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from pathlib import Path, PurePosixPath
from types import TracebackType

from memsync.util.fs import atomic_write, pid_alive

__all__ = ["OUTSIDE", "Tree", "is_outside", "special_kind", "specials_on_the_way"]

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
# errors that mean "a symlink or a file stands where a folder should be, or the path is gone":
# for the caller, the path does not exist as a file of this tree
OUTSIDE = frozenset({errno.ENOENT, errno.ENOTDIR, errno.ELOOP})


def is_outside(exc: OSError) -> bool:
    """The path is not (or no longer) a file inside the tree: missing, or behind a symlink/file."""
    return exc.errno in OUTSIDE


def special_kind(mode: int) -> str | None:
    """"a FIFO", "a socket", "a device" for a file no one may open for a blocking read (an open
    of a FIFO waits for a writer, a device's may do anything); None for a file, folder or link."""
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return None


def specials_on_the_way(root: Path | str, paths: list[str]) -> dict[str, str]:
    """Of `paths` (under `root`), those at which, or on whose way, stands a FIFO, socket or
    device, with what stands there: libgit2 opens a file at a path it checks out to see whether
    it was changed, and that open would wait for ever on a FIFO. Reached without following links."""
    found: dict[str, str] = {}
    with Tree(root) as tree:
        for rel in paths:
            parts = PurePosixPath(rel).parts
            for depth in range(1, len(parts) + 1):
                try:
                    kind = special_kind(tree.lstat("/".join(parts[:depth])).st_mode)
                except OSError:
                    break
                if kind is not None:
                    found[rel] = kind
                    break
    return found


def _parts(rel: str) -> tuple[str, ...]:
    parts = PurePosixPath(rel).parts
    if not parts or any(p in ("", ".", "..") or "/" in p for p in parts) or rel.startswith("/"):
        raise OSError(errno.EINVAL, "not a path inside the tree", rel)
    return parts


class Tree:
    """A work tree reached through descriptors; use as a context manager (closes them)."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)
        # the root itself is the operator's path and may be reached through a symlink
        self.fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        self._chain: list[tuple[str, int]] = []  # (name, fd) of the folders below the root last walked

    def __enter__(self) -> Tree:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        self._drop(0)
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def _drop(self, keep: int) -> None:
        while len(self._chain) > keep:
            os.close(self._chain.pop()[1])

    def folder(self, parts: tuple[str, ...], create: bool = False) -> int:
        """The descriptor of the folder `parts` (names below the root), each reached without
        following a symlink; missing ones are made (mode 0777 less the umask) if `create`.
        The descriptor belongs to the Tree: never close it. OSError (ELOOP, ENOTDIR, ENOENT)
        if a symlink, a file or nothing stands on the way."""
        same = 0
        while same < min(len(parts), len(self._chain)) and self._chain[same][0] == parts[same]:
            same += 1
        self._drop(same)
        here = self._chain[-1][1] if self._chain else self.fd
        for name in parts[same:]:
            try:
                fd = os.open(name, _DIR_FLAGS, dir_fd=here)
            except FileNotFoundError:
                if not create:
                    raise
                with contextlib.suppress(FileExistsError):  # made meanwhile: the no-follow open tells by whom
                    os.mkdir(name, 0o777, dir_fd=here)
                fd = os.open(name, _DIR_FLAGS, dir_fd=here)
            self._chain.append((name, fd))
            here = fd
        return here

    def parent(self, rel: str, create: bool = False) -> tuple[int, str]:
        """(descriptor of the folder holding `rel`, the last name of `rel`)."""
        parts = _parts(rel)
        return self.folder(parts[:-1], create), parts[-1]

    # reading ---------------------------------------------------------------------------------
    def lstat(self, rel: str) -> os.stat_result:
        fd, name = self.parent(rel)
        return os.stat(name, dir_fd=fd, follow_symlinks=False)

    def readlink(self, rel: str) -> bytes:
        fd, name = self.parent(rel)
        return os.fsencode(os.readlink(name, dir_fd=fd))

    def read(self, rel: str, limit: int) -> tuple[bytes, os.stat_result] | None:
        """The bytes of the regular file at `rel` and its stat after the read; None if it is not
        a regular file (now), or grew past `limit` bytes. Never blocks on a FIFO."""
        fd, name = self.parent(rel)
        handle = os.open(name, _READ_FLAGS, dir_fd=fd)
        try:
            st = os.fstat(handle)
            if not stat.S_ISREG(st.st_mode) or st.st_size > limit:
                return None
            chunks: list[bytes] = []
            total = 0
            while True:
                chunk = os.read(handle, max(st.st_size - total, 0) + 65536)
                if not chunk:
                    break
                total += len(chunk)
                if total > limit:
                    return None
                chunks.append(chunk)
            return b"".join(chunks), os.fstat(handle)
        finally:
            os.close(handle)

    # writing ---------------------------------------------------------------------------------
    def place(self, rel: str, data: bytes, mode: int) -> bool:
        """Put exactly `data` at `rel` as git's `mode` says (a symlink whose target is `data`, or
        a file, executable or not), written beside it and renamed over whatever is there (never
        written through: fs.atomic_write in the folder's descriptor). Missing folders are made.
        False, nothing written, if a symlink or a file stands where a folder should be, or a
        folder stands at `rel`."""
        try:
            fd, name = self.parent(rel, create=True)
            try:
                if stat.S_ISDIR(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode):
                    return False
            except FileNotFoundError:
                pass
        except OSError as exc:
            if is_outside(exc):
                return False
            raise
        _remove_stale(fd, name)
        atomic_write(name, data, dir_fd=fd, link=stat.S_ISLNK(mode), create_mode=0o755 if mode & 0o111 else 0o644,
                     durable=False, temp=f".memsync-{os.getpid()}-{name}"[:255])
        return True

    def rename(self, rel: str, new: str) -> None:
        """Rename `rel` to `new` (both under the tree; the folders on the way must exist)."""
        src, old_name = self.parent(rel)
        src = os.dup(src)  # the walk to `new` may close the chain `src` is in
        try:
            dst, new_name = self.parent(new)
            os.rename(old_name, new_name, src_dir_fd=src, dst_dir_fd=dst)
        finally:
            os.close(src)

    def unlink(self, rel: str) -> None:
        """Remove the file or symlink at `rel` (a symlink itself, never what it names)."""
        fd, name = self.parent(rel)
        os.unlink(name, dir_fd=fd)

    @staticmethod
    def _remove(fd: int, name: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name, dir_fd=fd)


def _remove_stale(folder: int, name: str) -> None:
    """Remove the copies of `name` a memsync killed while writing it left in `folder`
    (`.memsync-<pid>-<name>`, its pid gone): git ignores them, so nothing else ever would."""
    suffix = f"-{name}"
    with contextlib.suppress(OSError), os.scandir(folder) as entries:
        for entry in entries:
            pid = entry.name.removeprefix(".memsync-").removesuffix(suffix)
            if (entry.name.startswith(".memsync-") and entry.name.endswith(suffix) and pid.isdigit()
                    and int(pid) != os.getpid() and not pid_alive(int(pid)) and entry.is_file(follow_symlinks=False)):
                Tree._remove(folder, entry.name)
