"""`memsync log` reads what each version recorded when it was made (`Memsync-Changes`,
`Memsync-Copy`: git/trailers.py), and falls back to the diff for a version that recorded nothing
(plain git, an older memsync, a merge) or whose message was copied onto other trees."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memsync.git.trailers import parse, recorded_changes
from memsync.history.log import log
from tests.conftest import Cli, git, hub_path, write

ME = ("-c", "user.name=Me", "-c", "user.email=me@example.invalid")
COUNTED = ("files_changed", "bytes_added", "bytes_removed", "copies")


def _log(cli: Cli, memory: Path) -> dict[str, dict[str, object]]:
    r = cli("log", "--json", cwd=memory)
    assert r.code == 0, r.err
    return {v["oid"]: {k: v[k] for k in COUNTED} for v in json.loads(r.out)["versions"]}


def _diffed(memory: Path) -> dict[str, dict[str, object]]:
    """The log as counted from every version's diff: the recorded trailers not read."""
    found = log(memory, recorded=False).versions
    return {v.oid: {"files_changed": v.files_changed, "bytes_added": v.bytes_added,
                    "bytes_removed": v.bytes_removed, "copies": v.copies} for v in found}


def test_recorded_counts_are_the_diffs_counts(memory: Path, tmp_path: Path, cli: Cli) -> None:
    other = tmp_path / "other"
    assert cli("clone", "research", str(other), cwd=tmp_path).code == 0
    write(other, "summary.md", "# Summary\n\ntheirs\n")
    assert cli("push", cwd=other).code == 0
    write(memory, "summary.md", "# Summary\n\nours, longer than theirs\n")  # a conflict: a copy kept
    write(memory, "notes/new.md", "a new note " * 30)
    (memory / "runs/first.md").unlink()
    assert cli("push", cwd=memory).code == 0
    messages = git("log", "--format=%H%x00%B%x01", cwd=memory).split("\x01")
    recorded = [m.split("\0", 1)[0].strip() for m in messages if "Memsync-Changes:" in m]
    assert len(recorded) >= 3  # the first version, the operator's edits, the other clone's
    shown, counted = _log(cli, memory), _diffed(memory)
    assert shown == counted
    assert any(v["copies"] for v in shown.values()) and any(v["bytes_removed"] for v in shown.values())
    # `git log` reads the same trailers memsync wrote
    trailers = git("log", "--format=%(trailers:key=Memsync-Changes,valueonly)", cwd=memory).split()
    assert sum(1 for t in trailers if t.startswith("files=")) == len(recorded)


def test_log_reads_the_trailer_not_the_diff(memory: Path, cli: Cli) -> None:
    """A version whose trailer (bound to its trees) says other numbers than its diff is shown
    with the trailer's: log did not diff it."""
    write(memory, "summary.md", "# Summary\n\nfirst line\nsecond\n")
    git("add", "-A", cwd=memory)
    tree = git("write-tree", cwd=memory).strip()
    parent_tree = git("rev-parse", "HEAD^{tree}", cwd=memory).strip()
    message = (f"hand made\n\nMemsync-Actor: operator\nMemsync-Changes: files=9 added=99 removed=7 "
               f"tree={tree} parent-tree={parent_tree}\nMemsync-Copy: \"a b.conflict-x.md\"\n")
    git(*ME, "commit", "-q", "-m", message, cwd=memory)
    head = git("rev-parse", "HEAD", cwd=memory).strip()
    assert _log(cli, memory)[head] == {"files_changed": 9, "bytes_added": 99, "bytes_removed": 7,
                                      "copies": ["a b.conflict-x.md"]}
    assert recorded_changes(parse(message), tree, parent_tree) == (9, 99, 7, ["a b.conflict-x.md"])


def test_plain_git_and_moved_messages_fall_back_to_the_diff(memory: Path, cli: Cli) -> None:
    # plain git: no trailer at all
    write(memory, "summary.md", "# Summary\n\nfirst line\nby git\n")
    git(*ME, "commit", "-qam", "by plain git", cwd=memory)
    plain = git("rev-parse", "HEAD", cwd=memory).strip()
    # a memsync message copied onto another tree (an amend, a rewrite): its trailer is not read
    write(memory, "runs/first.md", "first run, rewritten\n")
    assert cli("push", cwd=memory).code == 0
    message = git("log", "-1", "--format=%B", cwd=memory)
    assert "Memsync-Changes:" in message
    write(memory, "runs/first.md", "first run, rewritten, and amended by hand to be longer\n")
    git(*ME, "commit", "-qa", "--amend", "-m", message, cwd=memory)
    amended = git("rev-parse", "HEAD", cwd=memory).strip()
    shown = _log(cli, memory)
    assert shown[plain] == {"files_changed": 1, "bytes_added": len("by git\n"), "bytes_removed": 0, "copies": []}
    assert shown[amended]["bytes_added"] == len("first run, rewritten, and amended by hand to be longer\n") - len(
        "first run\n")


@pytest.mark.attack
def test_an_agents_forged_counts_are_never_pushed(memory: Path, cli: Cli) -> None:
    """A plain commit that records small counts for a large deletion (to hide it from `log`) is
    one memsync did not make: push refuses it for its forged Memsync-* trailer."""
    (memory / "summary.md").unlink()
    git("add", "-A", cwd=memory)
    tree = git("write-tree", cwd=memory).strip()
    parent_tree = git("rev-parse", "HEAD^{tree}", cwd=memory).strip()
    start = git("rev-parse", "memory/research", cwd=hub_path()).strip()
    git(*ME, "commit", "-qm", f"tidy\n\nMemsync-Changes: files=0 added=0 removed=0 tree={tree} "
        f"parent-tree={parent_tree}\n", cwd=memory)
    r = cli("push", cwd=memory)
    assert r.code == 9 and "forged trailer" in r.err and "Memsync-Changes" in r.err, r.err
    assert git("rev-parse", "memory/research", cwd=hub_path()).strip() == start


@pytest.mark.attack
def test_malformed_or_repeated_trailers_are_not_read() -> None:
    tree, parent = "a" * 40, "b" * 40
    good = f"files=1 added=2 removed=3 tree={tree} parent-tree={parent}"
    assert recorded_changes([("Memsync-Changes", good)], tree, parent) == (1, 2, 3, [])
    for bad in ([("Memsync-Changes", good), ("Memsync-Changes", good)],
                [("Memsync-Changes", good.replace("files=1", "files=-1"))],
                [("Memsync-Changes", good + " extra")],
                [("Memsync-Changes", good), ("Memsync-Copy", '"unterminated')],
                [("Memsync-Changes", good), ("Memsync-Copy", "two words")]):
        assert recorded_changes(bad, tree, parent) is None
    assert recorded_changes([("Memsync-Changes", good)], tree, None) is None  # bound to its parent's tree
