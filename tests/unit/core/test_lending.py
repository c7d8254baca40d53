"""core/lending: a work tree lent to another user (`run --as-user`) is taken back through
descriptors: the user's entries become the operator's again with their lent modes (new ones with
the umask's, never a set-id bit), someone else's entries are left alone, and a replaced folder is
refused. Needs root to change owners (tests run as root in CI)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from memsync.core.lending import Lent, hand_back, lent_fields, lent_from
from memsync.errors import RepoError
from tests.conftest import write

USER, STRANGER = 54321, 54322
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="changing owners needs root")


def _lent(root: Path, **modes: tuple[int, int]) -> Lent:
    st = root.stat()
    return Lent(os.getuid(), os.getgid(), 0o755, st.st_dev, st.st_ino, dict(modes), {".git": 0o700})


def test_the_mark_keeps_only_what_memsync_wrote() -> None:
    lent = Lent(1, 2, 0o40755, 3, 4, {"a": (stat.S_IFREG, 0o644)}, {".git": 0o700, "x": 0o777})
    back = lent_from(lent_fields(lent))
    assert back is not None and back.mode == 0o755 and back.modes == {} and back.own == {".git": 0o700}
    assert lent_from({"uid": "one"}) is None and lent_from(["uid"]) is None and lent_from(None) is None


@needs_root
def test_the_users_entries_come_back_with_their_modes(tmp_path: Path) -> None:
    root = tmp_path / "tree"
    lent_file = write(root, "notes.md", "lent\n")
    made = write(root, "sub/tool.sh", "#!/bin/sh\n")
    theirs = write(root, "linked.md", "someone else's\n")
    (root / ".git").mkdir()
    (root / ".git").chmod(0o777)
    for path in (lent_file, made, made.parent, root):
        os.chown(path, USER, USER)
    os.chmod(made, 0o4777)  # set-uid, world-writable: what a user could leave behind
    os.chown(theirs, STRANGER, STRANGER)
    os.symlink("/etc/passwd", root / "link")
    os.chown(root / "link", USER, USER, follow_symlinks=False)
    hand_back(root, _lent(root, **{"notes.md": (stat.S_IFREG, 0o640)}), USER)
    mine = (os.getuid(), os.getgid())
    for path in (lent_file, made, made.parent, root):
        assert (path.stat().st_uid, path.stat().st_gid) == mine
    assert stat.S_IMODE(lent_file.stat().st_mode) == 0o640
    assert not made.stat().st_mode & 0o7000 and made.stat().st_mode & 0o100  # executable, no set-id
    assert theirs.stat().st_uid == STRANGER  # not the user's and not lent: left alone
    assert os.lstat(root / "link").st_uid == os.getuid() and Path("/etc/passwd").stat().st_uid == 0
    assert stat.S_IMODE((root / ".git").stat().st_mode) == 0o700


def test_a_replaced_folder_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "tree"
    root.mkdir()
    lent = _lent(root)
    root.rename(tmp_path / "moved")
    root.mkdir()
    with pytest.raises(RepoError):
        hand_back(root, lent, USER)
