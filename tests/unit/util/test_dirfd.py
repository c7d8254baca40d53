"""memsync.dirfd: every step under the tree goes through folder descriptors, never a symlink."""

from __future__ import annotations

import errno
import os
import threading
from pathlib import Path

import pytest

from memsync.util.dirfd import Tree, is_outside


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "tree"
    (root / "d").mkdir(parents=True)
    (root / "d" / "f").write_bytes(b"inside\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "f").write_bytes(b"OUTSIDE\n")
    os.symlink(outside, root / "link")
    return root


def test_a_symlinked_folder_is_never_entered(tree: Path) -> None:
    with Tree(tree) as t:
        assert t.read("d/f", 1 << 20) is not None
        for call in (lambda: t.read("link/f", 1 << 20), lambda: t.lstat("link/f"), lambda: t.readlink("link/f")):
            with pytest.raises(OSError) as caught:
                call()
            assert is_outside(caught.value) and caught.value.errno in (errno.ELOOP, errno.ENOTDIR)


def test_a_symlink_as_the_last_name_is_read_as_a_link_not_followed(tree: Path) -> None:
    os.symlink("../link/f", tree / "d" / "to-outside")
    with Tree(tree) as t:
        assert t.readlink("d/to-outside") == b"../link/f"
        with pytest.raises(OSError) as caught:
            t.read("d/to-outside", 1 << 20)
        assert caught.value.errno == errno.ELOOP


def test_a_fifo_never_blocks_a_read(tree: Path) -> None:
    os.mkfifo(tree / "d" / "fifo")
    done: list[object] = []

    def read() -> None:
        with Tree(tree) as t:
            done.append(t.read("d/fifo", 1 << 20))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(5)
    assert done == [None]


def test_a_file_past_the_limit_is_not_read(tree: Path) -> None:
    with Tree(tree) as t:
        assert t.read("d/f", 3) is None
        got = t.read("d/f", 7)
        assert got is not None and got[0] == b"inside\n"


def test_place_never_writes_through_a_symlink(tree: Path, tmp_path: Path) -> None:
    with Tree(tree) as t:
        assert not t.place("link/f", b"written\n", 0o100644)
        assert not t.place("link/new/f", b"written\n", 0o100644)
        assert not t.place("d", b"written\n", 0o100644)  # a folder stands there
        assert t.place("d/f", b"replaced\n", 0o100644)
        assert t.place("new/deep/g", b"new\n", 0o100755)
        assert t.place("d/l", b"f", 0o120000)
    assert (tmp_path / "outside" / "f").read_bytes() == b"OUTSIDE\n"
    assert sorted(p.name for p in (tmp_path / "outside").iterdir()) == ["f"]
    assert (tree / "d" / "f").read_bytes() == b"replaced\n"
    assert os.access(tree / "new" / "deep" / "g", os.X_OK)
    assert os.readlink(tree / "d" / "l") == "f"


def test_rename_and_unlink_act_on_the_entry_itself(tree: Path, tmp_path: Path) -> None:
    with Tree(tree) as t:
        t.rename("d", "e")
        t.unlink("link")  # the symlink goes, not what it names
    assert (tree / "e" / "f").exists() and not (tree / "link").exists()
    assert (tmp_path / "outside" / "f").exists()


def test_paths_that_leave_the_tree_are_refused(tree: Path) -> None:
    with Tree(tree) as t:
        for bad in ("../x", "d/../../x", "/etc/passwd", ""):
            with pytest.raises(OSError):
                t.lstat(bad)
