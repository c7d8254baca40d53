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
