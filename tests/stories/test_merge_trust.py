"""Merge policy is the operator's, and a merge never produces a file that does not parse (issue 21,
part 4).

A `.gitattributes` in the tree can be written by the agent or by any hub writer: it no longer
chooses how memsync merges. JSON, JSON lines and YAML files both sides changed merge by structure
when every side parses; otherwise both sides are kept; a merged result that does not parse is never
committed, whatever the policy. Real memories, a real embedded hub, two writers that diverge.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from memsync.checks import structured
from memsync.util.names import is_gathered
from tests.conftest import Cli, git, hub_tree, memsync_cmd, write
from tests.helpers.figures import Figures, figures
from tests.helpers.gathered import losers

__all__ = ["figures"]


def _clone(cli: Cli, tmp_path: Path, name: str) -> Path:
    dest = tmp_path / name
    assert cli("clone", "research", str(dest), cwd=tmp_path).code == 0
    return dest


def _diverge(cli: Cli, memory: Path, tmp_path: Path, files: dict[str, str], mine: dict[str, str],
             theirs: dict[str, str], policy: str = "") -> None:
    """`files` on the hub; another writer pushes `theirs`, then this one pushes `mine`."""
    for path, text in files.items():
        write(memory, path, text)
    assert cli("push", cwd=memory).code == 0
    other = _clone(cli, tmp_path, "other")
    for path, text in theirs.items():
        write(other, path, text)
    assert cli("push", cwd=other).code == 0
    if policy:
        cfg = memory / ".vm0" / "storage.yaml"
        cfg.write_text(cfg.read_text() + policy)
    for path, text in mine.items():
        write(memory, path, text)
    result = cli("push", cwd=memory)
    assert result.code == 0, result.err


def _copies(tree: dict[str, bytes], stem: str) -> list[bytes]:
    """The losing versions of the file named `stem`.EXT, from its gathered conflict file."""
    return [data for p in tree if p.startswith(f"{stem}.") and is_gathered(p)
            for data in losers(tree, next(f for f in tree if f.startswith(f"{stem}.") and not is_gathered(f)))]


@pytest.mark.stress  # the security suite: counted in the reliability figures
def test_a_union_rule_in_the_tree_cannot_merge_json_into_garbage(memory: Path, tmp_path: Path, cli: Cli,
                                                                  figures: Figures) -> None:
    """The attack of the issue: `* merge=union` in a tracked .gitattributes, then two writers
    rewrite config.json at once. Before: `{"model": "y"}` and `{"model": "x"}` on two lines, no
    conflict copy, `Conflicts: none`."""
    figures.add("security attacks")
    _diverge(cli, memory, tmp_path, {".gitattributes": "* merge=union\n", "config.json": '{"model": "a"}\n'},
             {"config.json": '{"model": "x"}\n'}, {"config.json": '{"model": "y"}\n'})
    tree = hub_tree()
    assert json.loads(tree["config.json"]) == {"model": "x"}  # ours at the path: it parses
    copies = _copies(tree, "config")
    assert len(copies) == 1 and json.loads(copies[0]) == {"model": "y"}  # theirs beside it
    status = cli("status", cwd=memory)
    assert "Conflicts: none" not in status.out and "config.json.conflicts.md" in status.out, status.out
    figures.add("security attacks refused")


@pytest.mark.stress
def test_an_agent_cannot_choose_the_merge_driver_either(memory: Path, tmp_path: Path, cli: Cli,
                                                        figures: Figures) -> None:
    """A run writes `*.md merge=union` (and `binary`-like rules) into the memory; a later concurrent
    rewrite of summary.md still keeps both sides, as memsync's default policy says."""
    figures.add("security attacks")
    agent = "import os, pathlib; m = pathlib.Path(os.environ['MEMSYNC_MEMORY_DIR']); " \
            "(m / '.gitattributes').write_text('*.md merge=union\\n')"
    run = memsync_cmd("run", "--", sys.executable, "-c", agent, cwd=memory)
    assert run.returncode == 0, run.stderr
    assert "Memsync-Flag: rule-file-changed .gitattributes" in git("log", "-1", "--format=%B", cwd=memory)
    other = _clone(cli, tmp_path, "other")
    write(other, "summary.md", "# Summary\n\ntheirs\n")
    assert cli("push", cwd=other).code == 0
    write(memory, "summary.md", "# Summary\n\nmine\n")
    assert cli("push", cwd=memory).code == 0
    tree = hub_tree()
    assert tree["summary.md"] == b"# Summary\n\nmine\n"
    copies = _copies(tree, "summary")
    assert len(copies) == 1 and copies[0] == b"# Summary\n\ntheirs\n"
    figures.add("security attacks refused")


