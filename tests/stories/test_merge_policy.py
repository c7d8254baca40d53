"""Structured merges: JSONL and the log merge by line union out of the box, and storage.yaml's
`merge:` policy chooses union, keep-both, ours or theirs per path."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from memsync.checks.merge_policy import DEFAULT_RULES, MergeRule, parse_rules, strategy_for
from tests.conftest import Cli, hub_tree, memsync_cmd, write
from tests.helpers.figures import Figures, figures, size
from tests.helpers.gathered import losers

__all__ = ["figures"]


def _clone(cli: Cli, tmp_path: Path, name: str, policy: str = "") -> Path:
    dest = tmp_path / name
    assert cli("clone", "research", str(dest), cwd=tmp_path).code == 0
    if policy:
        cfg = dest / ".vm0" / "storage.yaml"
        cfg.write_text(cfg.read_text() + policy)
    return dest


def _diverge(cli: Cli, memory: Path, tmp_path: Path, path: str, base: str, mine: str, theirs: str,
             policy: str = "") -> tuple[Path, object]:
    """`path` at `base` on the hub; another writer pushes `theirs`, then this one pushes `mine`."""
    write(memory, path, base)
    assert cli("push", cwd=memory).code == 0
    other = _clone(cli, tmp_path, "other")
    write(other, path, theirs)
    assert cli("push", cwd=other).code == 0
    if policy:
        cfg = memory / ".vm0" / "storage.yaml"
        cfg.write_text(cfg.read_text() + policy)
    write(memory, path, mine)
    result = cli("push", cwd=memory)
    assert result.code == 0, result.err
    return memory, result


def test_jsonl_appends_merge_by_union_by_default(memory: Path, tmp_path: Path, cli: Cli) -> None:
    base = '{"n": 0}\n'
    _diverge(cli, memory, tmp_path, "events.jsonl", base, base + '{"n": "mine"}\n', base + '{"n": "theirs"}\n')
    tree = hub_tree()
    assert tree["events.jsonl"] == b'{"n": 0}\n{"n": "mine"}\n{"n": "theirs"}\n'
    assert not [p for p in tree if ".conflict" in p]
    assert [json.loads(line) for line in tree["events.jsonl"].splitlines()]  # still valid JSON lines


@pytest.mark.parametrize(("strategy", "expected", "copies"), [
    ("union", b"# Notes\nmine\ntheirs\n", 0),
    ("ours", b"# Notes\nmine\n", 0),
    ("theirs", b"# Notes\ntheirs\n", 0),
    ("keep-both", b"# Notes\nmine\n", 1),
])
def test_policy_from_storage_yaml(memory: Path, tmp_path: Path, cli: Cli, strategy: str, expected: bytes,
                                  copies: int) -> None:
    policy = f'merge:\n  - {{path: "notes/**", strategy: {strategy}}}\n'
    _diverge(cli, memory, tmp_path, "notes/a.md", "# Notes\n", "# Notes\nmine\n", "# Notes\ntheirs\n",
              policy)
    tree = hub_tree()
    assert tree["notes/a.md"] == expected
    kept = losers(tree, "notes/a.md")
    assert len(kept) == copies
    if copies:
        assert kept == [b"# Notes\ntheirs\n"]


def test_a_rule_of_the_memory_overrides_the_default(memory: Path, tmp_path: Path, cli: Cli) -> None:
    policy = 'merge:\n  - {path: "*.jsonl", strategy: keep-both}\n'
    _diverge(cli, memory, tmp_path, "e.jsonl", "a\n", "a\nmine\n", "a\ntheirs\n", policy)
    tree = hub_tree()
    assert tree["e.jsonl"] == b"a\nmine\n"
    assert losers(tree, "e.jsonl") == [b"a\ntheirs\n"]


def test_modification_beats_deletion_whatever_the_policy(memory: Path, tmp_path: Path, cli: Cli) -> None:
    write(memory, "notes/b.md", "keep me\n")
    assert cli("push", cwd=memory).code == 0
    other = _clone(cli, tmp_path, "other")
    write(other, "notes/b.md", "keep me\nand more\n")
    assert cli("push", cwd=other).code == 0
    cfg = memory / ".vm0" / "storage.yaml"
    cfg.write_text(cfg.read_text() + 'merge:\n  - {path: "notes/**", strategy: ours}\n')
    (memory / "notes" / "b.md").unlink()
    assert cli("push", cwd=memory).code == 0
    assert hub_tree()["notes/b.md"] == b"keep me\nand more\n"


def test_rules_match_like_protect_and_defaults_apply_last() -> None:
    rules = parse_rules([{"path": "notes/**", "strategy": "ours"}, {"path": "*.md", "strategy": "theirs"}])
    assert strategy_for(rules, "notes/x/y.jsonl") == "ours"
    assert strategy_for(rules, "deep/dir/a.md") == "theirs"
    assert strategy_for([], "deep/dir/events.jsonl") == "append"
    assert strategy_for([], "log.md") == "append"
    assert strategy_for([], "summary.md") == "keep-both"
    assert MergeRule("*.jsonl", "append") in DEFAULT_RULES


@pytest.mark.parametrize(("text", "problem"), [
    ('merge:\n  - {path: "*.md", strategy: newest}\n', "merge[0]: unknown strategy 'newest'"),
    ("merge: union\n", "merge: expected a list"),
    ('merge:\n  - {path: "../x", strategy: union}\n', "merge[0]: 'path' must not contain '..'"),
    ('merge:\n  - {pattern: "*.md", strategy: union}\n', "merge[0]: unknown key 'pattern'"),
])
def test_bad_merge_policy_is_a_config_error_with_line_and_hint(memory: Path, text: str, problem: str) -> None:
    cfg = memory / ".vm0" / "storage.yaml"
    lines = cfg.read_text().count("\n")
    cfg.write_text(cfg.read_text() + text)
    proc = memsync_cmd("status", cwd=memory)
    assert proc.returncode == 3, proc.stderr
    first, hint = proc.stderr.splitlines()[:2]
    assert first.startswith(f"error: {cfg}:{lines + 1}: ") and problem in first
    assert hint.startswith("hint: write e.g. `merge:") and "keep-both" in hint
    assert "Traceback" not in proc.stderr


WRITER = """\
import os, pathlib
mem = pathlib.Path(os.environ["MEMSYNC_MEMORY_DIR"])
rid = os.environ["MEMSYNC_RUN_ID"]
with open(mem / "events.jsonl", "a") as fh:
    fh.write('{"run": "%s"}\\n' % rid)
