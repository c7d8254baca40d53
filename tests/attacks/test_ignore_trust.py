"""Ignore rules from the tree never hide an agent's files; the operator's own rules that keep a
run's files out make it exit 9, naming them (issue 21, part 6; BRIEF rule 7).

A `.gitignore` can come from any hub writer or from the agent itself: in a run it hides nothing.
`.git/info/exclude` and the user's global excludes file are the operator's: what they keep out
of a run is named, and the run exits 9 like any policy that kept files out.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.conftest import git, hub_path, hub_tree, memsync_cmd, write
from tests.helpers.figures import Figures, figures

pytestmark = pytest.mark.stress  # the security suite: counted in the reliability figures
__all__ = ["figures"]


def _hub_commit(tmp_path: Path, files: dict[str, str]) -> None:
    """A version pushed to the hub with plain git by someone else."""
    work = tmp_path / "other"
    git("clone", "-q", "-b", "memory/research", str(hub_path()), str(work), cwd=tmp_path)
    for rel, text in files.items():
        write(work, rel, text)
    git("add", "-A", cwd=work)
    git("-c", "user.name=other", "-c", "user.email=o@h", "commit", "-qm", "from the hub", cwd=work)
    git("push", "-q", "origin", "HEAD:memory/research", cwd=work)


def test_a_hub_gitignore_cannot_hide_a_runs_files(memory: Path, tmp_path: Path, figures: Figures) -> None:
    """Before: the run warned, exited 0, and the three files were never saved."""
    figures.add("security attacks")
    _hub_commit(tmp_path, {".gitignore": "*.log\nscratch/\n", "deep/.gitignore": "*.md\n"})
    assert memsync_cmd("pull", cwd=memory).returncode == 0
    agent = "echo a > notes.log; mkdir -p scratch/sub deep; echo b > scratch/sub/x.md; echo c > deep/found.md"
    run = memsync_cmd("run", "--run-id", "hidden", "--", "sh", "-c", agent, cwd=memory)
    assert run.returncode == 0, run.stderr
    tree = hub_tree()
    assert tree["notes.log"] == b"a\n" and tree["scratch/sub/x.md"] == b"b\n" and tree["deep/found.md"] == b"c\n"
    assert "committed 3 new files that a .gitignore in the memory names" in run.stderr, run.stderr
    for path in ("notes.log", "scratch/sub/x.md", "deep/found.md"):
        assert path in run.stderr
    figures.add("security attacks refused")


def test_an_agents_own_gitignore_hides_nothing_and_is_flagged(memory: Path, figures: Figures) -> None:
    figures.add("security attacks")
    agent = "printf '*\\n' > .gitignore; echo gone > wiped-notes.md"
    run = memsync_cmd("run", "--run-id", "sneaky", "--", "sh", "-c", agent, cwd=memory)
    assert run.returncode == 0, run.stderr
    tree = hub_tree()
    assert tree["wiped-notes.md"] == b"gone\n" and tree[".gitignore"] == b"*\n"
    flagged = memsync_cmd("log", "--flagged", "--json", cwd=memory)
    assert "rule-file-changed .gitignore" in flagged.stdout, flagged.stdout
    figures.add("security attacks refused")


def test_the_operators_exclude_rules_keep_files_out_with_exit_9(memory: Path, figures: Figures) -> None:
    """Before: a warning, exit 0, the file unsaved."""
    figures.add("security attacks")
    exclude = memory / ".git" / "info" / "exclude"
    exclude.write_text(exclude.read_text() + "*.bak\nprivate/\n")
    agent = "echo x > old.bak; mkdir -p private; echo y > private/p.md; echo z > kept.md"
    run = memsync_cmd("run", "--run-id", "excluded", "--", "sh", "-c", agent, cwd=memory)
    assert run.returncode == 9, run.stderr
    assert "not committed: 2 new files or folders ignored by the operator's ignore rules" in run.stderr, run.stderr
    assert "old.bak" in run.stderr and "private/" in run.stderr and "Traceback" not in run.stderr
    tree = hub_tree()
    assert tree["kept.md"] == b"z\n" and "old.bak" not in tree and "private/p.md" not in tree
    assert (memory / "old.bak").read_text() == "x\n"  # nothing lost: left where the command wrote it
    figures.add("security attacks refused")


def test_files_a_gitignore_names_still_go_through_the_checks(memory: Path, tmp_path: Path) -> None:
    """Committed like any other file: max_file_size and the secret scan apply to them."""
    cfg = memory / ".vm0" / "storage.yaml"
    cfg.write_text(cfg.read_text() + "max_file_size: 1KiB\n")
    _hub_commit(tmp_path, {".gitignore": "*.log\n"})
    assert memsync_cmd("pull", cwd=memory).returncode == 0
    run = memsync_cmd("run", "--", sys.executable, "-c", "open('big.log', 'w').write('x' * 4096)", cwd=memory)
    assert "big.log" not in hub_tree()
    assert "big.log" in run.stderr, run.stderr
    data = json.loads(memsync_cmd("status", "--json", cwd=memory).stdout)
    assert "big.log" in json.dumps(data)


@pytest.mark.attack
def test_a_hub_gitignore_star_cannot_blind_the_operator(memory: Path, tmp_path: Path, figures: Figures) -> None:
    """Issue 33: a hub writer pushes `.gitignore` = `*`, `!.gitignore`. Before: the operator's next
    push left a new top-level `decisions.md` out without naming it (only `sub/`), exit 0, and
    status named neither. Now the hub's file decides nothing: both are committed and named; what
    the operator's own rules (.git/info/exclude, or a .gitignore of the operator's) keep out is named
    file by file, as `git status --ignored` names it."""
    figures.add("security attacks")
    _hub_commit(tmp_path, {".gitignore": "*\n!.gitignore\n"})
    assert memsync_cmd("pull", cwd=memory).returncode == 0
    write(memory, "decisions.md", "keep me\n")
    write(memory, "sub/x.md", "and me\n")
    status = json.loads(memsync_cmd("status", "--json", cwd=memory).stdout)
    assert {c["path"] for c in status["uncommitted"]} >= {"decisions.md", "sub/x.md"}
    assert status["ignored"] == []
    push = memsync_cmd("push", cwd=memory)
    assert push.returncode == 0, push.stderr
    assert "committed 2 new files that a .gitignore in the memory names: decisions.md, sub/x.md" in push.stderr
    tree = hub_tree()
    assert tree["decisions.md"] == b"keep me\n" and tree["sub/x.md"] == b"and me\n"
    # the operator's own rules still keep files out, each named, as git names them
    exclude = memory / ".git" / "info" / "exclude"
    exclude.write_text(exclude.read_text() + "*.bak\n")
    write(memory, "old.bak", "x\n")
    write(memory, "sub/older.bak", "y\n")
    shown = git("status", "--ignored", "--porcelain", cwd=memory)
    assert "!! old.bak" in shown and "!! sub/older.bak" in shown
    status = json.loads(memsync_cmd("status", "--json", cwd=memory).stdout)
    assert status["ignored"] == ["old.bak", "sub/older.bak"]
    push = memsync_cmd("push", cwd=memory)
    assert "ignored by the operator's ignore rules" in push.stderr and "old.bak, sub/older.bak" in push.stderr
    assert "old.bak" not in hub_tree()
    figures.add("security attacks refused")


@pytest.mark.attack
def test_the_operators_own_gitignore_still_counts(memory: Path) -> None:
    """A .gitignore the operator wrote here (pushed by memsync, or not yet pushed) still keeps
    files out of the operator's push, named; one the hub changed decides nothing."""
    write(memory, ".gitignore", "*.log\n")
    assert memsync_cmd("push", cwd=memory).returncode == 0
    write(memory, "debug.log", "noise\n")
    push = memsync_cmd("push", cwd=memory)
    assert "ignored by the operator's ignore rules" in push.stderr and "debug.log" in push.stderr
    assert "debug.log" not in hub_tree()
