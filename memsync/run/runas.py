"""`memsync run --as-user USER`: the command runs as another user, so that nothing memsync holds
(its memory, its files, the operator's credentials) is within the reach of the command's uid.

Only root can do it. Writable memories are handed to the user for the run (their work tree, never
.git or .vm0) and handed back afterwards; read-only memories stay the operator's, so the command
cannot change them at all.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

from memsync.core import lending
from memsync.core.lending import Lent, entries, lent_fields, open_entry
from memsync.errors import UsageError
from memsync.util import processes
from memsync.util.records import recordclass

__all__ = ["Lent", "RunAs", "end_processes", "hand_back", "hand_over", "hard_links_protected", "lent_fields",
           "processes_of", "resolve"]

_OWN = (".git", ".vm0")
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC


@recordclass(frozen=True)
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
            fd = open_entry(root_fd, own)
            if fd is None:
                continue
            try:
                mode = stat.S_IMODE(os.fstat(fd).st_mode)
                lent.own[own] = mode
                os.fchmod(fd, mode & 0o700)
            finally:
                os.close(fd)
        for path, folder, name in entries(root_fd):
            fd = open_entry(folder, name)
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




def hand_back(root: Path, lent: Lent, user: RunAs) -> None:
    """Give the work tree back (core/lending.py); the user's processes are ended first."""
    lending.hand_back(root, lent, user.uid)


def end_processes(user: RunAs) -> list[int]:
    """End every process of `user`'s uid (util/processes.end_user); those left are returned."""
    return processes.end_user(user.uid, user.gid)


def processes_of(uid: int) -> list[int]:
    return processes.of_user(uid)
