"""The integrity guard: did a memory commit probably lose memory by accident?

Pure: bytes and paths in, findings out.  :func:`integrity_flags` answers it for the file
changes a commit is about to record.  The incident it exists for: an agent misread a failed
search as "no notes yet" and replaced a 7,285-byte notes file with a 1,509-byte one.  Flags
are advisory; they are written as commit trailers (:meth:`Flag.trailer`) and read back from
history (:meth:`Flag.parse`).  The other question asked of the same changes, whether they break
a ``protect:`` rule of storage.yaml, is protect.py's.

Nothing here touches git, the file system or the clock.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Iterable
from typing import Literal, cast, get_args

from memsync.util.lazyre import LazyRe
from memsync.util.records import recordclass

__all__ = [
    "BINARY_SNIFF_BYTES",
    "REWRITE_MAX_SURVIVAL",
    "REWRITE_MIN_OLD_BYTES",
    "SHRINK_MIN_BYTES",
    "Actor",
    "FileChange",
    "Flag",
    "FlagKind",
    "integrity_flags",
    "is_binary",
    "survival",
]

Actor = Literal["run", "operator", "watch"]
FlagKind = Literal["shrink", "delete", "rewrite"]

_ACTORS: tuple[str, ...] = get_args(Actor)
_KINDS: tuple[str, ...] = get_args(FlagKind)

# --- thresholds -----------------------------------------------------------------------
#
# shrink: the file lost at least half of its bytes AND at least SHRINK_MIN_BYTES.  Both
#   conditions are needed: "half" alone fires on every trim of a small scratch file
#   (300 -> 120 bytes), and "1 KiB" alone fires on ordinary pruning of a large file
#   (40 KB -> 38 KB).  The incident (7285 -> 1509: lost 79 %, 5.6 KiB) is far past both.
SHRINK_MIN_BYTES = 1024
#
# rewrite: for a text file of at least REWRITE_MIN_OLD_BYTES, less than
#   REWRITE_MAX_SURVIVAL of the old file's non-blank lines (weighted by bytes) is still
#   present in the new file (see survival()).  Below 512 bytes a file is a handful of
#   lines and "replaced" cannot be told from "edited".  An honest edit -- append a
#   section, fix a few lines, reorder paragraphs -- keeps most old lines (editing 2 of
#   14 lines still leaves 0.81); an agent that starts from an empty file and writes
#   fresh notes keeps only boilerplate such as headings (survival near 0; headings are
#   short, which is why lines are weighted by their length).  0.25 sits well between
#   the two: a file must have lost three quarters of its old text to be flagged, so a
#   broad but honest reorganisation is not, while "rewrote it from scratch but kept the
#   title and two bullets" still is.
REWRITE_MIN_OLD_BYTES = 512
REWRITE_MAX_SURVIVAL = 0.25
#
# A file whose first 8 KiB contain a NUL byte is binary (the heuristic git uses); lines
# mean nothing there, so binary files are only checked for shrink and delete.
BINARY_SNIFF_BYTES = 8192


# --- data -----------------------------------------------------------------------------


@recordclass(frozen=True)
class FileChange:
    """One path's change between the parent commit and the commit being made."""

    path: str  # posix path relative to the memory root
    old: bytes | None  # content in the parent version; None if the file is new
    new: bytes | None  # content to be committed; None if deleted
    # The file did not exist before this run started (a mid-run "watch" commit recorded
    # it): nothing it holds predates the run, so a run deleting, shrinking or rewriting
    # its own scratch file is never flagged.
    created_in_same_run: bool = False


_SIZES_RE: LazyRe[str] = LazyRe(r"([0-9]+)->([0-9]+)", flags=re.ASCII)
_BARE_WITH_SIZES_RE: LazyRe[str] = LazyRe(r"(.+) ([0-9]+)->([0-9]+)", flags=re.ASCII | re.DOTALL)
_TRAILER_RE: LazyRe[str] = LazyRe(r"(\S+) (.+)", flags=re.DOTALL)
_LOOKS_LIKE_SIZES_RE: LazyRe[str] = LazyRe(r" [0-9]+->[0-9]+\Z", flags=re.ASCII)


