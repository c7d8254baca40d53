"""Counted nouns in messages: "1 file", "2 files", never "1 files" or "file(s)"."""

from __future__ import annotations

__all__ = ["count"]

_IRREGULAR = {"copy": "copies", "file content": "file contents", "change": "changes"}


def count(n: int, one: str, many: str | None = None) -> str:
    """`n` and the noun agreeing with it: count(1, "version") -> "1 version"."""
    if n == 1:
        return f"{n} {one}"
    return f"{n} {many or _IRREGULAR.get(one) or one + 's'}"
