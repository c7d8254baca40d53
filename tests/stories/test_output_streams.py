"""memsync's own output when the place it goes fails: a reader that closes the pipe early
(`memsync log | head -1`), a file on a full disk (`> /dev/full`). Real processes, real streams."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import git, hub_tree, write

pytestmark = pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")


def _run(args: list[str], cwd: Path, stdout: int | None) -> tuple[int, str]:
    proc = subprocess.Popen([sys.executable, "-m", "memsync", *args], cwd=cwd, env=dict(os.environ),
                            stdout=stdout, stderr=subprocess.PIPE, text=True)
    if stdout == subprocess.PIPE:
        assert proc.stdout is not None
        proc.stdout.close()  # the reader goes away before memsync writes a line
    _, err = proc.communicate(timeout=120)
    return proc.returncode, err


@pytest.mark.parametrize("args", [["status"], ["status", "--json"], ["log"], ["list"]])
@pytest.mark.slow
def test_a_reader_that_goes_away_ends_the_output_quietly(memory: Path, args: list[str]) -> None:
    code, err = _run(args, memory, subprocess.PIPE)
    assert (code, err) == (0, "")


@pytest.mark.parametrize("args", [["status"], ["log"]])
def test_a_full_disk_under_the_output_is_the_outputs_error(memory: Path, args: list[str]) -> None:
    with open("/dev/full", "w") as full:
        code, err = _run(args, memory, full.fileno())
    assert code == 7
    lines = err.splitlines()
    assert lines[0] == "error: cannot write the output (No space left on device)"
    assert lines[1].startswith("hint: nothing was lost")
    assert ".git" not in err and "Traceback" not in err


def test_a_push_whose_output_fails_still_delivers(memory: Path) -> None:
    write(memory, "notes.md", "pushed, whoever reads the output\n")
    with open("/dev/full", "w") as full:
        code, err = _run(["push"], memory, full.fileno())
    assert code == 7, err
    assert hub_tree()["notes.md"] == b"pushed, whoever reads the output\n"
    assert git("status", "--porcelain", cwd=memory) == ""
    write(memory, "more.md", "and into a closed pipe\n")
    code, err = _run(["push"], memory, subprocess.PIPE)
    assert (code, err) == (0, "")
    assert hub_tree()["more.md"] == b"and into a closed pipe\n"
