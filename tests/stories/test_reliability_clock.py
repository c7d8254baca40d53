"""Run ids and skewed clocks (issue 22, part 5), through tests/helpers/skewed_clock.py: memsync's wall
clock moved by years, the kernel's (which dates files and, through libgit2, commits) left true.

A generated run id carries the clock of the machine that made it, so a sandbox years behind makes
ids that sort before earlier runs. Checked: such a run says so (a warning naming the memory, the
newest version and how far behind the clock is); a run whose clock is ahead, or right, says
nothing; history order, `log` and `status` follow the commit graph whatever the ids.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import memsync_cmd
from tests.helpers.figures import Figures, figures

pytestmark = pytest.mark.slow

__all__ = ["figures"]

SKEWED = str(Path(__file__).parent.parent / "helpers" / "skewed_clock.py")
YEAR = 365 * 86_400.0


def skewed_run(offset: float, root: Path, note: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, SKEWED, str(offset), "run", "--checkpoint", "0", "--",
                           "sh", "-c", f"echo {note} > {note}.md"], cwd=root, env=dict(os.environ),
                          capture_output=True, text=True, timeout=120)


def run_ids(root: Path) -> list[str]:
    """Run ids of the runs' closing versions, newest first, as `memsync log` shows them."""
    log = json.loads(memsync_cmd("log", "--json", cwd=root, check=True).stdout)
    return [v["run_id"] for v in log["versions"] if v["actor"] == "run" and v["end"]]


def test_a_clock_years_behind_is_reported_and_history_follows_the_graph(memory: Path, figures: Figures) -> None:
    figures.add("clock offsets")
    on_time = skewed_run(0.0, memory, "first")
    assert on_time.returncode == 0, on_time.stderr
    assert "clock" not in on_time.stderr
    late = skewed_run(-5 * YEAR, memory, "second")
    assert late.returncode == 0, late.stderr
    assert "warning: this machine's clock is" in late.stderr and "behind the date of research's newest" in late.stderr
    assert "days behind" in late.stderr and "--run-id" in late.stderr
    second, first = run_ids(memory)[:2]
    assert second < first  # the ids sort the wrong way round...
    status = json.loads(memsync_cmd("status", "--json", cwd=memory, check=True).stdout)
    assert status["last_run"]["run_id"] == second  # ...history, log and status do not
    figures.add("clock offsets handled")


def test_a_clock_ahead_is_not_reported(memory: Path, figures: Figures) -> None:
    figures.add("clock offsets")
    ahead = skewed_run(5 * YEAR, memory, "ahead")
    assert ahead.returncode == 0, ahead.stderr
    assert "clock" not in ahead.stderr
    assert run_ids(memory)[0][:4] == str(time.gmtime(time.time() + 5 * YEAR).tm_year)  # the id has the skewed clock
    figures.add("clock offsets handled")
