"""run/outcome: a run's exit status, decided from its memories' outcomes in one order: the
command's own failure first, then an unrecorded final commit, a rejected push, unsaved work, and
what was blocked or kept out."""

from __future__ import annotations

import pytest

from memsync.errors import EXIT_BLOCKED, EXIT_REJECTED, EXIT_REPO, EXIT_UNSAVED
from memsync.run.outcome import MemoryOutcome, RunReport


def _report(exit_code: int, **fields: object) -> RunReport:
    clean = MemoryOutcome("ref", "/mnt/ref", read_only=True)
    outcome = MemoryOutcome("research", "/mnt/memory", read_only=False, **fields)  # type: ignore[arg-type]
    return RunReport("r1", ["agent"], exit_code, 1.0, [clean, outcome])


@pytest.mark.parametrize(("fields", "status"), [
    ({}, 0),
    ({"unrecorded": True, "rejected": True, "unpushed": ["abc"]}, EXIT_REPO),
    ({"rejected": True, "unpushed": ["abc"], "blocked": ["x"]}, EXIT_REJECTED),
    ({"unpushed": ["abc"], "blocked": ["x"]}, EXIT_UNSAVED),
    ({"error": "hub down"}, EXIT_UNSAVED),
    ({"blocked": ["secret in a.md"]}, EXIT_BLOCKED),
    ({"read_only_changes": ["ref/x.md"]}, EXIT_BLOCKED),
    ({"ignored": ["scratch.tmp"]}, EXIT_BLOCKED),
    ({"conflicts": [], "merged": 2, "flags": ["shrink a.md 10->1"]}, 0),  # reported, not a failure
])
def test_the_first_reason_in_order_decides(fields: dict[str, object], status: int) -> None:
    assert _report(0, **fields).status == status


def test_the_commands_own_failure_comes_first() -> None:
    assert _report(3, unrecorded=True, blocked=["x"]).status == 3
    assert _report(137).status == 137
