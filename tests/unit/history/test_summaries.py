"""history/summaries: the per-version numbers `log` shows, cached by commit id; only a cache, so
a corrupt, unreadable or unwritable file means computing again, never an error."""

from __future__ import annotations

import stat
from pathlib import Path

from memsync.history.summaries import MAX_COPIES, Summaries, Summary

ONE = Summary(3, 120, 40, ("notes.conflict-r1-20261128T000000Z.md",))


def test_a_summary_written_at_close_is_read_by_the_next_command(tmp_path: Path) -> None:
    path = tmp_path / "cache" / "versions.db"
    cache = Summaries(path)
    cache.put("a" * 40, ONE)
    assert cache.get("a" * 40) is None  # written once, at close
    cache.close()
    again = Summaries(path)
    assert again.get("a" * 40) == ONE and again.get("b" * 40) is None
    again.close()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700


def test_a_version_with_too_many_copies_is_not_kept(tmp_path: Path) -> None:
    cache = Summaries(tmp_path / "versions.db")
    cache.put("c" * 40, Summary(1, 0, 0, tuple(f"c{i}" for i in range(MAX_COPIES + 1))))
    cache.close()
    assert Summaries(tmp_path / "versions.db").get("c" * 40) is None


def test_what_does_not_decode_is_no_summary() -> None:
    assert Summary.decode(ONE.encode()) == ONE
    for text in ("", "[1, 2]", "[1, 2, 3, 4]", '[-1, 0, 0, []]', '[true, 0, 0, []]', '[1, 0, 0, [7]]', "{"):
        assert Summary.decode(text) is None


def test_a_corrupt_file_is_set_aside_and_nothing_fails(tmp_path: Path) -> None:
    path = tmp_path / "versions.db"
    path.write_bytes(b"this is not sqlite" * 100)
    cache = Summaries(path)
    assert cache.get("a" * 40) is None
    cache.put("a" * 40, ONE)
    cache.close()
    assert (tmp_path / "versions.db.corrupt").exists()


def test_a_cache_that_cannot_be_made_is_no_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("a file where the cache folder would be\n")
    cache = Summaries(blocker / "cache" / "versions.db")
    assert cache.get("a" * 40) is None
    cache.put("a" * 40, ONE)
    cache.close()
