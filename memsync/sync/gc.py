"""`memsync gc`: repack a memory's repository, and its hub when the hub is a local repository.

The same repack runs by itself when a repository passes the thresholds in maintenance.py; this
is the by-hand version, which repacks whatever the counts. It also forgets closed proposals
older than MEMSYNC_PROPOSAL_DAYS (default 30) on the hub (accepting.prune).
"""

from __future__ import annotations

from pathlib import Path

from memsync.core.memory import open_memory, refuse_during_run
from memsync.errors import RemoteError
from memsync.git import pack
from memsync.git.pack import RepackResult
from memsync.util import envcheck, notices
from memsync.util.records import field, recordclass


@recordclass
class GcResult:
    memory: str
    local: RepackResult
    hub: str
    hub_result: RepackResult | None  # None: the hub is not on this machine (its host maintains it)
    pruned: list[str] = field(default_factory=list)  # closed proposals the hub forgot (proposal_days)


DEFAULT_PROPOSAL_DAYS = 30.0


def proposal_days() -> float:
    """Days a closed proposal stays on the hub before gc forgets it (MEMSYNC_PROPOSAL_DAYS)."""
    return envcheck.number("MEMSYNC_PROPOSAL_DAYS", DEFAULT_PROPOSAL_DAYS)


def gc(path: Path, remote: str | None = None) -> GcResult:
    from memsync.sync.accepting import prune

    mem = open_memory(path, remote)
    with mem.locked():
        refuse_during_run(mem, "gc")
        try:
            pruned = prune(mem, proposal_days())
        except RemoteError as exc:  # the repack goes on without the hub
            notices.warn(f"closed proposals not pruned: {exc.message}")
            pruned = []
        local = pack.repack(mem.git.git_dir)
    hub_result = mem.hub.repack()  # a network hub's host keeps it compact
    return GcResult(mem.name, local, mem.hub.display, hub_result, pruned)
