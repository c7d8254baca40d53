"""How a file is merged when two writers changed the same lines: the `merge:` key of storage.yaml.

    merge:
      - {path: "*.jsonl", strategy: union}
      - {path: "notes/**", strategy: keep-both}

Strategies (applied only where the two sides conflict; changes to different lines always merge):
`union` keeps the lines of both sides (ours first), `keep-both` keeps ours at the path and theirs
beside it as a conflict copy, `ours` / `theirs` take that side's version of each conflicting hunk.
"Ours" is the side merging (the run, the operator pushing); "theirs" is what the hub already has.
A modification always beats a deletion, whatever the strategy. The first matching rule wins;
after the memory's own rules come the defaults below. Patterns are gitignore-style, as for
`protect:` (a pattern without `/` matches at any depth).
"""

from __future__ import annotations

from dataclasses import dataclass

STRATEGIES = ("union", "keep-both", "ours", "theirs")
DEFAULT = "keep-both"


@dataclass(frozen=True)
class MergeRule:
    pattern: str
    strategy: str

    def matches(self, path: str) -> bool:
        from memsync.checks.guard import _compile_glob

        return _compile_glob(self.pattern).fullmatch(path) is not None


# Append-only files agents write: JSON lines and the contract's log merge line by line.
DEFAULT_RULES = (MergeRule("*.jsonl", "union"), MergeRule("*.ndjson", "union"), MergeRule("log.md", "union"))


def parse_rules(raw: object) -> list[MergeRule]:
    """The YAML-loaded value of `merge:`; a ValueError naming the entry if it is malformed."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise ValueError(f"merge: expected a list of {{path, strategy}} entries, got {type(raw).__name__}")
    from memsync.checks.guard import _check_pattern

    rules: list[MergeRule] = []
    for i, entry in enumerate(raw):
        if not isinstance(entry, dict):
            raise ValueError(f"merge[{i}]: expected a mapping like {{path: \"*.jsonl\", strategy: union}}")
        unknown = sorted(str(k) for k in entry if k not in ("path", "strategy"))
        if unknown:
            raise ValueError(f"merge[{i}]: unknown key {unknown[0]!r} (keys: path, strategy)")
        pattern, strategy = entry.get("path"), entry.get("strategy")
        if not isinstance(pattern, str):
            raise ValueError(f"merge[{i}]: 'path' is missing or not a string")
        problem = _check_pattern(pattern)
        if problem is not None:
            raise ValueError(f"merge[{i}]: {problem}")
        if strategy not in STRATEGIES:
            raise ValueError(f"merge[{i}]: unknown strategy {strategy!r} (valid: {', '.join(STRATEGIES)})")
        rules.append(MergeRule(pattern, str(strategy)))
    return rules


def strategy_for(rules: list[MergeRule], path: str) -> str:
    for rule in (*rules, *DEFAULT_RULES):
        if rule.matches(path):
            return rule.strategy
    return DEFAULT
