"""Every file operation of the agent-facing tools, relative to the memory's folder descriptor.

The memory tool and the MCP server check a path (it stays inside the memory, it is not memsync's
own data) and then act on it. Between the two, anything else writing in the memory (the agent's
own shell, another tool) can swap a file or a folder of that path for a symlink to a file outside
the memory. So after the check nothing is opened by name: each operation starts from a
descriptor of the memory's root and goes one name at a time with `O_NOFOLLOW` (util/dirfd.py), and
acts on the last name relative to its folder's descriptor. A symlink met on the way (or as the
last name) makes the operation fail with `Linked`, a file where a folder should be or nothing at
all with `Missing`; neither ever reads, writes or lists what a link names.

What the tools create is the operator's alone (0600 files, 0700 folders, whatever the umask).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from memsync.util.dirfd import Tree
from memsync.util.fs import atomic_write

FILE_MODE = 0o600
DIR_MODE = 0o700
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class Linked(OSError):
    """A symlink stands on the path (a folder or the last name) where the check found none."""


class Missing(OSError):
    """Nothing (or a file where a folder should be) stands on the path."""


class NotRegular(OSError):
    """The path is there but is not a regular file (a folder, a FIFO, a device)."""


def _translated(exc: OSError) -> OSError:
    if exc.errno in (errno.ELOOP, errno.EMLINK):  # FreeBSD says EMLINK for O_NOFOLLOW
        return Linked(exc.errno, "a symbolic link stands on the path")
    if exc.errno in (errno.ENOENT, errno.ENOTDIR):
        return Missing(exc.errno, "no such file")
    return exc


@contextlib.contextmanager
def translated() -> Iterator[None]:
    try:
        yield
    except (Linked, Missing, NotRegular):
        raise
    except OSError as exc:
        raise _translated(exc) from None


def _parts(rel: str) -> tuple[str, ...]:
    return tuple(p for p in rel.split("/") if p)


def open_at(name: str, flags: int, mode: int, dir_fd: int) -> int:
    """The one place a file of the memory is opened (by its last name, in its folder)."""
    return os.open(name, flags, mode, dir_fd=dir_fd)


class Replaced(OSError):
    """The memory's folder itself is not the one the session opened (moved, or a link now)."""


