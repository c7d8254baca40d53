"""checks/redaction_spans: what a redaction replaced, whether it wipes the file, and whether all
it removed was a secret the scanner recognises."""

from __future__ import annotations

from memsync.checks.redaction_spans import PLACEHOLDER, Replaced, is_wide, only_secrets, replaced

MARK = b"[REDACTED by memsync 2026-11-28]"
TOKEN = b"ghp_" + b"A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"


def test_the_spans_replaced_are_found_byte_for_byte() -> None:
    before = b"key: " + TOKEN + b"\nmore text\n"
    found = replaced(before, b"key: " + MARK + b"\nmore text\n")
    assert found == Replaced(len(before), ((5, 5 + len(TOKEN)),), False)
    assert found.removed == len(TOKEN)


def test_an_unrelated_text_or_no_placeholder_is_not_a_redaction() -> None:
    assert replaced(b"abc\n", b"abc\n") is None
    assert replaced(b"abc\n", b"xyz " + MARK + b"\n") is None


def test_a_whole_file_redaction_is_wide() -> None:
    before = b"a long note\n" * 20
    found = replaced(before, MARK + b"\n")
    assert found is not None and found.whole and is_wide(before, found)


def test_a_secret_alone_is_not_wide_even_in_a_short_file() -> None:
    before = b"T=" + TOKEN + b"\n"
    found = replaced(before, b"T=" + MARK + b"\n")
    assert found is not None and only_secrets(before, found) and not is_wide(before, found)


def test_prose_removed_beyond_the_share_is_wide() -> None:
    before = b"keep this line\n" + b"an ordinary paragraph of notes, not a secret at all\n" * 4
    found = replaced(before, b"keep this line\n" + MARK + b"\n")
    assert found is not None and not only_secrets(before, found) and is_wide(before, found)


def test_a_placeholder_already_there_removes_nothing() -> None:
    before = b"old " + MARK + b" and new " + TOKEN + b"\n"
    found = replaced(before, b"old " + MARK + b" and new " + MARK + b"\n")
    assert found is not None and found.spans == ((len(before) - 1 - len(TOKEN), len(before) - 1),)
    assert PLACEHOLDER.fullmatch(MARK)
