"""run/runclock: a machine whose clock is behind the newest version it pulled is told so."""

from __future__ import annotations

import time
from pathlib import Path

from memsync.core.memory import open_memory
from memsync.run import runclock


def test_a_clock_far_behind_the_newest_version_is_named(memory: Path) -> None:
    mem = open_memory(memory)
    made = mem.git.commit_info(mem.git.head_oid() or "").time
    assert runclock.behind_history([mem], now=made) == []  # the same clock
    assert runclock.behind_history([mem], now=made - runclock.BEHIND_AFTER + 1) == []  # drift, not a wrong clock
    behind = runclock.behind_history([mem], now=made - 3 * 86_400)
    assert [(b.memory, b.version) for b in behind] == [("research", (mem.git.head_oid() or "")[:8])]
    text = runclock.describe(behind[0])
    assert "3 days behind" in text and "--run-id" in text
    assert runclock.behind_history([mem], now=time.time()) == []
