"""Tests for memsync.checks.protect: protect globs, parsing, policies and `mode: review` rules (a run's
change there waits for review, and is never a violation)."""

from __future__ import annotations

import pytest

from memsync.checks.guard import FileChange
from memsync.checks.protect import ProtectRule, Violation, for_review, parse_protect, policy_violations

# --- glob matching --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "path", "matches"),
    [
        ("runs/**", "runs/a.md", True),
        ("runs/**", "runs/2024/05/a.md", True),
        ("runs/**", "runs", False),  # the directory itself is not below itself
        ("runs/**", "runsx/a.md", False),
        ("runs/**", "old/runs/a.md", False),  # has a '/': anchored at the root
        ("*.md", "a.md", True),
        ("*.md", "deep/er/a.md", True),  # basename at any depth
        ("*.md", "a.mdx", False),
        ("*.md", ".md", True),  # '*' matches the empty string
        # '/**/' is zero or more directories
        ("reference/**/x.md", "reference/x.md", True),
        ("reference/**/x.md", "reference/a/b/x.md", True),
        ("reference/**/x.md", "reference/a/y.md", False),
        ("reference/**/x.md", "other/reference/x.md", False),
        ("a/*/b", "a/x/b", True),
        ("a/*/b", "a/b", False),
        ("a/*/b", "a/x/y/b", False),  # '*' does not cross '/'
        ("summary.md", "summary.md", True),
        ("summary.md", "people/summary.md", True),
        ("summary.md", "summary.md.bak", False),
        # a matched directory covers its contents (gitignore)
        ("reference", "reference/a.md", True),
        ("reference", "x/reference/a.md", True),
        ("reference/", "reference/a.md", True),
        ("reference/", "reference", False),  # trailing '/': directories only
        ("notes-2024.md", "a/notes-2024.md", True),  # "-" is literal outside classes
        ("note?.md", "note1.md", True),
        ("note?.md", "note10.md", False),
        ("a?b", "a/b", False),  # '?' does not match '/'
        ("**/x.md", "x.md", True),
        ("**/x.md", "a/b/x.md", True),
        ("**", "anything/at/all", True),
        ("a/**/b/**", "a/b/c", True),
        ("a/**/b/**", "a/q/r/b/c/d", True),
        ("log-[0-9].md", "log-7.md", True),
        ("log-[0-9].md", "log-x.md", False),
        ("log-[!0-9].md", "log-x.md", True),
        ("log-[!0-9].md", "log-/.md", True),  # pathspec's negated class takes a '/' (git's does not)
        ("a[/]b", "a/b", False),  # a class never matches '/'
        ("f\\*.md", "f*.md", True),  # backslash escapes
        ("f\\*.md", "fx.md", False),
        ("x.md", "xymd", False),  # '.' is literal
        ("my notes/*.md", "my notes/a b.md", True),
        ("ünï/*.md", "ünï/ç.md", True),
        ("a**b", "axxb", True),  # '**' inside a segment is a plain '*'
        ("a**b", "ax/xb", False),
    ],
)
def test_glob(pattern: str, path: str, matches: bool) -> None:
    assert ProtectRule(pattern, "read-only").matches(path) is matches


# --- parse_protect --------------------------------------------------------------------


