"""checks/merge_policy: the `merge:` key parsed strictly, the first matching rule wins, the
defaults after the memory's own rules, and git's rule files recognised at any depth."""

from __future__ import annotations

import pytest

from memsync.checks.merge_policy import DEFAULT, MergeRule, is_rule_file, parse_rules, rule_file_line, strategy_for


def test_no_rules_means_the_defaults() -> None:
    assert parse_rules(None) == []
    assert strategy_for([], "notes/log.jsonl") == "append"
    assert strategy_for([], "log.md") == "append" and strategy_for([], "deep/log.md") == "append"
    assert strategy_for([], "state.json") == "structured" and strategy_for([], "a/b.yml") == "structured"
    assert strategy_for([], "summary.md") == DEFAULT == "keep-both"


def test_the_first_matching_rule_wins_before_the_defaults() -> None:
    rules = parse_rules([{"path": "notes/**", "strategy": "union"}, {"path": "*.md", "strategy": "ours"},
                         {"path": "*.jsonl", "strategy": "keep-both"}])
    assert rules[0] == MergeRule("notes/**", "union")
    assert strategy_for(rules, "notes/deep/a.md") == "union"
    assert strategy_for(rules, "top.md") == "ours" and strategy_for(rules, "x/y/top.md") == "ours"
    assert strategy_for(rules, "events.jsonl") == "keep-both"  # the memory's own rule beats the default
    assert strategy_for(rules, "state.json") == "structured"


@pytest.mark.parametrize(("raw", "message"), [
    ("*.md", "expected a list"),
    (["*.md"], "merge[0]: expected a mapping"),
    ([{"path": "*.md", "strategy": "newest"}], "unknown strategy 'newest'"),
    ([{"path": "*.md", "strategy": "union", "why": 1}], "unknown key 'why'"),
    ([{"strategy": "union"}], "'path' is missing"),
    ([{"path": "*.md", "strategy": "union"}, {"path": 3, "strategy": "ours"}], "merge[1]"),
])
def test_a_malformed_entry_is_named(raw: object, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("*", r"\*")):
        parse_rules(raw)


def test_rule_files_are_known_at_any_depth_and_reported_by_name() -> None:
    assert is_rule_file(".gitattributes") and is_rule_file("notes/.gitignore")
    assert not is_rule_file("gitattributes.md") and not is_rule_file(".gitattributes/x")
    assert "notes/.gitignore" in rule_file_line("notes/.gitignore")