# Characters that must not appear raw in a one-line trailer: controls (incl. U+0085),
# line/paragraph separators and lone surrogates (not encodable as UTF-8).
_UNSAFE = frozenset({"Cc", "Cs", "Zl", "Zp"})


def _needs_quoting(path: str) -> bool:
    """True if a bare ``path`` would not survive a trip through a one-line trailer."""
    if path.startswith('"') or path != path.strip():
        return True
    if _LOOKS_LIKE_SIZES_RE.search(path):  # "notes 1->2" would read back as sizes
        return True
    return any(unicodedata.category(c) in _UNSAFE for c in path)


@recordclass(frozen=True)
class Flag:
    """A suspected accidental loss of memory in one file.

    Trailer value format: ``<kind> <path>[ <old_size>-><new_size>]``, e.g.
    ``shrink summary.md 7285->1509``, ``delete runs/a.md``, ``rewrite x.md``.  The path
    is written as is -- spaces and non-ASCII included -- unless that would be ambiguous
    or not fit on one line (it starts with ``"``, has leading/trailing white space or
    control characters, or ends in something that looks like sizes); then it is written
    as a JSON string literal.  Sizes are written when both are known;
    :func:`integrity_flags` sets them for ``shrink`` only (they are its evidence).
    ``Flag.parse(f.trailer()) == f`` for every valid flag.
    """

    kind: FlagKind
    path: str
    old_size: int | None
    new_size: int | None

    def __post_init__(self) -> None:
        if self.kind not in _KINDS:
            raise ValueError(f"unknown flag kind {self.kind!r} (valid kinds: {', '.join(_KINDS)})")
        if not self.path:
            raise ValueError("flag path is empty")
        if (self.old_size is None) != (self.new_size is None):
            raise ValueError("flag sizes must be both given or both None")
        for size in (self.old_size, self.new_size):
            if size is not None and (isinstance(size, bool) or size < 0):
                raise ValueError(f"flag size must be a non-negative int, got {size!r}")

    def trailer(self) -> str:
        if _needs_quoting(self.path):
            import json  # only a path that needs quoting

            # JSON leaves U+0085, U+2028, lone surrogates... raw: escape them too.
            path = "".join(
                f"\\u{ord(c):04x}" if unicodedata.category(c) in _UNSAFE else c
                for c in json.dumps(self.path, ensure_ascii=False)
            )
        else:
            path = self.path
        sizes = "" if self.old_size is None else f" {self.old_size}->{self.new_size}"
        return f"{self.kind} {path}{sizes}"

    @classmethod
    def parse(cls, trailer_value: str) -> Flag:
        """Inverse of :meth:`trailer`; ValueError on what it would not have written."""
        value = trailer_value.strip()
        m = _TRAILER_RE.fullmatch(value)
        if m is None or m.group(1) not in _KINDS:
            raise ValueError(f"not a memsync flag: {value!r}")
        kind = cast(FlagKind, m.group(1))
        rest = m.group(2)
        old_size: int | None = None
        new_size: int | None = None
        if rest.startswith('"'):
            import json  # only a quoted path

            try:
                path, end = json.JSONDecoder().raw_decode(rest)
            except json.JSONDecodeError as exc:
                raise ValueError(f"not a memsync flag (bad quoted path): {value!r}") from exc
            tail = rest[end:]
            if not isinstance(path, str):
                raise ValueError(f"not a memsync flag (bad quoted path): {value!r}")
            if tail:
                sm = _SIZES_RE.fullmatch(tail[1:]) if tail.startswith(" ") else None
                if sm is None:
                    raise ValueError(f"not a memsync flag (junk after path): {value!r}")
                old_size, new_size = int(sm.group(1)), int(sm.group(2))
        else:
            bm = _BARE_WITH_SIZES_RE.fullmatch(rest)
            if bm is not None:
                path, old_size, new_size = (
                    bm.group(1),
                    int(bm.group(2)),
                    int(bm.group(3)),
                )
            else:
                path = rest
        return cls(kind, path, old_size, new_size)