def test_parse_protect_ok() -> None:
    raw = [
        {"path": "runs/**", "mode": "append-only"},
        {"path": "reference/**", "mode": "read-only"},
    ]
    assert parse_protect(raw) == [
        ProtectRule("runs/**", "append-only"),
        ProtectRule("reference/**", "read-only"),
    ]
    assert parse_protect([]) == []
    assert parse_protect(None) == []


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("runs/**", "protect: expected a list"),
        ({"path": "a", "mode": "read-only"}, "protect: expected a list"),
        (["runs/**"], "protect[0]: expected a mapping"),
        (
            [{"path": "a", "mode": "read-only"}, {"mode": "read-only"}],
            "protect[1]: missing 'path'",
        ),
        ([{"path": "a"}], "protect[0]: missing 'mode'"),
        (
            [{"path": "a", "mode": "readonly"}],
            "protect[0]: unknown mode 'readonly' (valid modes: append-only, read-only, review)",
        ),
        ([{"path": "a", "mode": None}], "protect[0]: unknown mode None"),
        ([{"path": "", "mode": "read-only"}], "protect[0]: 'path' is empty"),
        ([{"path": "  ", "mode": "read-only"}], "protect[0]: 'path' is empty"),
        ([{"path": 3, "mode": "read-only"}], "protect[0]: 'path' must be a string"),
        (
            [{"path": "//etc/**", "mode": "read-only"}],
            "protect[0]: 'path' must be relative",
        ),
        (
            [{"path": "C:/x", "mode": "read-only"}],
            "protect[0]: 'path' must be relative",
        ),
        (
            [{"path": "../x", "mode": "read-only"}],
            "protect[0]: 'path' must not contain '..'",
        ),
        (
            [{"path": "a/../x", "mode": "read-only"}],
            "protect[0]: 'path' must not contain '..'",
        ),
        (
            [{"path": "a//x", "mode": "read-only"}],
            "protect[0]: 'path' has an empty or '.' segment",
        ),
        (
            [{"path": "./x", "mode": "read-only"}],
            "protect[0]: 'path' has an empty or '.' segment",
        ),
        ([{"path": "log-[z-a]", "mode": "read-only"}], "protect[0]: invalid pattern"),
        (
            [{"path": "a", "mode": "read-only", "paht": "b"}],
            "protect[0]: unknown key 'paht'",
        ),
    ],
)
def test_parse_protect_errors(raw: object, message: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_protect(raw)
    assert str(info.value).startswith(message)
    assert "\n" not in str(info.value)


# --- policies -------------------------------------------------------------------------

APPEND = ProtectRule("runs/**", "append-only")
READ = ProtectRule("reference/**", "read-only")
RULES = [APPEND, READ]


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (FileChange("runs/new.md", None, b"log"), None),
        (FileChange("runs/a.md", b"line 1\n", b"line 1\nline 2\n"), None),
        (FileChange("runs/a.md", b"line 1\n", b"line 1\n"), None),
        (
            FileChange("runs/a.md", b"line 1\n", b"line 0\nline 1\n"),
            "append-only: existing content was changed",
        ),
        (
            FileChange("runs/a.md", b"line 1\n", b"line 1"),
            "append-only: existing content was changed",
        ),
        (
            FileChange("runs/a.md", b"line 1\n", b""),
            "append-only: existing content was changed",
        ),
        (FileChange("runs/a.md", b"line 1\n", None), "append-only: file deleted"),
        (FileChange("runs/a.md", b"", None), "append-only: file deleted"),
        (FileChange("reference/api.md", None, b"x"), "read-only: file added"),
        (FileChange("reference/api.md", b"x", b"xy"), "read-only: file changed"),
        (FileChange("reference/api.md", b"x", None), "read-only: file deleted"),
        (FileChange("reference/api.md", b"x", b"x"), None),
        (FileChange("notes.md", b"x", None), None),  # unprotected
    ],
)
def test_policy_modes(change: FileChange, reason: str | None) -> None:
    found = policy_violations([change], RULES)
    if reason is None:
        assert found == []
    else:
        rule = APPEND if change.path.startswith("runs/") else READ
        assert found == [Violation(change.path, rule, reason)]


def test_policy_first_matching_rule_wins() -> None:
    final = ProtectRule("runs/final/**", "read-only")
    # an append: fine for append-only, not for read-only
    change = FileChange("runs/final/a.md", b"x", b"xy")
    assert policy_violations([change], [final, APPEND]) == [
        Violation("runs/final/a.md", final, "read-only: file changed")
    ]
    assert policy_violations([change], [APPEND, final]) == []


def test_policy_ignores_created_in_same_run_and_sorts() -> None:
    changes = [
        FileChange("runs/z.md", b"x", None, created_in_same_run=True),
        FileChange("reference/a.md", None, b"x"),
    ]
    assert [v.path for v in policy_violations(changes, RULES)] == [
        "reference/a.md",
        "runs/z.md",
    ]


def test_policy_with_parsed_rules() -> None:
    rules = parse_protect(
        [
            {"path": "runs/**", "mode": "append-only"},
            {"path": "reference/**", "mode": "read-only"},
        ]
    )
    changes = [
        FileChange("runs/2024/a.md", b"a\n", b"b\n"),
        FileChange("reference/deep/x.md", b"x", None),
        FileChange("runs/2024/b.md", b"a\n", b"a\nb\n"),
    ]
    assert [(v.path, v.reason) for v in policy_violations(changes, rules)] == [
        ("reference/deep/x.md", "read-only: file deleted"),
        ("runs/2024/a.md", "append-only: existing content was changed"),
    ]


# --- review ---------------------------------------------------------------------------


def test_review_paths_follow_the_first_matching_rule() -> None:
    rules = parse_protect([{"path": "summary.md", "mode": "review"}, {"path": "notes/keep/**", "mode": "read-only"},
                           {"path": "notes/**", "mode": "review"}])
    assert for_review("summary.md", rules) and for_review("notes/a.md", rules)
    assert not for_review("notes/keep/a.md", rules)  # a read-only rule came first
    assert not for_review("runs/x.md", rules)


def test_a_review_path_is_never_a_violation() -> None:
    rules = parse_protect([{"path": "summary.md", "mode": "review"}])
    changes = [FileChange("summary.md", b"old\n", None), FileChange("summary.md", None, b"new\n")]
    assert policy_violations(changes, rules) == []
