"""The one glob engine: `protect:` and `merge:` rules in storage.yaml and coding agents' memory
files all match paths by gitignore's rules (pathspec's gitwildmatch), the rules users know:

- a pattern without a `/` (but a trailing one) matches a name at any depth (`*.md` matches
  `notes/a.md`); one with a `/` at the start or in the middle is anchored at the memory's root
  (`/summary.md`, `notes/*.md`);
- `*` and `?` never match a `/`; `[a-z]` and `[!a-z]` are classes (pathspec lets a negated class
  match a `/`, where git's own matcher does not); `\\x` is a literal x;
- `**/` at the start: in any folder; `/**/`: zero or more folders; `/**` at the end: everything
  below (not the folder itself);
- a pattern that matches a folder matches everything below it; a trailing `/` matches only
  below a folder (`reference/`).
- trailing spaces are dropped unless escaped (`\\ `), as git drops them.

A single rule (`protect:`, `merge:`) cannot be a negation (`!pattern`): its list is read first
match wins, so an exception is written as an earlier rule. A list read as a whole, as
gitignore reads a file (`matches_list`), takes `!` as git does: the last matching line decides.

pathspec is imported only when a pattern is first compiled, so a command whose memory has no
rules never imports it.
"""

from __future__ import annotations

import functools
from typing import Any

__all__ = ["check", "matches", "matches_list"]


@functools.lru_cache(maxsize=1024)
def _compiled(patterns: tuple[str, ...]) -> Any:
    import re

    import pathspec

    try:
        return pathspec.GitIgnoreSpec.from_lines(patterns)
    except (ValueError, re.error) as exc:  # pathspec's GitWildMatchPatternError; a class like [z-a]
        raise ValueError(f"invalid pattern {', '.join(map(repr, patterns))}: {exc}") from None


def matches(pattern: str, path: str) -> bool:
    """Whether the posix `path` (relative to the memory's root) falls under `pattern`. ValueError
    for a pattern pathspec refuses."""
    return bool(_compiled((pattern,)).match_file(path))


def matches_list(patterns: tuple[str, ...], path: str) -> bool:
    """Whether `path` falls under a gitignore-style list (`!` lines take paths back out)."""
    return bool(_compiled(patterns).match_file(path))


def check(pattern: str) -> str | None:
    """What is wrong with a single rule's pattern (for an `error:` line), or None."""
    if not pattern.strip():
        return "'path' is empty"
    if pattern.startswith("!"):
        return (f"'path' cannot be a negation, got {pattern!r}: the first matching rule wins, so list "
                "the exception as an earlier rule (a file named with a leading '!' is written '\\!name')")
    if pattern.startswith("//") or (pattern[1:2] == ":" and pattern[:1].isalpha() and pattern[2:3] in ("/", "\\")):
        return f"'path' must be relative to the memory root, got {pattern!r}"
    segs = pattern.removeprefix("/").removesuffix("/").split("/")
    if ".." in segs:
        return f"'path' must not contain '..', got {pattern!r}"
    if "" in segs or "." in segs:
        return f"'path' has an empty or '.' segment, got {pattern!r}"
    try:
        _compiled((pattern,))
    except ValueError as exc:
        return str(exc)
    return None
