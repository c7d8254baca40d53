"""util/wording: counted nouns agree with their number."""

from __future__ import annotations

from memsync.util.wording import count


def test_one_and_many() -> None:
    assert count(1, "version") == "1 version" and count(0, "version") == "0 versions"
    assert count(2, "copy") == "2 copies" and count(3, "change") == "3 changes"
    assert count(2, "person", "people") == "2 people" and count(1, "person", "people") == "1 person"
