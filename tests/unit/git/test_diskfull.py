"""git/diskfull: an error is taken for a full disk when it says so (errno or libgit2's text) or
when the place it wrote to is out of space; it then names that place, and anything else passes
through unchanged."""

from __future__ import annotations

import errno
from pathlib import Path

import pygit2

from memsync.errors import DiskFull, RepoError
from memsync.git import diskfull


def test_what_says_a_disk_is_full() -> None:
    assert diskfull.says_full(OSError(errno.ENOSPC, "No space left on device"))
    assert diskfull.says_full(OSError(errno.EDQUOT, "Disk quota exceeded"))
    assert diskfull.says_full(pygit2.GitError("failed to write 'x': No space left on device"))
    assert not diskfull.says_full(OSError(errno.EACCES, "Permission denied"))


def test_a_full_disk_error_is_explained_with_its_place(tmp_path: Path) -> None:
    exc = OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "memory" / "big.bin"))
    found = diskfull.explain(exc, [tmp_path])
    assert isinstance(found, DiskFull) and str(tmp_path / "memory") in str(found)
    assert diskfull.explain(OSError(errno.EACCES, "Permission denied"), [tmp_path]) is None  # space is left here
    assert diskfull.explain(ValueError("No space left on device"), [tmp_path]) is None  # not an I/O error


def test_a_memsync_error_caused_by_a_full_disk_is_renamed(tmp_path: Path) -> None:
    cause = OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "x"))
    try:
        raise RepoError("cannot write x: No space left on device") from cause
    except RepoError as error:
        renamed = diskfull.renamed(error)
    assert isinstance(renamed, DiskFull) and "cannot write x" in str(renamed)
    plain = RepoError("cannot write x")
    assert diskfull.renamed(plain) is plain


def test_the_place_a_libgit2_message_names_comes_first(tmp_path: Path) -> None:
    text = f"failed to write '{tmp_path / 'objects' / 'pack' / 'tmp_pack'}'"
    assert diskfull.full_place(text, [Path("/")]) == tmp_path / "objects" / "pack"  # none is low: the first
    assert not diskfull.low_on_space(tmp_path / "not" / "made" / "yet")  # its nearest existing parent
