"""Fetch, integrate and push one memory until the hub holds our work (or we give up).

The hub is only ever fast-forwarded. If it moved on since our fetch, we fetch, merge (keeping both
sides of any conflict) and try again. On a file:// hub, libgit2's local transport is not trusted
to serialise concurrent ref updates: pushes take the hub's lock and re-check its tip under it.
"""

from __future__ import annotations

import itertools
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from memsync.attribution import Attribution
from memsync.errors import RemoteUnreachable, RepoError
from memsync.git import transport
from memsync.git.integrate import Integration, WorktreeChanged, integrate
from memsync.git.merge import ConflictCopy
from memsync.git.trailers import compose, first, parse
from memsync.git.transport import NotFastForward, ProgressFn
from memsync.locking import clear_stale_git_locks, held
from memsync.memory import Memory

MAX_ROUNDS = 20
NETWORK_TRIES = 4  # backoff 0.5, 1, 2 s (+ jitter): a blip is ridden out, a dead hub fails in ~4 s


@dataclass
class Exchange:
    remote_head: str | None = None
    pushed: bool = False
    merges: list[Integration] = field(default_factory=list)

    @property
    def conflicts(self) -> list[ConflictCopy]:
        return [c for m in self.merges for c in m.conflicts]


def fetch(mem: Memory, progress: ProgressFn | None = None) -> str | None:
    """Update the tracking ref from the hub; the hub's tip, or None if the memory is not there."""
    spec = f"+refs/heads/{mem.branch}:{mem.tracking_ref}"
    heads = transport.fetch(mem.git.repo, mem.hub, [spec], progress)
    tip = heads.get(f"refs/heads/{mem.branch}")
    if tip is None:
        mem.git.delete_ref(mem.tracking_ref)
    return tip


def their_tag(mem: Memory, oid: str) -> str:
    """How to name the other side in a conflict copy: its run id, else its host."""
    trailers = parse(mem.git.commit_info(oid).message)
    return first(trailers, "Memsync-Run-Id") or first(trailers, "Memsync-Host") or "remote"


def merge_in(mem: Memory, theirs: str, who: Attribution,
             resnapshot: Callable[[], None]) -> Integration:
    """Integrate `theirs`; if files change on disk meanwhile, snapshot them and retry."""
    for _ in range(MAX_ROUNDS):
        tag = their_tag(mem, theirs)
        ours = mem.git.head_oid()
        subject = f"Merge {theirs[:8]} into {ours[:8] if ours else 'an empty memory'}"
        trailers = who.trailers([])
        message = compose(subject, trailers)
        try:
            result = integrate(mem.git, mem.branch, theirs, tag, message, who.author())
        except WorktreeChanged:
            resnapshot()
            time.sleep(0.05)
            continue
        return result
    raise RepoError("files kept changing during the merge", "retry when the writer is idle")


def _push_once(mem: Memory, expected: str | None, progress: ProgressFn | None) -> None:
    local_path = mem.hub.local_path
    if local_path is None:
        transport.push(mem.git.repo, mem.hub, mem.local_ref, f"refs/heads/{mem.branch}", progress)
        return
    with held(local_path / "memsync.lock", f"the hub {mem.hub.display}") as tenure:
        clear_stale_git_locks(local_path, tenure, f"the hub {mem.hub.display}")
        heads = {h.ref: h.oid for h in transport.list_heads(mem.git.repo, mem.hub)}
        if heads.get(f"refs/heads/{mem.branch}") != expected:
            raise NotFastForward("the hub moved on meanwhile")
        transport.push(mem.git.repo, mem.hub, mem.local_ref, f"refs/heads/{mem.branch}", progress)


def sync(mem: Memory, who: Attribution, resnapshot: Callable[[], None], *, push: bool = True,
         progress: ProgressFn | None = None) -> Exchange:
    """Fetch + merge (+ push) with retries; caller holds the memory's lock."""
    result = Exchange()
    network_failures = 0
    for round_no in range(MAX_ROUNDS):
        try:
            remote = fetch(mem, progress)
            if remote is not None:
                merged = merge_in(mem, remote, who, resnapshot)
                if merged.outcome == "merged":
                    result.merges.append(merged)
            result.remote_head = remote
            head = mem.git.head_oid()
            if not push or head is None or head == remote:
                return result
            _push_once(mem, remote, progress)
        except NotFastForward:
            time.sleep(random.uniform(0.01, 0.05) * (1 + round_no))
            continue
        except RemoteUnreachable:
            network_failures += 1
            if network_failures >= NETWORK_TRIES:
                raise
            time.sleep(0.5 * 2 ** (network_failures - 1) + random.uniform(0, 0.25))
            continue
        mem.git.set_ref(mem.tracking_ref, head, "memsync: pushed")
        result.remote_head = head
        result.pushed = True
        return result
    raise RepoError(f"the hub kept moving: gave up after {MAX_ROUNDS} rounds",
                    "many writers at once; retry `memsync push`")


def unpushed(mem: Memory) -> list[str]:
    """Short ids of local versions the hub does not have (by our last knowledge of it)."""
    head = mem.git.head_oid()
    if head is None:
        return []
    remote = mem.git.ref_oid(mem.tracking_ref)
    return [info.short for info in itertools.islice(mem.git.walk(head, hide=remote), 50)]


__all__ = ["Exchange", "fetch", "sync", "unpushed"]