# --- integrity ------------------------------------------------------------------------


def is_binary(data: bytes) -> bool:
    """Git's heuristic: a NUL byte in the first 8 KiB."""
    return data.find(b"\0", 0, BINARY_SNIFF_BYTES) != -1


def survival(old: bytes, new: bytes) -> float:
    """Fraction of ``old``'s text still present in ``new``, in [0, 1].

    Each non-blank line of ``old`` (compared with surrounding white space stripped, so
    re-indenting or CRLF/LF changes are not loss) survives if an equal line is still
    available in ``new``; lines are matched as a multiset, so a line ``old`` has five
    times survives at most as often as ``new`` has it.  Survivors are weighted by their
    length, so short boilerplate (headings, ``---``) cannot outweigh the paragraphs that
    were lost.  Linear time (expected): sets/Counters of lines, all hashing; a
    Python-level loop (over the lines common to both) runs only when ``old`` repeats a
    line.  A file with no non-blank lines has nothing to lose: 1.0.
    """
    old_lines = list(filter(None, map(bytes.strip, old.splitlines())))
    total = sum(map(len, old_lines))
    if not total:
        return 1.0
    new_lines = map(bytes.strip, new.splitlines())
    old_set = set(old_lines)
    # No repeated line in old (the usual case): each line survives once or not at all.
    if len(old_set) == len(old_lines):
        kept = sum(map(len, old_set.intersection(new_lines)))
    else:
        old_count, new_count = Counter(old_lines), Counter(new_lines)
        common = old_count.keys() & new_count.keys()
        kept = sum(len(line) * min(old_count[line], new_count[line]) for line in common)
    return kept / total


def _flag_for(change: FileChange, actor: Actor) -> Flag | None:
    old, new = change.old, change.new
    if old is None or change.created_in_same_run:
        return None  # nothing that predates this run can be lost
    if new is None:
        # Deletions by the operator or by watch mode mirror what a human did on purpose.
        return Flag("delete", change.path, None, None) if actor == "run" else None
    if old == new:
        return None
    old_len, new_len = len(old), len(new)
    if old_len - new_len >= SHRINK_MIN_BYTES and 2 * new_len <= old_len:
        return Flag("shrink", change.path, old_len, new_len)
    if (
        old_len >= REWRITE_MIN_OLD_BYTES
        and not new.startswith(old)  # pure append: everything survives
        and not is_binary(old)
        and not is_binary(new)
        and survival(old, new) < REWRITE_MAX_SURVIVAL
    ):
        return Flag("rewrite", change.path, None, None)
    return None


def integrity_flags(changes: Iterable[FileChange], actor: Actor) -> list[Flag]:
    """Flags for changes that look like an accidental loss of memory, ordered by path.

    * ``shrink``: lost >= half of its bytes and >= 1 KiB (any actor).
    * ``delete``: deleted by a ``run``; deletions by ``operator``/``watch`` are
      deliberate human actions.
    * ``rewrite``: text on both sides, old >= 512 bytes, not a shrink, and under 25 % of
      the old text survives (see :func:`survival`) (any actor).

    A change with ``created_in_same_run`` is never flagged.  At most one flag per
    change.
    """
    if actor not in _ACTORS:
        raise ValueError(f"unknown actor {actor!r} (valid actors: {', '.join(_ACTORS)})")
    flags = [f for f in (_flag_for(c, actor) for c in changes) if f is not None]
    flags.sort(key=lambda f: (f.path, f.kind))
    return flags
