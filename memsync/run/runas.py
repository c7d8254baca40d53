"""`memsync run --as-user USER`: the command runs as another user, so that nothing memsync holds
(its memory, its files, the operator's credentials) is within the reach of the command's uid.

Only root can do it. Writable memories are handed to the user for the run (their work tree, never
.git or .vm0) and handed back afterwards; read-only memories stay the operator's, so the command
cannot change them at all.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from memsync.errors import RepoError, UsageError
from memsync.util.records import dataclass, field

__all__ = ["Lent", "RunAs", "end_processes", "hand_back", "hand_over", "hard_links_protected", "processes_of",
           "resolve"]

_OWN = (".git", ".vm0")


@dataclass(frozen=True)
class RunAs:
    name: str
    uid: int
    gid: int
    groups: tuple[int, ...]
    home: str

    def popen_args(self) -> dict[str, object]:
        return {"user": self.uid, "group": self.gid, "extra_groups": list(self.groups)}

    def environment(self, env: dict[str, str]) -> dict[str, str]:
        return dict(env, HOME=self.home, USER=self.name, LOGNAME=self.name)


def resolve(name: str) -> RunAs:
    import pwd

    if os.geteuid() != 0:
        raise UsageError(f"--as-user {name}: only root can run the command as another user",
                         "run memsync as root, or leave out --as-user")
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        raise UsageError(f"--as-user {name}: no such user", "give an existing user name (see /etc/passwd)") from None
    if entry.pw_uid == 0:
        raise UsageError(f"--as-user {name}: that user is root, so nothing would be kept from the command",
                         "give an unprivileged user of its own (e.g. useradd --system memsync-agent)")
    if not hard_links_protected():
        raise UsageError(f"--as-user {name}: this kernel lets any user hard-link files it does not own "
                         "(fs.protected_hardlinks=0): the command could link root's files into the memory",
                         "sysctl -w fs.protected_hardlinks=1, or leave out --as-user")
    groups = tuple(g for g in os.getgrouplist(entry.pw_name, entry.pw_gid) if g != entry.pw_gid)
    return RunAs(entry.pw_name, entry.pw_uid, entry.pw_gid, groups, entry.pw_dir)


def hard_links_protected(setting: Path = Path("/proc/sys/fs/protected_hardlinks")) -> bool:
    """Whether a user can hard-link only files it owns or may read and write (Linux's default);
    where the setting cannot be read (another OS), it is taken as on."""
    try:
        return setting.read_text().strip() != "0"
    except OSError:
        return True


@dataclass(frozen=True)
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


def _entries(root_fd: int) -> Iterator[tuple[str, int, str]]:
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


def _open_entry(folder: int, name: str) -> int | None:
    """A descriptor of the entry itself (never what a symlink names); None for a symlink, a
    socket, or an entry gone meanwhile."""
    try:
        return os.open(name, _ENTRY_FLAGS, dir_fd=folder)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOENT, errno.ENXIO, errno.EOPNOTSUPP):
            return None
        raise


def hand_over(root: Path, user: RunAs) -> Lent:
    """Lend the memory's work tree to `user`; returns what hand_back needs to take it back.
    The root folder itself stays the operator's: its group becomes the user's, group-writable
    and sticky, so the user can add and remove its own entries but never rename or remove .git or
    .vm0 (whose settings memsync and git act on later); those two become private to the operator
    for the run (mode 0700), so the user cannot read the memory's history or memsync's settings.
    Every entry is reached through folder descriptors and changed through its own descriptor:
    a folder or file swapped for a symlink meanwhile is skipped, never followed. A regular file
    with more than one link is not lent (it could be a hard link to a file outside the tree)."""
    root_fd = os.open(root, _DIR_FLAGS)
    try:
        st = os.fstat(root_fd)
        lent = Lent(st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode), st.st_dev, st.st_ino)
        for own in _OWN:
            fd = _open_entry(root_fd, own)
            if fd is None:
                continue
            try:
                mode = stat.S_IMODE(os.fstat(fd).st_mode)
                lent.own[own] = mode
                os.fchmod(fd, mode & 0o700)
            finally:
                os.close(fd)
        for path, folder, name in _entries(root_fd):
            fd = _open_entry(folder, name)
            if fd is None:
                with contextlib.suppress(FileNotFoundError):
                    entry = os.stat(name, dir_fd=folder, follow_symlinks=False)
                    if stat.S_ISLNK(entry.st_mode):
                        os.chown(name, user.uid, user.gid, dir_fd=folder, follow_symlinks=False)
                continue
            try:
                entry = os.fstat(fd)
                if stat.S_ISREG(entry.st_mode) and entry.st_nlink > 1:
                    continue
                lent.modes[path] = (stat.S_IFMT(entry.st_mode), stat.S_IMODE(entry.st_mode))
                os.fchown(fd, user.uid, user.gid)
            finally:
                os.close(fd)
        os.fchown(root_fd, st.st_uid, user.gid)
        os.fchmod(root_fd, lent.mode | stat.S_ISVTX | 0o070)
    finally:
        os.close(root_fd)
    return lent


def _umask() -> int:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o022


def hand_back(root: Path, lent: Lent, user: RunAs) -> None:
    """Give the work tree back: every entry the user owns (or that was lent) becomes the
    operator's again, with the mode it had when lent, or for a new entry the mode the operator's
    umask gives (no set-id or sticky bit); .git and .vm0 get their modes back. Refused
    (RepoError) if the root folder is not the one lent. The user's processes are ended first
    (end_processes), so nothing moves meanwhile; all the same, nothing is reached through a
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
        for path, folder, name in _entries(root_fd):
            fd = _open_entry(folder, name)
            if fd is None:
                with contextlib.suppress(FileNotFoundError):
                    entry = os.stat(name, dir_fd=folder, follow_symlinks=False)
                    if entry.st_uid == user.uid:
                        os.chown(name, lent.uid, lent.gid, dir_fd=folder, follow_symlinks=False)
                continue
            try:
                _give_back(fd, lent, user, path, umask)
            finally:
                os.close(fd)
        for own, mode in lent.own.items():
            fd = _open_entry(root_fd, own)
            if fd is not None:
                try:
                    os.fchmod(fd, mode)
                finally:
                    os.close(fd)
        os.fchown(root_fd, lent.uid, lent.gid)
        os.fchmod(root_fd, lent.mode)
    finally:
        os.close(root_fd)


def _give_back(fd: int, lent: Lent, user: RunAs, path: str, umask: int) -> None:
    entry = os.fstat(fd)
    kind = stat.S_IFMT(entry.st_mode)
    was = lent.modes.get(path)
    if entry.st_uid != user.uid and was is None:
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


_GONE_WITHIN = 5.0


def end_processes(user: RunAs) -> list[int]:
    """End every process of `user`'s uid (SIGKILL), and wait until none is left; returns those
    still there after the wait (a process stuck in the kernel). Called before memsync touches a
    tree the user could write (the pre-run save, the hand-back, the final snapshot): a process the
    command left running could otherwise swap folders for symlinks while memsync works. The kill
    is sent by a process running as that user, `kill(-1, SIGKILL)`: the kernel signals every
    process of the uid at once, so none can escape by forking. This is why --as-user wants a user
    of its own, not one other programs run as."""
    import time

    deadline = time.monotonic() + _GONE_WITHIN
    left = processes_of(user.uid)
    while left:
        _kill_all_as(user)
        left = processes_of(user.uid)
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.02)  # SIGKILL is delivered asynchronously; zombies are reaped by their parent
    return left


def _kill_all_as(user: RunAs) -> None:
    """kill(-1, SIGKILL) from a child that has become `user` (no program to exec: the user may be
    unable to run memsync's Python). The child only makes system calls and leaves with _exit."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads: the child execs nothing
        pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.setgroups([])
            os.setgid(user.gid)
            os.setuid(user.uid)
            if os.getuid() == user.uid != 0:
                code = 0
                with contextlib.suppress(ProcessLookupError):
                    os.kill(-1, 9)
        finally:
            os._exit(code)
    os.waitpid(pid, 0)


def processes_of(uid: int) -> list[int]:
    """Live (not zombie) processes whose real, effective or saved uid is `uid`."""
    found: list[int] = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            status = Path(entry.path, "status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        uids = fields.get("Uid", "").split()
        if str(uid) in uids[:3] and not fields.get("State", "").strip().startswith(("Z", "X")):
            found.append(int(entry.name))
    return found
