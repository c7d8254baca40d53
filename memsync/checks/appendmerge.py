"""The `append` merge: a file many writers append to (`log.md`, JSON lines) keeps every line each
writer added, exactly once, in each writer's order (docs/RELIABILITY.md).

git's union driver concatenates both sides of a conflicting hunk whole; when a side's hunk holds
lines of the common version too (a side that is no longer "base plus lines at the end"), those
lines come out twice. Here a three-way line merge is made from the two diffs against the base:
a region only one side changed takes that side's change (a deletion included); a region both
changed keeps ours, then the lines theirs *added* there: what theirs kept of the base is not added
again, nor a line ours added there too (a line both sides hold because an earlier merge gave it
to both, when the base is older than that merge; two writers that append the very same
non-blank line at the same place get it once). Blank lines are always kept. Lines are compared
whole, line endings included. Pure: bytes in, bytes out.
"""

from __future__ import annotations

from collections import Counter
from difflib import SequenceMatcher

Lines = list[bytes]


def merge_appends(base: bytes | None, ours: bytes, theirs: bytes) -> bytes:
    """The merged file. `base` None: both sides added the file (the empty file is their base)."""
    if ours == theirs or theirs == (base or b""):
        return ours
    if ours == (base or b""):
        return theirs
    b, o, t = (_lines(x) for x in (base or b"", ours, theirs))
    keep = _common_prefix(b, o, t)  # the common case, appends: only the tails are compared
    out: Lines = list(b[:keep])
    for z, mine, other in _regions(b[keep:], o[keep:], t[keep:]):
        if mine == other or other == z:
            out.extend(mine)
        elif mine == z:
            out.extend(other)
        else:
            out.extend(mine)
            out.extend(_not_in(_added(z, other), _added(z, mine)))
    return b"".join(out)


def _lines(data: bytes) -> Lines:
    """Lines with their endings; a last line without one gets one, so a line a writer ended
    before appending after it is still the same line (the merged file then ends with one too)."""
    lines = data.splitlines(keepends=True)
    if lines and not lines[-1].endswith((b"\n", b"\r")):
        lines[-1] += b"\n"
    return lines


def _common_prefix(*seqs: Lines) -> int:
    n = 0
    for items in zip(*seqs, strict=False):
        if any(item != items[0] for item in items[1:]):
            break
        n += 1
    return n


def _regions(base: Lines, ours: Lines, theirs: Lines) -> list[tuple[Lines, Lines, Lines]]:
    """(base, ours, theirs) chunks between the lines all three hold in the same order."""
    regions: list[tuple[Lines, Lines, Lines]] = []
    z = a = t = 0
    for zs, ze, as_, ae, ts, te in _sync_points(base, ours, theirs):
        chunk = (base[z:zs], ours[a:as_], theirs[t:ts])
        if any(chunk):
            regions.append(chunk)
        if ze > zs:
            regions.append((base[zs:ze], ours[as_:ae], theirs[ts:te]))
        z, a, t = ze, ae, te
    return regions


def _sync_points(base: Lines, ours: Lines, theirs: Lines) -> list[tuple[int, int, int, int, int, int]]:
    """Ranges of the base both sides kept unchanged, with where they sit in each side; the last
    is the empty range at the three ends."""
    mine = SequenceMatcher(None, base, ours, autojunk=False).get_matching_blocks()
    other = SequenceMatcher(None, base, theirs, autojunk=False).get_matching_blocks()
    points = []
    i = j = 0
    while i < len(mine) and j < len(other):
        zm, am, nm = mine[i]
        zt, tt, nt = other[j]
        start, end = max(zm, zt), min(zm + nm, zt + nt)
        if start < end:
            points.append((start, end, am + start - zm, am + end - zm, tt + start - zt, tt + end - zt))
        if zm + nm < zt + nt:
            i += 1
        else:
            j += 1
    points.append((len(base), len(base), len(ours), len(ours), len(theirs), len(theirs)))
    return points


def _added(base: Lines, side: Lines) -> Lines:
    """The lines `side` holds that are not `base`'s (matched in order), in `side`'s order."""
    kept: set[int] = set()
    for _, start, size in SequenceMatcher(None, base, side, autojunk=False).get_matching_blocks():
        kept.update(range(start, start + size))
    return [line for n, line in enumerate(side) if n not in kept]

def _not_in(lines: Lines, held: Lines) -> Lines:
    """`lines` less the non-blank ones `held` has (each of `held` cancels one)."""
    left = Counter(line for line in held if line.strip())
    out = []
    for line in lines:
        if left[line] > 0:
            left[line] -= 1
        else:
            out.append(line)
    return out


__all__ = ["merge_appends"]
