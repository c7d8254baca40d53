"""How a file is merged when two writers changed the same lines: the `merge:` key of storage.yaml.

    merge:
      - {path: "*.jsonl", strategy: union}
      - {path: "notes/**", strategy: keep-both}

Strategies (applied only where the two sides conflict; changes to different lines always merge):
`append` (the default for `log.md` and JSON lines) keeps every line each side added, once, ours
first, and applies to every file both sides changed (checks/appendmerge.py); `union` keeps the
lines of both sides of a conflicting hunk (ours first; lines the two hunks share may come out
twice, as with git's union driver), `keep-both` keeps ours at the path and theirs
beside it as a conflict copy, `ours` / `theirs` take that side's version of each conflicting hunk,
`structured` (the default for JSON and YAML) merges key by key (structured.py).
Whatever the strategy, a merged JSON, JSON lines or YAML file that does not parse is never
committed: both sides are kept instead.
"Ours" is the side merging (the run, the operator pushing); "theirs" is what the hub already has.
A modification always beats a deletion, whatever the strategy. The first matching rule wins;
after the memory's own rules come the defaults below. Patterns follow gitignore's rules, as for
`protect:` (checks/globs.py). Nothing in the tree (a `.gitattributes`
`merge=` rule) has a say: see git/mergeattrs.py.
"""

from __future__ import annotations

from memsync.checks import globs
from memsync.util.records import recordclass

STRATEGIES = ("append", "union", "keep-both", "ours", "theirs", "structured")
DEFAULT = "keep-both"


@recordclass(frozen=True)
class MergeRule:
    pattern: str
    strategy: str

    def matches(self, path: str) -> bool:
        return globs.matches(self.pattern, path)


# Append-only files agents write: JSON lines and the contract's log keep every appended line once;
# JSON and YAML documents merge by their structure.
DEFAULT_RULES = (MergeRule("*.jsonl", "append"), MergeRule("*.ndjson", "append"), MergeRule("log.md", "append"),
                 MergeRule("*.json", "structured"), MergeRule("*.yaml", "structured"),
                 MergeRule("*.yml", "structured"))


def parse_rules(raw: object) -> list[MergeRule]:
    """The YAML-loaded value of `merge:`; a ValueError naming the entry if it is malformed."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise ValueError(f"merge: expected a list of {{path, strategy}} entries, got {type(raw).__name__}")
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
        problem = globs.check(pattern)
        if problem is not None:
            raise ValueError(f"merge[{i}]: {problem}")
        if strategy not in STRATEGIES:
            raise ValueError(f"merge[{i}]: unknown strategy {strategy!r} (valid: {', '.join(STRATEGIES)})")
        rules.append(MergeRule(pattern, str(strategy)))
    return rules


RULE_FILES = (".gitattributes", ".gitignore")


def is_rule_file(path: str) -> bool:
    """A file git reads rules from, which memsync does not follow (BRIEF rule 7): a change to one is
    recorded like a policy change (`Memsync-Flag: rule-file-changed PATH` on a commit that makes it,
    a warning when a version from the hub brings it)."""
    return path.rsplit("/", 1)[-1] in RULE_FILES


def rule_file_line(path: str) -> str:
    """What a hub version that changed a rule file is reported as."""
    from memsync.util.textsafe import display_path

    return (f"the hub's version changed {display_path(path)}: memsync merges and ignores by the memory's "
            "storage.yaml and its defaults, never by that file")


def strategy_for(rules: list[MergeRule], path: str) -> str:
    for rule in (*rules, *DEFAULT_RULES):
        if rule.matches(path):
            return rule.strategy
    return DEFAULT
