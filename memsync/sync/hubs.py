"""What several verbs need of a hub before they talk to it: the embedded hub made on first use,
and the last run recorded in a memory's history."""

from __future__ import annotations

from memsync.core.memory import Memory
from memsync.git.remote import Hub, HubGone
from memsync.git.repo import GitRepo
from memsync.git.trailers import first, parse
from memsync.util.records import recordclass
from memsync.util.timefmt import rfc3339


@recordclass
class LastRun:
    run_id: str
    version: str
    time: str  # RFC 3339, UTC
    exit_code: int | None  # None: the run is still going, or was killed before it could record one


def ensure_hub(hub: Hub, mem: Memory | None = None) -> None:
    """The embedded hub is created on first use; any other hub must already exist. `mem`: the
    memory about to use it; if it has exchanged with the embedded hub (it holds what it last
    fetched or pushed), a missing hub is an error (HubGone), not a first use."""
    if mem is None:
        hub.ensure()
    else:
        hub.ensure(mem.name, lambda: _exchanged(mem))


def ready_to_exchange(mem: Memory) -> None:
    """A memory about to exchange with its hub (push, pull, watch, restore, revert): no merge or
    other operation half done, memsync's layout (its excludes, HEAD on its branch), and its hub
    there (a hub it has exchanged with that is gone is an error, not a first use)."""
    mem.git.check_state(mem.branch)
    mem.git.ensure_layout(mem.branch, None)
    ensure_hub(mem.hub, mem)


def _exchanged(mem: Memory) -> bool:
    return any(mem.git.ref_oid(ref) is not None for ref in (mem.tracking_ref, f"refs/remotes/origin/{mem.branch}"))


def last_run(git: GitRepo, tip: str, limit: int = 500) -> LastRun | None:
    for n, info in enumerate(git.walk(tip)):
        trailers = parse(info.message)
        if first(trailers, "Memsync-Actor") == "run":
            run_id = first(trailers, "Memsync-Run-Id") or "?"
            code = first(trailers, "Memsync-Exit-Code")
            exit_code = int(code) if code and code.lstrip("-").isdigit() else None
            return LastRun(run_id, info.short, rfc3339(info.time), exit_code)
        if n >= limit:
            break
    return None


__all__ = ["HubGone", "LastRun", "ensure_hub", "last_run"]