class MemoryTree:
    """The memory's work tree reached through descriptors; a context manager. `expect`: the
    (device, inode) of the folder the session opened: a root swapped since is refused."""

    def __init__(self, root: Path, expect: tuple[int, int] | None = None) -> None:
        self.tree = Tree(root)
        if expect is not None:
            st = os.fstat(self.tree.fd)
            if (st.st_dev, st.st_ino) != expect:
                self.tree.close()
                raise Replaced(errno.ESTALE, "the memory's folder was replaced")

    def __enter__(self) -> MemoryTree:
        return self

    def __exit__(self, *exc: object) -> None:
        self.tree.close()

    def folder(self, rel: str, *, create: bool = False) -> int:
        """The descriptor of the folder `rel` ('' for the root), never through a symlink; missing
        folders are made 0700 if `create`."""
        with translated():
            if not create:
                return self.tree.folder(_parts(rel))
            here = self.tree.fd
            done: list[str] = []
            for name in _parts(rel):
                try:
                    here = self.tree.folder((*done, name))
                except FileNotFoundError:
                    with contextlib.suppress(FileExistsError):
                        os.mkdir(name, DIR_MODE, dir_fd=here)
                        made = os.open(name, _DIR, dir_fd=here)
                        try:
                            os.fchmod(made, DIR_MODE)  # mkdir's mode went through the umask
                        finally:
                            os.close(made)
                    here = self.tree.folder((*done, name))
                done.append(name)
            return here

    def parent(self, rel: str, *, create: bool = False) -> tuple[int, str]:
        parts = _parts(rel)
        if not parts:
            raise Missing(errno.EINVAL, "the memory's root has no parent here")
        return self.folder("/".join(parts[:-1]), create=create), parts[-1]

    def lstat(self, rel: str) -> os.stat_result | None:
        """The entry at `rel` itself (a symlink as a symlink), or None if nothing is there."""
        try:
            if not _parts(rel):
                return os.fstat(self.tree.fd)
            fd, name = self.parent(rel)
            with translated():
                return os.stat(name, dir_fd=fd, follow_symlinks=False)
        except Missing:
            return None

    def read(self, rel: str) -> bytes:
        """A regular file's bytes. Linked, Missing or NotRegular otherwise."""
        return b"".join(self.chunks(rel, 1 << 20))

    def chunks(self, rel: str, size: int) -> Iterator[bytes]:
        """A regular file's bytes, `size` at a time (search pages through big files with it)."""
        fd, name = self.parent(rel)
        with translated():
            handle = open_at(name, _READ, 0, fd)
        try:
            if not stat.S_ISREG(os.fstat(handle).st_mode):
                raise NotRegular(errno.EINVAL, "not a regular file")
            while chunk := os.read(handle, size):
                yield chunk
        finally:
            os.close(handle)

    def readlink(self, rel: str) -> bytes:
        fd, name = self.parent(rel)
        with translated():
            return os.fsencode(os.readlink(name, dir_fd=fd))

    def create(self, rel: str, data: bytes) -> None:
        """A new file, 0600 (FileExistsError if anything is there, a symlink included); a write
        that fails leaves no half file."""
        fd, name = self.parent(rel, create=True)
        with translated():
            handle = open_at(name, _NEW, FILE_MODE, fd)
        try:
            os.fchmod(handle, FILE_MODE)
            _write_all(handle, data)
        except BaseException:
            os.close(handle)
            with contextlib.suppress(OSError):
                os.unlink(name, dir_fd=fd)  # made by this call (O_EXCL): ours to remove
            raise
        os.close(handle)

    def replace(self, rel: str, data: bytes) -> None:
        """Put `data` at `rel` (an existing regular file keeps its mode), written beside it and
        renamed over it (fs.atomic_write in the folder's descriptor): never written through a link."""
        fd, name = self.parent(rel)
        with translated():
            current = os.stat(name, dir_fd=fd, follow_symlinks=False)
        if stat.S_ISLNK(current.st_mode):
            raise Linked(errno.ELOOP, "a symbolic link stands on the path")
        mode = stat.S_IMODE(current.st_mode) if stat.S_ISREG(current.st_mode) else FILE_MODE
        atomic_write(name, data, dir_fd=fd, mode=mode, durable=False)

    def remove(self, rel: str) -> None:
        """Remove a file, a symlink (the link itself) or a folder with everything below it."""
        fd, name = self.parent(rel)
        with translated():
            st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode):
                _remove_folder(fd, name)
            else:
                os.unlink(name, dir_fd=fd)

    def rename(self, old: str, new: str) -> None:
        """Move `old` (a link moves as a link) to `new`, making the new folders 0700."""
        src, old_name = self.parent(old)
        src = os.dup(src)  # the walk to `new` may close the chain `src` is in
        try:
            dst, new_name = self.parent(new, create=True)
            with translated():
                os.rename(old_name, new_name, src_dir_fd=src, dst_dir_fd=dst)
        finally:
            os.close(src)

    def files_under(self, rel: str) -> list[str]:
        """Every file and symlink below the folder `rel`, sorted; folders that are links are not
        entered (they are listed as the links they are); `.git` folders are not looked into."""
        found: list[str] = []
        start = self.folder(rel)
        prefix = rel.strip("/")
        for top, dirs, files, _ in os.fwalk(".", dir_fd=start):
            here = os.path.normpath(os.path.join(prefix, top)) if prefix else os.path.normpath(top)
            here = "" if here == "." else here
            dirs[:] = [d for d in dirs if d != ".git"]
            for name in files:  # fwalk lists a link to a folder among the files when not following
                found.append(f"{here}/{name}" if here else name)
        return sorted(found)

    def entries(self, rel: str) -> list[tuple[str, os.stat_result]]:
        """The names in the folder `rel` with their own lstat (a link as a link), sorted."""
        fd = self.folder(rel)
        found = []
        with os.scandir(fd) as it:  # scandir works on a duplicate of fd
            for entry in it:
                with contextlib.suppress(OSError):
                    found.append((entry.name, os.stat(entry.name, dir_fd=fd, follow_symlinks=False)))
        return sorted(found)


def _remove_folder(parent: int, name: str) -> None:
    """A folder and everything below it, by descriptors (fwalk never enters a link: a link to a
    folder is removed as the link it is)."""
    for _, dirs, files, fd in os.fwalk(name, topdown=False, dir_fd=parent):
        for entry in files:
            os.unlink(entry, dir_fd=fd)
        for entry in dirs:
            os.rmdir(entry, dir_fd=fd)
    os.rmdir(name, dir_fd=parent)


def _write_all(handle: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(handle, view):]


__all__ = ["DIR_MODE", "FILE_MODE", "Linked", "MemoryTree", "Missing", "NotRegular", "Replaced", "open_at"]
