"""Protect policies: does a memory commit break a ``protect:`` rule of storage.yaml
(``append-only`` / ``read-only`` / ``review``)?  The caller decides what to do.

Pure: bytes and paths in, findings out, over the same file changes the integrity guard
(guard.py) judges.  Nothing here touches git, the file system or the clock.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Literal, cast, get_args

from memsync.checks import globs
from memsync.checks.guard import FileChange
from memsync.util.records import recordclass

__all__ = [
    "SEEDING_REASON",
    "VALID_MODES",
    "Mode",
    "ProtectRule",
    "Violation",
    "allow_seeding",
    "for_review",
    "parse_protect",
    "policy_violations",
]

Mode = Literal["append-only", "read-only", "review"]
VALID_MODES: tuple[str, ...] = get_args(Mode)


@recordclass(frozen=True)
class ProtectRule:
    """One ``protect:`` entry: paths matching ``pattern`` get ``mode``."""

    pattern: str
    mode: Mode

    def matches(self, path: str) -> bool:
        """Does the posix path (relative to the memory root) fall under this rule?"""
        return globs.matches(self.pattern, path)


def parse_protect(raw: object) -> list[ProtectRule]:
    """Validate the YAML-loaded value of ``protect:``; None (empty key) means no rules.

    Each entry is a mapping ``{path: <glob>, mode: append-only|read-only|review}``.  Errors are
    a ValueError with a one-line message naming the entry, e.g.
    ``protect[1]: unknown mode 'readonly' (valid modes: append-only, read-only, review)``.
    """
    if raw is None:
        return []
    # ValueError, not TypeError, throughout: callers catch one exception for bad config.
    if not isinstance(raw, list):
        raise ValueError(f"protect: expected a list of {{path, mode}} entries, got {type(raw).__name__}")
    valid = ", ".join(VALID_MODES)
    rules: list[ProtectRule] = []
    for i, entry in enumerate(raw):
        where = f"protect[{i}]"
        if not isinstance(entry, Mapping):
            raise ValueError(
                f"{where}: expected a mapping with 'path' and 'mode', got {type(entry).__name__}"
            )
        unknown = sorted(str(k) for k in entry if k not in ("path", "mode"))
        if unknown:
            raise ValueError(f"{where}: unknown key {unknown[0]!r} (valid keys: path, mode)")
        if "path" not in entry:
            raise ValueError(f"{where}: missing 'path'")
        pattern = entry["path"]
        if not isinstance(pattern, str):
            raise ValueError(f"{where}: 'path' must be a string, got {type(pattern).__name__}")
        problem = globs.check(pattern)
        if problem is not None:
            raise ValueError(f"{where}: {problem}")
        if "mode" not in entry:
            raise ValueError(f"{where}: missing 'mode' (valid modes: {valid})")
        mode = entry["mode"]
        if not isinstance(mode, str) or mode not in VALID_MODES:
            raise ValueError(f"{where}: unknown mode {mode!r} (valid modes: {valid})")
        rules.append(ProtectRule(pattern, cast(Mode, mode)))
    return rules


@recordclass(frozen=True)
class Violation:
    """A change that breaks the first protect rule matching its path."""

    path: str
    rule: ProtectRule
    reason: str  # one line, e.g. "append-only: existing content was changed"


def _violation_reason(change: FileChange, mode: Mode) -> str | None:
    old, new = change.old, change.new
    if mode == "review":
        return None  # a run's change there becomes a proposal (for_review), never refused
    if mode == "append-only":
        if old is None:
            return None  # adding files is what append-only is for
        if new is None:
            return "append-only: file deleted"
        return None if new.startswith(old) else "append-only: existing content was changed"
    if old is None:
        return "read-only: file added"
    if new is None:
        return "read-only: file deleted"
    return "read-only: file changed"


SEEDING_REASON = "read-only: file added"


def allow_seeding(violations: Sequence[Violation], tracked: Iterable[str]) -> list[Violation]:
    """The operator's first push into a read-only path is allowed: files added under a
    read-only rule that matches no file yet are the reference files being seeded. (Runs never
    get this: the policy binds runs, not the person who seeds them.)"""
    seeding = [v for v in violations if v.reason == SEEDING_REASON]
    if not seeding:
        return list(violations)
    rules = {v.rule for v in seeding}
    occupied: set[ProtectRule] = set()
    for path in tracked:
        for rule in rules - occupied:
            if rule.matches(path):
                occupied.add(rule)
        if occupied == rules:
            break
    return [v for v in violations if v.reason != SEEDING_REASON or v.rule in occupied]


def for_review(path: str, rules: Sequence[ProtectRule]) -> bool:
    """Whether a run's change to `path` waits for review (its first matching rule is `mode:
    review`): it is kept out of the memory's version and made a proposal (sync/proposing.py)."""
    rule = next((r for r in rules if r.matches(path)), None)
    return rule is not None and rule.mode == "review"


def policy_violations(changes: Iterable[FileChange], rules: Sequence[ProtectRule]) -> list[Violation]:
    """Changes that break a protect rule, ordered by path.

    For each changed path only the FIRST rule (in storage.yaml order) whose pattern
    matches applies, so put the more specific pattern first: with ``[{path:
    runs/final/**, mode: read-only}, {path: runs/**, mode: append-only}]`` files under
    runs/final are read-only and the rest of runs/ is append-only.  Rules apply whoever
    the actor is; ``created_in_same_run`` is not considered.  Changes with identical old
    and new content are ignored.
    """
    found: list[Violation] = []
    for change in changes:
        if change.old == change.new:
            continue
        rule = next((r for r in rules if r.matches(change.path)), None)
        if rule is None:
            continue
        reason = _violation_reason(change, rule.mode)
        if reason is not None:
            found.append(Violation(change.path, rule, reason))
    found.sort(key=lambda v: v.path)
    return found