def test_json_objects_merge_key_by_key(memory: Path, tmp_path: Path, cli: Cli) -> None:
    """Both writers change the one line of a compact JSON file, different keys: no conflict."""
    _diverge(cli, memory, tmp_path, {"config.json": '{"model": "a", "tools": ["grep"]}\n'},
             {"config.json": '{"model": "b", "tools": ["grep"]}\n'},
             {"config.json": '{"model": "a", "tools": ["grep"], "temperature": 0.2}\n'})
    tree = hub_tree()
    assert json.loads(tree["config.json"]) == {"model": "b", "tools": ["grep"], "temperature": 0.2}
    assert tree["config.json"].endswith(b"}\n") and not _copies(tree, "config")


def test_a_clean_line_merge_with_a_duplicate_key_keeps_both(memory: Path, tmp_path: Path, cli: Cli) -> None:
    """Lines far apart merge cleanly as text, yet add the same key twice with different values:
    a JSON reader would silently drop one. Both sides are kept instead."""
    base = '{\n  "a": 1,\n  "b": 2,\n  "c": 3,\n  "d": 4\n}\n'
    _diverge(cli, memory, tmp_path, {"s.json": base},
             {"s.json": base.replace('  "a": 1,\n', '  "a": 1,\n  "k": "mine",\n')},
             {"s.json": base.replace('  "d": 4\n', '  "d": 4,\n  "k": "theirs"\n')})
    tree = hub_tree()
    assert json.loads(tree["s.json"])["k"] == "mine"
    copies = _copies(tree, "s")
    assert len(copies) == 1 and json.loads(copies[0])["k"] == "theirs"


def test_yaml_merges_by_structure(memory: Path, tmp_path: Path, cli: Cli) -> None:
    """Changes on neighbouring lines conflict line by line; key by key they do not."""
    _diverge(cli, memory, tmp_path, {"agent.yaml": "model: a\ntokens: 100\n"},
             {"agent.yaml": "model: b\ntokens: 100\n"},
             {"agent.yaml": "model: a\ntokens: 200\nlimits:\n  calls: 5\n"})
    tree = hub_tree()
    assert yaml.safe_load(tree["agent.yaml"]) == {"model": "b", "tokens": 200, "limits": {"calls": 5}}
    assert not _copies(tree, "agent")


def test_jsonl_without_a_final_newline_still_merges_to_json_lines(memory: Path, tmp_path: Path, cli: Cli) -> None:
    """Appended lines without a final newline: the union never glues two objects into one line."""
    _diverge(cli, memory, tmp_path, {"e.jsonl": '{"n": 0}\n'}, {"e.jsonl": '{"n": 0}\n{"n": "mine"}'},
             {"e.jsonl": '{"n": 0}\n{"n": "theirs"}'})
    tree = hub_tree()
    assert [json.loads(line)["n"] for line in tree["e.jsonl"].splitlines()] == [0, "mine", "theirs"]
    assert not _copies(tree, "e")


