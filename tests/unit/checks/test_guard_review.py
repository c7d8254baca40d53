"""`mode: review` protect rules: a run's change there waits for review, and is never a violation."""

from __future__ import annotations

from memsync.checks.guard import FileChange, for_review, parse_protect, policy_violations


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
