"""The checks a proposal meets, and its size: files, lines added and removed, flags.

The checks a proposal's files meet are those of any commit (the integrity guard as for a run,
the secret scanner, the protect rules): a proposal pushed by hand, without memsync, meets them
here before it can be accepted.
"""

from __future__ import annotations

import difflib
from collections import Counter

from memsync.checks import guard, protect
from memsync.checks.guard import FileChange
from memsync.core.memory import Memory
from memsync.git import proposaltree
from memsync.git.proposaltree import Change
from memsync.util.records import field, recordclass

MAX_PATCH_LINES = 4000
MAX_PATCH_BYTES = 1024 * 1024  # larger files get counts, not a patch (difflib is quadratic at worst)
MAX_TEXT = 8 * 1024 * 1024  # larger files are not scanned for secrets here (the commit side scans them)


@recordclass
class FileReview:
    path: str
    kind: str  # added, modified, deleted
    added: int = 0
    removed: int = 0
    binary: bool = False
    patch: str = ""


@recordclass
class Checked:
    flags: list[str] = field(default_factory=list)  # integrity flags, as trailers
    secrets: list[str] = field(default_factory=list)  # "path:line rule preview" (redacted)
    violations: list[str] = field(default_factory=list)  # "path: reason" (protect rules)


def blob_data(mem: Memory, oid: str | None) -> bytes | None:
    return None if oid is None else proposaltree.blob(mem.git, oid)


def check_changes(mem: Memory, changes: list[Change]) -> Checked:
    """The integrity guard (as for a run), the secret scan and the protect rules over `changes`."""
    from memsync.checks.secrets import scan_bytes

    found = Checked()
    pairs = [FileChange(c.path, blob_data(mem, c.old), blob_data(mem, c.new)) for c in changes]
    found.flags = [f.trailer() for f in guard.integrity_flags(pairs, "run")]
    if mem.config.protect:
        rules = protect.parse_protect(mem.config.protect)
        found.violations = [f"{v.path}: {v.reason}" for v in protect.policy_violations(pairs, rules)]
    if mem.config.secrets != "off":
        for pair in pairs:
            if pair.new is not None and len(pair.new) <= MAX_TEXT:
                found.secrets += [f"{s.path}:{s.line} {s.rule} {s.preview}" for s in scan_bytes(pair.path, pair.new)]
    return found


def count_lines(old: bytes | None, new: bytes | None, with_patch: bool, path: str) -> FileReview:
    """Lines added and removed (as multisets of lines: linear time whatever a hostile file holds),
    and the unified patch when asked for and both sides are at most MAX_PATCH_BYTES."""
    kind = "added" if old is None else "deleted" if new is None else "modified"
    review = FileReview(path, kind)
    if guard.is_binary(old or b"") or guard.is_binary(new or b""):
        review.binary = True
        return review
    a = (old or b"").decode("utf-8", "replace").splitlines(keepends=True)
    b = (new or b"").decode("utf-8", "replace").splitlines(keepends=True)
    before, after = Counter(line.rstrip("\r\n") for line in a), Counter(line.rstrip("\r\n") for line in b)
    review.added = sum((after - before).values())
    review.removed = sum((before - after).values())
    if not with_patch:
        return review
    if len(old or b"") > MAX_PATCH_BYTES or len(new or b"") > MAX_PATCH_BYTES:
        review.patch = f"(no patch for {path}: larger than {MAX_PATCH_BYTES // 1024} KiB; `memsync diff` shows it)\n"
        return review
    lines = list(difflib.unified_diff(a, b, f"a/{path}" if old is not None else "/dev/null",
                                      f"b/{path}" if new is not None else "/dev/null", n=3))
    review.patch = "".join(line if line.endswith("\n") else line + "\n" for line in lines[:MAX_PATCH_LINES])
    return review


def summarise(mem: Memory, base: str | None, tip: str) -> tuple[list[str], int, int, list[str]]:
    """Files, lines added, lines removed and flags of the change from `base` to `tip`."""
    changes = proposaltree.changes(mem.git, base, tip)
    added = removed = 0
    for c in changes:
        counted = count_lines(blob_data(mem, c.old), blob_data(mem, c.new), False, c.path)
        added += counted.added
        removed += counted.removed
    checked = check_changes(mem, changes)
    flags = checked.flags + [f"secret {s}" for s in checked.secrets] + [f"protect {v}" for v in checked.violations]
    return [c.path for c in changes], added, removed, flags


__all__ = ["Checked", "FileReview", "blob_data", "check_changes", "count_lines", "summarise"]
