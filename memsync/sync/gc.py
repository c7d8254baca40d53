"""`memsync gc`: repack a memory's repository, and its hub when the hub is a local repository.

The same repack runs by itself when a repository passes the thresholds in maintenance.py; this
is the by-hand version, which repacks whatever the counts.
"""

from __future__ import annotations

from pathlib import Path

from memsync.core.memory import open_memory, refuse_during_run
from memsync.git import pack
from memsync.git.pack import RepackResult
from memsync.sync.exchange import hub_lock
from memsync.util.records import dataclass


@dataclass
class GcResult:
    memory: str
    local: RepackResult
    hub: str
    hub_result: RepackResult | None  # None: the hub is not on this machine (its host maintains it)


def gc(path: Path, remote: str | None = None) -> GcResult:
    mem = open_memory(path, remote)
    with mem.locked():
        refuse_during_run(mem, "gc")
        local = pack.repack(mem.git.git_dir)
    hub_result = None
    hub_dir = mem.hub.local_path
    if hub_dir is not None and (hub_dir / "objects").is_dir():
        with hub_lock(mem):
            hub_result = pack.repack(hub_dir)
    return GcResult(mem.name, local, mem.hub.display, hub_result)
