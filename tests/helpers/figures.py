"""Figures of the reliability suite, printed as one table at the end of the pytest session.

Tests add to named counters through the `figures` fixture (`figures.add("runs attempted", 8)`);
the first use registers a small plugin whose `pytest_terminal_summary` prints the table, so
`make stress` (and `make test`) end with it. With MEMSYNC_STRESS_REPORT=FILE the figures are also
written there as JSON (docs/RELIABILITY.md is filled from such a file).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

STRESS = os.environ.get("MEMSYNC_STRESS") == "1"

# Rows of the table, in order; a figure that must be 0 is checked by the tests that add to it.
ROWS = (
    "runs attempted", "runs completed", "runs lost",
    "lines appended", "lines present",
    "structured-merge writers", "jsonl lines appended", "jsonl lines present", "conflict copies of union files",
    "summary rewrites", "summary rewrites kept", "conflicts kept", "merge commits on the hub",
    "pushes at once", "pushed commits on the hub",
    "crash trials", "crash trials killed mid-command", "crash trials recovered", "crash trials corrupted",
    "disk-full cases", "disk-full cases handled",
    "network faults", "network faults handled",
    "bad inputs tried", "bad inputs handled",
    "security attacks", "security attacks refused",
    "lock cases", "lock cases handled",
    "signal cases", "signal cases handled",
    "clock offsets", "clock offsets handled",
    "agent attacks", "agent attacks stopped",
)


def size(ci: int, stress: int) -> int:
    """The CI figure by default, the big one under MEMSYNC_STRESS=1 (`make stress`)."""
    return stress if STRESS else ci


class Figures:
    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.durations: dict[str, float] = {}

    def add(self, row: str, n: int = 1) -> None:
        self.counts[row] = self.counts.get(row, 0) + n

    def timed(self, section: str, seconds: float) -> None:
        self.durations[section] = self.durations.get(section, 0.0) + seconds

    def rows(self) -> list[tuple[str, int]]:
        extra = sorted(k for k in self.counts if k not in ROWS)
        return [(k, self.counts[k]) for k in (*ROWS, *extra) if k in self.counts]


FIGURES = Figures()


class _SummaryPlugin:
    """Prints the table. Under pytest-xdist (`make test` runs the suite in several processes)
    each worker hands its figures to the controller, which adds them up and prints one table."""

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        output = getattr(session.config, "workeroutput", None)
        if output is not None:  # a worker: its figures go to the controller
            output["memsync_figures"] = {"counts": FIGURES.counts, "durations": FIGURES.durations}

    def pytest_testnodedown(self, node: Any, error: object) -> None:
        found = getattr(node, "workeroutput", {}).get("memsync_figures")
        if found:
            for row, n in found["counts"].items():
                FIGURES.add(row, n)
            for section, seconds in found["durations"].items():
                FIGURES.timed(section, seconds)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        rows = FIGURES.rows()
        if not rows:
            return
        tr = terminalreporter
        tr.section(f"memsync reliability figures ({'stress' if STRESS else 'CI'} size)")
        width = max(len(name) for name, _ in rows)
        for name, value in rows:
            tr.write_line(f"  {name:<{width}}  {value:>7}")
        for section, seconds in sorted(FIGURES.durations.items()):
            tr.write_line(f"  {'time: ' + section:<{width}}  {seconds:>6.1f}s")
        target = os.environ.get("MEMSYNC_STRESS_REPORT")
        if target:
            Path(target).write_text(json.dumps(
                {"size": "stress" if STRESS else "ci", "figures": dict(rows),
                 "seconds": {k: round(v, 1) for k, v in FIGURES.durations.items()}}, indent=2) + "\n")


def register(config: pytest.Config) -> None:
    """Make sure the table is printed (conftest.py calls this for every session, so that an
    xdist controller, which runs no test, collects its workers' figures)."""
    if not config.pluginmanager.has_plugin("memsync-stress-report"):
        config.pluginmanager.register(_SummaryPlugin(), "memsync-stress-report")


@pytest.fixture
def figures(request: pytest.FixtureRequest) -> Iterator[Figures]:
    """The session's reliability figures; the test's wall time is recorded under its module."""
    register(request.config)
    started = time.monotonic()
    yield FIGURES
    FIGURES.timed(request.node.module.__name__.rsplit(".", 1)[-1], time.monotonic() - started)
