"""Leftovers of the fourth trust audit: each with its documented exit code (docs/SECURITY.md,
"Leftovers of the fourth audit")."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from memsync.errors import EXIT_CONFIG
from tests.helpers.figures import Figures, figures

pytestmark = pytest.mark.attack
__all__ = ["figures"]


def test_a_closed_stderr_pipe_keeps_the_commands_exit_code(tmp_path: Path, figures: Figures) -> None:
    """Before: `memsync status 2>&1 | true` outside a memory exited 1 ("a bug") instead of 3: the
    error line's write failed, and so did the report of that failure."""
    figures.add("bad inputs tried")
    read, write = os.pipe()
    os.close(read)  # the reader is gone before memsync writes a byte
    try:
        done = subprocess.run([sys.executable, "-m", "memsync", "status"], cwd=tmp_path, stderr=write,
                              stdout=subprocess.PIPE, timeout=120, check=False)
    finally:
        os.close(write)
    assert done.returncode == EXIT_CONFIG
    figures.add("bad inputs handled")
