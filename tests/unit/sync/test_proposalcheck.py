"""sync/proposalcheck: what a reviewer is shown of each file of a proposal: lines added and
removed counted as multisets (linear on a hostile file), a patch only up to a size."""

from __future__ import annotations

from memsync.sync.proposalcheck import MAX_PATCH_BYTES, count_lines


def test_lines_added_and_removed_and_the_patch() -> None:
    review = count_lines(b"a\nb\nc\n", b"a\nc\nd\ne\n", True, "notes.md")
    assert (review.kind, review.added, review.removed, review.binary) == ("modified", 2, 1, False)
    assert review.patch.startswith("--- a/notes.md\n+++ b/notes.md\n") and "-b\n" in review.patch


def test_new_and_deleted_files_name_dev_null() -> None:
    added = count_lines(None, b"x\ny\n", True, "new.md")
    assert (added.kind, added.added, added.removed) == ("added", 2, 0) and "--- /dev/null" in added.patch
    gone = count_lines(b"x\n", None, True, "old.md")
    assert (gone.kind, gone.removed) == ("deleted", 1) and "+++ /dev/null" in gone.patch


def test_a_moved_line_and_line_endings_are_no_change() -> None:
    review = count_lines(b"a\r\nb\r\n", b"b\na\n", False, "x.md")
    assert (review.added, review.removed, review.patch) == (0, 0, "")


def test_binary_and_big_files_get_no_patch() -> None:
    assert count_lines(b"\0\1\2", b"\0\1\3", True, "blob.bin").binary
    big = b"line\n" * (MAX_PATCH_BYTES // 5 + 1)
    review = count_lines(big, big + b"more\n", True, "big.md")
    assert review.added == 1 and review.patch.startswith("(no patch for big.md: larger than")
