"""Index flags cannot hide a change: assume-unchanged and skip-worktree, set by an agent with its
own git, are cleared (and named) before a run's scan, so its edit is the run's, never left for a
later command to commit as the operator's."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import git, hub_path, hub_tree, memsync_cmd, write


@pytest.mark.parametrize("version", [2, 3, 4])
@pytest.mark.slow
def test_the_flags_are_read_from_every_index_version(tmp_path: Path, version: int) -> None:
    from memsync.git.indexflags import hiding

    git("init", "-q", cwd=tmp_path)
    for i in range(300):  # long and short names, names sharing prefixes (version 4 compresses them)
        write(tmp_path, f"d/{'x' * (i % 40)}f{i}.md", f"{i}\n")
    git("add", "-A", cwd=tmp_path)
    git("update-index", "--assume-unchanged", "d/f0.md", cwd=tmp_path)
    git("update-index", "--skip-worktree", "d/xxxf3.md", cwd=tmp_path)
    git("update-index", "--assume-unchanged", "d/xxxxxf5.md", cwd=tmp_path)
    git("update-index", "--skip-worktree", "d/xxxxxf5.md", cwd=tmp_path)
    git("update-index", f"--index-version={version}", cwd=tmp_path)
    found = {(h.path, h.what) for h in hiding((tmp_path / ".git" / "index").read_bytes())}
    assert found == {("d/f0.md", "assume-unchanged"), ("d/xxxf3.md", "skip-worktree"),
                     ("d/xxxxxf5.md", "assume-unchanged and skip-worktree")}
    assert hiding(b"not an index") == []


@pytest.mark.slow
def test_a_runs_record_sees_an_edit_the_agent_hid_with_index_flags(memory: Path) -> None:
    """Unflagged on the old code: the edits stay out of every commit of the run (and the next push
    commits them as the operator's)."""
    agent = ("import subprocess, pathlib\n"
             "subprocess.run(['git', 'update-index', '--skip-worktree', 'summary.md'], check=True)\n"
             "subprocess.run(['git', 'update-index', '--assume-unchanged', 'runs/first.md'], check=True)\n"
             "with open('summary.md', 'a') as fh: fh.write('hidden edit\\n')\n"
             "with open('runs/first.md', 'a') as fh: fh.write('hidden too\\n')\n")
    done = memsync_cmd("run", "--run-id", "hider", "--checkpoint", "0", "--", sys.executable, "-c", agent,
                       cwd=memory)
    assert done.returncode == 0, done.stderr
    tree = hub_tree()
    assert tree["summary.md"].endswith(b"hidden edit\n") and tree["runs/first.md"].endswith(b"hidden too\n")
    trailers = git("log", "-1", "--format=%an%n%(trailers:key=Memsync-Flag,valueonly)", "memory/research",
                   cwd=hub_path())
    assert trailers.startswith("memsync run hider")
    assert "index-flag-cleared summary.md skip-worktree" in trailers
    assert "index-flag-cleared runs/first.md assume-unchanged" in trailers
    assert "index flag cleared: summary.md was marked skip-worktree" in done.stderr
    flagged = subprocess.run(["git", "ls-files", "-v"], cwd=memory, capture_output=True, text=True).stdout
    assert all(line.startswith("H ") for line in flagged.splitlines()), flagged
