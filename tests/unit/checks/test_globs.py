"""checks/globs.py: one rule set (gitignore's) for `protect:`, `merge:` and agents' patterns."""

from __future__ import annotations

import pytest

from memsync.agents.registry import CLAUDE_CODE, allowed_path
from memsync.checks import globs
from memsync.checks.merge_policy import parse_rules, strategy_for
from memsync.checks.protect import ProtectRule, parse_protect


@pytest.mark.parametrize(("pattern", "path", "expected"), [
    ("*.md", "a.md", True),
    ("*.md", "notes/deep/a.md", True),  # no '/': at any depth
    ("notes/*.md", "notes/a.md", True),
    ("notes/*.md", "x/notes/a.md", False),  # a '/' inside: anchored at the root
    ("notes/*.md", "notes/deep/a.md", False),  # '*' never crosses a '/'
    ("/summary.md", "summary.md", True),  # a leading '/': anchored
    ("/summary.md", "notes/summary.md", False),
    ("summary.md", "notes/summary.md", True),
    ("reference/", "reference/a.md", True),  # a trailing '/': below a folder only
    ("reference/", "reference", False),
    ("reference", "reference/deep/a.md", True),  # a folder takes everything below it
    ("runs/**", "runs/a/b.md", True),
    ("runs/**", "runs", False),
    ("**/log.md", "log.md", True),
    ("**/log.md", "a/b/log.md", True),
    ("a/**/b.md", "a/b.md", True),
    ("a/**/b.md", "a/x/y/b.md", True),
    ("[!a]*.md", "b.md", True),
    ("[!a]*.md", "a.md", False),
    ("\\!bang.md", "!bang.md", True),
])
def test_gitignore_rules(pattern: str, path: str, expected: bool) -> None:
    assert globs.matches(pattern, path) is expected
    assert ProtectRule(pattern, "read-only").matches(path) is expected
    assert (strategy_for(parse_rules([{"path": pattern, "strategy": "union"}]), path) == "union") is expected


def test_a_list_reads_negations_as_git_does() -> None:
    assert globs.matches_list(("*.md", "!/keep.md"), "a/keep.md")
    assert not globs.matches_list(("*.md", "!/keep.md"), "keep.md")


@pytest.mark.parametrize(("pattern", "problem"), [
    ("!notes/*.md", "cannot be a negation"), ("", "empty"), ("a/../b", "'..'"), ("a//b", "empty"),
    ("//x", "relative"), ("C:/x", "relative"),
])
def test_bad_single_patterns_are_refused(pattern: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        parse_protect([{"path": pattern, "mode": "read-only"}])
    with pytest.raises(ValueError, match=problem):
        parse_rules([{"path": pattern, "strategy": "union"}])


def test_agents_memory_files_are_anchored() -> None:
    assert allowed_path(CLAUDE_CODE, "CLAUDE.md")
    assert allowed_path(CLAUDE_CODE, "rules/a/b.md")
    assert allowed_path(CLAUDE_CODE, "projects/p/memory/MEMORY.md")
    assert not allowed_path(CLAUDE_CODE, "projects/CLAUDE.md")  # at the root only
    assert not allowed_path(CLAUDE_CODE, "rules")
    assert not allowed_path(CLAUDE_CODE, "projects/p/other.md")
    assert not allowed_path(CLAUDE_CODE, "rules/cache.sqlite")  # never synced, wherever it is
    assert not allowed_path(CLAUDE_CODE, "rules/x.db/a.md")
