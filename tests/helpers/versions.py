"""Versions made as memsync makes them (the snapshot pipeline, in process), for tests of what
happens to them afterwards (exchange, merges, races)."""

from __future__ import annotations

from pathlib import Path

from memsync.core import snapshot
from memsync.core.attribution import operator
from memsync.core.memory import open_memory
from tests.conftest import write


def commit(root: Path, rel: str, text: str) -> str:
    """Write `rel` in the memory at `root` and commit it as an operator's version (not pushed)."""
    write(root, rel, text)
    mem = open_memory(root)
    with mem.locked():
        snap = snapshot.take(mem, operator(f"write {rel}"))
    assert snap.commit is not None
    return snap.commit
