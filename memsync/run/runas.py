"""`memsync run --as-user USER`: the command runs as another user, so that nothing memsync holds
(its memory, its files, the operator's credentials) is within the reach of the command's uid.

Only root can do it. Writable memories are handed to the user for the run (their work tree, never
.git or .vm0) and handed back afterwards; read-only memories stay the operator's, so the command
cannot change them at all.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from memsync.errors import UsageError

__all__ = ["RunAs", "hand_back", "hand_over", "resolve"]

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
    groups = tuple(g for g in os.getgrouplist(entry.pw_name, entry.pw_gid) if g != entry.pw_gid)
    return RunAs(entry.pw_name, entry.pw_uid, entry.pw_gid, groups, entry.pw_dir)


def _tree(root: Path) -> list[Path]:
    """The work tree of a memory without its .git and .vm0; symlinks are entries, never followed."""
    found = [root]
    for here, dirs, files in os.walk(root):
        if Path(here) == root:
            dirs[:] = [d for d in dirs if d not in _OWN]
        found += [Path(here, d) for d in dirs] + [Path(here, f) for f in files]
    return found


def hand_over(root: Path, user: RunAs) -> tuple[int, int, int, int, int]:
    """Lend the memory's work tree to `user`; returns the root's owner, group and mode to give
    back, and its identity. The root folder itself stays the operator's: its group becomes the user's, group-writable
    and sticky, so the user can add and remove its own entries but never rename or remove .git or
    .vm0 (whose settings memsync and git act on later)."""
    st = root.stat()
    for path in _tree(root)[1:]:
        os.lchown(path, user.uid, user.gid)
    os.chown(root, st.st_uid, user.gid)
    os.chmod(root, stat.S_IMODE(st.st_mode) | stat.S_ISVTX | 0o070)
    return st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode), st.st_dev, st.st_ino


def hand_back(root: Path, owner: tuple[int, int, int], ident: tuple[int, int]) -> None:
    """Give the work tree back; refused (RepoError) if the root folder is not the one lent."""
    from memsync.core.readonly import check_same_folder

    check_same_folder(root, ident)
    uid, gid, mode = owner
    for path in _tree(root)[1:]:
        try:
            os.lchown(path, uid, gid)
        except FileNotFoundError:
            continue
    os.chown(root, uid, gid)
    os.chmod(root, mode)
