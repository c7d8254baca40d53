"""What a redaction replaced in one file, and whether all of it was a secret (bytes in, spans out).

A redacted file is the original with some spans replaced by memsync's placeholder. Two questions
are asked of such a pair, on both sides of a redaction:

- the redacting side: is it *wide*? A redaction that leaves a file as nothing but placeholders,
  or replaces more than WIDE_SHARE of a file with anything but recognised secrets, wipes a memory
  rather than removing a secret, and needs a second confirmation (`--allow-wide`);
- a following clone: is every replaced span something memsync's own secret scanner recognises as
  a secret? Only then is a hub's redaction followed without the operator's word.
"""

from __future__ import annotations

import re

from memsync.util.records import recordclass

PLACEHOLDER = re.compile(rb"\[REDACTED by memsync \d{4}-\d{2}-\d{2}\]")
WIDE_SHARE = 0.10  # more than this share of a file, unless all of it is recognised secrets


@recordclass(frozen=True)
class Replaced:
    """The spans of the original that the placeholder replaced (start, end), byte offsets."""

    size: int  # the original's size
    spans: tuple[tuple[int, int], ...]
    whole: bool  # nothing but placeholders (and white space) is left

    @property
    def removed(self) -> int:
        return sum(end - start for start, end in self.spans)


def is_wide(before: bytes, found: Replaced) -> bool:
    """Whether the redaction wipes the file (nothing but placeholders left) or replaces more than
    WIDE_SHARE of it with anything but what the secret scanner recognises (a key in a short
    `.env` is not wide; most of a note is)."""
    if found.whole:
        return True
    return found.removed > WIDE_SHARE * found.size and not only_secrets(before, found)


def replaced(before: bytes, after: bytes) -> Replaced | None:
    """How `after` is `before` with spans replaced by the placeholder; None if it is not that."""
    pieces = PLACEHOLDER.split(after)
    if len(pieces) == 1:
        return None
    whole = not b"".join(pieces).strip()
    if pieces == [b"", b"\n"]:  # PATH mode: the whole content, whatever it was
        return Replaced(len(before), ((0, len(before)),), True)
    shape = b"(.+?)".join(re.escape(p) for p in pieces)
    match = re.fullmatch(shape, before, re.DOTALL)
    if match is None:
        return None
    spans = (match.span(i) for i in range(1, len(pieces)))
    # a placeholder left by an earlier redaction is kept, not replaced: it removes nothing
    kept = tuple((a, b) for a, b in spans if not PLACEHOLDER.fullmatch(before, a, b))
    return Replaced(len(before), kept, whole)


def only_secrets(before: bytes, found: Replaced) -> bool:
    """Whether every replaced span (white space at its ends aside) lies within text the secret
    scanner reports as a secret: a redaction that removed a secret and nothing else."""
    from memsync.checks.secret_rules import candidates

    text = before.decode("latin-1")  # one character per byte: offsets stay byte offsets
    secrets = sorted((c[0], c[1]) for c in candidates(text))
    for start, end in found.spans:
        while start < end and text[start].isspace():
            start += 1
        while end > start and text[end - 1].isspace():
            end -= 1
        if start < end and not _covered(start, end, secrets):
            return False
    return True


def _covered(start: int, end: int, spans: list[tuple[int, int]]) -> bool:
    pos = start
    for a, b in spans:  # sorted by start
        if a > pos:
            break
        pos = max(pos, b)
        if pos >= end:
            return True
    return pos >= end