with open(mem / "notes" / "shared.md", "a") as fh:
    fh.write("- note of %s\\n" % rid)
"""


@pytest.mark.stress
def test_concurrent_runs_append_jsonl_and_notes_without_conflict_copies(
        memory: Path, tmp_path: Path, cli: Cli, figures: Figures) -> None:
    write(memory, "events.jsonl", "")
    write(memory, "notes/shared.md", "# Shared notes\n")
    assert cli("push", cwd=memory).code == 0
    agent = tmp_path / "writer.py"
    agent.write_text(WRITER)
    writers = size(6, 32)
    sandboxes = [_clone(cli, tmp_path, f"sandbox-{i}", 'merge:\n  - {path: "notes/**", strategy: union}\n')
                 for i in range(writers)]
    procs = [subprocess.Popen([sys.executable, "-m", "memsync", "run", "--run-id", f"w{i}", "--checkpoint", "0",
                               "--", sys.executable, str(agent)], cwd=box, env=dict(os.environ),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i, box in enumerate(sandboxes)]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    tree = hub_tree()
    events = [json.loads(line)["run"] for line in tree["events.jsonl"].splitlines()]
    assert sorted(events) == sorted(f"w{i}" for i in range(writers))
    notes = tree["notes/shared.md"].decode().splitlines()
    assert notes[0] == "# Shared notes" and sorted(notes[1:]) == sorted(f"- note of w{i}" for i in range(writers))
    copies = [p for p in tree if ".conflict" in p]
    figures.add("structured-merge writers", writers)
    figures.add("jsonl lines appended", writers)
    figures.add("jsonl lines present", len(set(events) & {f"w{i}" for i in range(writers)}))
    figures.add("conflict copies of union files", len(copies))
    assert not copies
    assert memsync_cmd("status", cwd=sandboxes[0]).returncode == 0