@pytest.mark.parametrize("strategy", ["union", "ours", "keep-both"])
def test_the_operators_policy_never_commits_json_that_does_not_parse(memory: Path, tmp_path: Path, cli: Cli,
                                                                     strategy: str) -> None:
    policy = f'merge:\n  - {{path: "*.json", strategy: {strategy}}}\n'
    _diverge(cli, memory, tmp_path, {"c.json": '{"model": "a"}\n'}, {"c.json": '{"model": "x"}\n'},
             {"c.json": '{"model": "y"}\n'}, policy)
    tree = hub_tree()
    assert json.loads(tree["c.json"]) == {"model": "x"}
    assert len(_copies(tree, "c")) == (0 if strategy == "ours" else 1)


@pytest.mark.parametrize(("name", "mine"), [("c.json", '{"model": "x",\n'), ("c.yaml", "a: &x [1]\nb: *x\n")])
def test_a_side_that_does_not_parse_keeps_both(memory: Path, tmp_path: Path, cli: Cli, name: str, mine: str) -> None:
    """Invalid JSON, or YAML with an alias (a few lines of them expand to gigabytes): no
    structure to merge, so both versions stay."""
    _diverge(cli, memory, tmp_path, {name: "{}\n" if name.endswith("json") else "a: 0\n"}, {name: mine},
             {name: '{"model": "y"}\n' if name.endswith("json") else "a: 0\nc: 1\n"})
    tree = hub_tree()
    assert tree[name] == mine.encode()
    assert len(_copies(tree, name.split(".")[0])) == 1


@pytest.mark.stress
def test_a_yaml_alias_bomb_is_refused_quickly(figures: Figures) -> None:
    figures.add("security attacks")
    bomb = b"a: &a [x, x, x, x, x, x, x, x, x]\n" + b"".join(
        b"%c: &%c [*%c, *%c, *%c, *%c, *%c, *%c, *%c, *%c, *%c]\n" % ((c,) * 2 + (c - 1,) * 9)
        for c in range(ord("b"), ord("k")))
    started = time.monotonic()
    assert structured.merge("yaml", "structured", b"a: 1\n", bomb, b"a: 2\n", None) is None
    assert time.monotonic() - started < 2
    figures.add("security attacks refused")


def test_structured_merge_rules() -> None:
    m = structured.merge
    assert m("json", "structured", b'{"a": 1}', b'{"a": 1, "b": 2}', b'{}', None) == b'{"b": 2}'
    assert m("json", "structured", b'{"a": 1}', b'{"a": true}', b'{"a": 1, "c": 3}', None) == b'{"a": true, "c": 3}'
    assert m("json", "structured", b'{"a": 1}', b'{"a": 2}', b'{"a": 3}', None) is None  # a real conflict
    assert m("json", "structured", b'{"a": {"x": 1}}', b'{}', b'{"a": {"x": 2}}', None) == b'{"a": {"x": 2}}'
    assert m("json", "structured", b'[1]', b'[1, 2]', b'[1, 3]', None) is None  # lists are values
    assert m("json", "structured", None, b'{"a": 1}', b'{"b": 2}', None) == b'{"a": 1, "b": 2}'  # both added
    assert m("json", "structured", b'{"a": 1}', b'{"a": 1, "a": 2}', b'{}', None) is None  # duplicate key
    pretty = m("json", "structured", b'{}', b'{\n    "a": 1\n}\n', b'{"b": 2}', None)
    assert pretty == b'{\n    "a": 1,\n    "b": 2\n}\n'  # formatted as the merging side's file
    assert m("jsonl", "union", b'1\n', b'1\n2\n', b'1\n3\n2\n', None) == b'1\n2\n3\n'
    assert m("jsonl", "keep-both", b'1\n', b'1\n2\n', b'1\n3\n', None) is None
    assert m("jsonl", "union", b'1\n', b'1\nnot json\n', b'1\n3\n', b'1\nnot json\n3\n') is None
    assert structured.kind_of("a/b.YML") == "yaml" and structured.kind_of(".json") is None


