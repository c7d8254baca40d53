"""Shared fixtures of the proposal tests: a memory on the embedded hub, proposals made in process."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.conftest import Cli, write

PY = sys.executable


@pytest.fixture
def research(tmp_path: Path, cli: Cli) -> Path:
    """An initialised, pushed memory `research` with a summary and two notes."""
    root = tmp_path / "research"
    root.mkdir()
    assert cli("init", cwd=root).code == 0
    write(root, "summary.md", "# Summary\n\nalpha fact\nbeta fact\n")
    write(root, "notes/a.md", "note a line one\nnote a line two\n")
    write(root, "notes/b.md", "note b line one\n")
    assert cli("push", cwd=root).code == 0
    return root


def agent(script: str) -> list[str]:
    """A command that runs `script` (Python) in the memory directory the run gives it."""
    return [PY, "-c", "import os; os.chdir(os.environ['MEMSYNC_MEMORY_DIR']); " + script]


def propose(cli: Cli, root: Path, run_id: str, script: str, *extra: str) -> None:
    """A `memsync run --propose` of `script` in `root`, which must succeed."""
    done = cli("run", "--propose", "--checkpoint", "0", "--run-id", run_id, *extra, "--", *agent(script), cwd=root)
    assert done.code == 0, done.err
    assert f"Proposal: {run_id}" in done.err