@pytest.mark.stress
def test_a_planted_info_attributes_link_is_replaced_not_followed(memory: Path, tmp_path: Path, cli: Cli,
                                                                 figures: Figures) -> None:
    """memsync writes its rule into .git/info/attributes before each merge: a symlink planted
    there (pointing at a file of the user's) is replaced, the target untouched."""
    figures.add("security attacks")
    target = tmp_path / "users-file"
    target.write_text("precious\n")
    link = memory / ".git" / "info" / "attributes"
    link.unlink(missing_ok=True)
    os.symlink(target, link)
    _diverge(cli, memory, tmp_path, {"c.json": '{"a": 0}\n'}, {"c.json": '{"a": 1}\n'}, {"c.json": '{"a": 2}\n'})
    assert target.read_text() == "precious\n"
    assert not link.is_symlink() and link.read_text().endswith("* merge\n")
    figures.add("security attacks refused")


@pytest.mark.slow
def test_concurrent_runs_rewriting_one_json_file_lose_nothing(memory: Path, tmp_path: Path, cli: Cli) -> None:
    """Three runs at once each set their own key of state.json and rewrite `model`, under a tree
    rule `* merge=union`: every run's key arrives, every version on the hub parses, and every
    run's `model` is kept (at the path or in a conflict copy)."""
    write(memory, ".gitattributes", "* merge=union\n")
    write(memory, "state.json", '{"model": "base"}\n')
    assert cli("push", cwd=memory).code == 0
    gate = tmp_path / "gate"
    gate.mkdir()
    agent = ("import json, os, pathlib, time; p = pathlib.Path(os.environ['MEMSYNC_MEMORY_DIR']) / 'state.json'; "
             "d = json.loads(p.read_text()); rid = os.environ['MEMSYNC_RUN_ID']; d['model'] = rid; d[rid] = 1; "
             "p.write_text(json.dumps(d) + '\\n'); g = pathlib.Path(os.environ['GATE']); (g / rid).touch()\n"
             "while not (g / 'go').exists(): time.sleep(0.02)")
    boxes = [_clone(cli, tmp_path, f"box{i}") for i in range(3)]
    procs = [subprocess.Popen([sys.executable, "-m", "memsync", "run", "--run-id", f"r{i}", "--checkpoint", "0",
                               "--", sys.executable, "-c", agent], cwd=box, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env={**os.environ, "GATE": str(gate)})
             for i, box in enumerate(boxes)]
    deadline = time.monotonic() + 60  # every run has read the same base before any of them pushes
    while len(list(gate.iterdir())) < 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    (gate / "go").touch()
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    tree = hub_tree()
    state = json.loads(tree["state.json"])
    versions = [state] + [json.loads(c) for c in _copies(tree, "state")]
    assert {f"r{i}" for i in range(3)} <= {k for v in versions for k in v}
    assert {v["model"] for v in versions} == {f"r{i}" for i in range(3)}


@pytest.mark.stress
@pytest.mark.parametrize("rule_file", [".gitattributes", "notes/.gitignore"])
def test_a_hub_version_that_changes_a_rule_file_is_reported(memory: Path, tmp_path: Path, cli: Cli,
                                                            figures: Figures, rule_file: str) -> None:
    """Like a policy change: the pull that brings it says so, and the commit that made it is flagged."""
    figures.add("security attacks")
    other = _clone(cli, tmp_path, "other")
    write(other, rule_file, "* merge=union\n" if rule_file.endswith("attributes") else "*.md\n")
    assert cli("push", cwd=other).code == 0
    flagged = cli("log", "--flagged", cwd=other)
    assert f"rule-file-changed {rule_file}" in flagged.out, flagged.out
    write(memory, "summary.md", "# Summary\n\nmine\n")
    pulled = cli("pull", cwd=memory)
    assert pulled.code == 0, pulled.err
    assert f"warning: the hub's version changed {rule_file}: memsync merges and ignores by" in pulled.err, pulled.err
    figures.add("security attacks refused")
