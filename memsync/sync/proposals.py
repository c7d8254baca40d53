"""Proposals: a change to a memory waiting for review, kept on the hub as a plain branch.

Where a proposal lives on the hub (every transport, every forge; each ref counts against the
hub's ref caps):

- open: the branch `refs/heads/proposals/<name>/<id>`, based on the version its run pulled, so
  a forge shows it as a pull request into `memory/<name>`. Its id is the proposing run's id.
- closed: `refs/memsync/proposals/<name>/<id>`, a record commit whose first parent is the
  proposal's tip (its tree, the tip's) and whose message says `accepted` or `rejected`, by
  whom, when and why. The branch is removed when the proposal is closed; the record keeps its
  history reachable, so a rejected proposal can still be read and accepted later. A later
  record takes the earlier one as its second parent: the ref only ever moves forward.
- a branch whose tip the memory's branch already contains was merged elsewhere (a forge's pull
  request): it is shown as accepted.

The functions (each returns records, raises MemsyncError subclasses, never prints):

- `list_proposals(mem, include_closed=False, memory=None) -> list[Proposal]`: the hub's
  proposals of the memory (or of `memory`, another memory of the same hub): open ones; with
  `include_closed`, accepted and rejected ones too. One connection per ref prefix, plus a fetch
  of the proposals' objects not yet here.
- `find(mem, pid) -> (Proposal, HubProposals)`: one proposal by id, open or closed
  (ProposalNotFound, naming the open ones); caller holds the memory's lock.
- `waiting(mem) -> list[str]`: the ids of the open proposals as last seen by this clone, with no
  connection (`memsync status`).
- `check_room(mem)`: TooManyProposals past MEMSYNC_MAX_PROPOSALS open ones.
- `on_hub(name, remote=None) -> Memory` and `hub_wide(remote=None, include_closed=False)`: the
  same with no clone of the memory here (a cache repository under MEMSYNC_HOME): one memory's
  proposals, or every memory's on the hub (a page of all proposals).
- `review(mem, pid, paths=()) -> Review` (history/reviewing.py): what accepting would change now,
  against the memory's current version: per file, lines added and removed, a patch, flags.
- `forgotten(mem, pid) -> ForgettingReport` (history/reviewing.py, history/forgetting.py).
- `accept(mem, pid, paths=()) -> Acceptance` and `reject(mem, pid, reason) -> Proposal`
  (sync/accepting.py): the operator's verbs, refused while a run owns the memory.
- `prune(mem, days) -> list[str]` (sync/accepting.py): closed proposals older than `days`
  forgotten by the hub (`memsync gc`).
- `begin(mem, run_id) -> Memory` and `finish(view, mem)` (sync/proposing.py): a session's writes
  made a proposal; `split_for_review(mem, run_id, base, paths)` makes a run's changes to
  `mode: review` paths the proposal `run_id`. `begin` returns the memory as seen through the proposal's branch: every
  commit, checkpoint and push made on that view lands on `proposals/<name>/<id>`, never on the
  memory's branch; `finish` puts the work tree back on the memory's version.

A `Proposal` record: id, memory, run_id, state (open/accepted/rejected), base, tip, created
(RFC 3339), files, added, removed, flags, moved (the memory has versions since the base),
reason (a rejection's), closed_by, accepted_as.
"""

from __future__ import annotations

import contextlib
from typing import Literal

from memsync.core.memory import Memory
from memsync.errors import PushRejected, UsageError
from memsync.git.trailers import first, parse
from memsync.util import envcheck
from memsync.util.records import field, recordclass
from memsync.util.timefmt import rfc3339

OPEN_PREFIX = "refs/heads/proposals/"
CLOSED_PREFIX = "refs/memsync/proposals/"
SEEN = "refs/memsync/seen-proposals/"  # local copies of what the hub holds (keeps the objects)
DEFAULT_MAX_OPEN = 50  # open proposals per memory (MEMSYNC_MAX_PROPOSALS)
MAX_WALK = 10_000  # commits walked looking for a proposal's base
State = Literal["open", "accepted", "rejected"]


class ProposalNotFound(UsageError):
    def __init__(self, pid: str, memory: str, known: list[str]) -> None:
        listing = ", ".join(known[:10]) if known else "none"
        super().__init__(f"no proposal {pid!r} for memory {memory!r}",
                         f"open proposals: {listing}; `memsync proposals --all` lists the closed ones too")
        self.pid = pid


class TooManyProposals(PushRejected):
    def __init__(self, memory: str, count: int, cap: int) -> None:
        super().__init__(f"memory {memory!r} has {count} open proposals, the most allowed is {cap}",
                         "accept or reject some (`memsync proposals`), or raise MEMSYNC_MAX_PROPOSALS")


@recordclass
class Proposal:
    id: str
    memory: str
    run_id: str
    state: State
    base: str | None
    tip: str
    created: str
    files: list[str] = field(default_factory=list)
    added: int = 0
    removed: int = 0
    flags: list[str] = field(default_factory=list)
    moved: bool = False
    reason: str | None = None
    closed_by: str | None = None
    accepted_as: str | None = None
    record: str | None = None  # the closed record's commit on the hub

    @property
    def branch(self) -> str:
        return branch_for(self.memory, self.id)


def branch_for(memory: str, pid: str) -> str:
    return f"proposals/{memory}/{pid}"


def closed_ref(memory: str, pid: str) -> str:
    return f"{CLOSED_PREFIX}{memory}/{pid}"


def max_open() -> int:
    """Open proposals one memory may have (MEMSYNC_MAX_PROPOSALS, as util/envcheck.py checked it)."""
    return int(envcheck.number("MEMSYNC_MAX_PROPOSALS", DEFAULT_MAX_OPEN))


@recordclass
class HubProposals:
    """What a hub holds of one memory's proposals, its objects fetched here."""

    memory_tip: str | None
    open: dict[str, str]  # id: tip
    closed: dict[str, str]  # id: record


def hub_refs(mem: Memory, prefix: str) -> dict[str, str]:
    return mem.hub.refs_under(mem.git, prefix)


def read_hub(mem: Memory, memory: str | None = None) -> HubProposals:
    """The proposals of `memory` (default: mem's) on mem's hub, fetched into mem's repository;
    the memory's branch fetched too (caller holds the memory's lock)."""
    from memsync.sync.exchange import fetch

    name = memory or mem.name
    memory_tip = fetch(mem) if name == mem.name else None
    refs = {**hub_refs(mem, f"{OPEN_PREFIX}{name}/"), **hub_refs(mem, f"{CLOSED_PREFIX}{name}/")}
    other = f"refs/heads/{mem.config.type}/{name}"  # another memory of the hub: its default branch
    refs = {ref: tip for ref, tip in refs.items() if _valid_id(ref.rsplit("/", 1)[1])
            and ref.count("/") == (OPEN_PREFIX + name).count("/") + 1}  # nothing else is read or kept
    if name != mem.name:
        refs.update({ref: tip for ref, tip in hub_refs(mem, other).items() if ref == other})
    local = {ref: SEEN + ref.removeprefix("refs/") for ref in refs}
    wanted = [f"+{ref}:{local[ref]}" for ref, tip in refs.items() if not mem.git.has_object(tip)]
    if wanted:
        mem.hub.fetch_refs(mem.git, wanted)
    for ref, tip in refs.items():
        if mem.git.ref_oid(local[ref]) != tip:
            mem.git.set_ref(local[ref], tip, "memsync: proposal seen on the hub")
    for ref, _tip in mem.git.refs_under(f"{SEEN}heads/proposals/{name}/") + \
            mem.git.refs_under(f"{SEEN}memsync/proposals/{name}/"):
        if "refs/" + ref.removeprefix(SEEN) not in refs:
            mem.git.delete_ref(ref)  # gone from the hub
    for ref, _tip in mem.git.refs_under(f"{OPEN_PREFIX}{name}/"):
        closed_there = f"{CLOSED_PREFIX}{name}/{ref.removeprefix(f'{OPEN_PREFIX}{name}/')}" in refs
        if ref not in refs and closed_there and mem.git.head_target() != ref:
            mem.git.delete_ref(ref)  # this clone's proposal, closed since (one never pushed stays)
    if name != mem.name:
        memory_tip = refs.pop(other, None)
    opened = {r.removeprefix(f"{OPEN_PREFIX}{name}/"): t for r, t in refs.items() if r.startswith(OPEN_PREFIX)}
    closed = {r.removeprefix(f"{CLOSED_PREFIX}{name}/"): t for r, t in refs.items() if r.startswith(CLOSED_PREFIX)}
    return HubProposals(memory_tip, opened, closed)


def _valid_id(pid: str) -> bool:
    """A proposal id is a run id (names.check_run_id): any other branch a hub writer made under
    proposals/ is not one, and is never named in a ref memsync writes."""
    from memsync.util.names import RUN_ID_RE

    return bool(RUN_ID_RE.match(pid)) and ".." not in pid


def find_base(mem: Memory, pid: str, tip: str, memory_tip: str | None) -> tuple[str | None, int]:
    """The version a proposal started from, and when its first own version was made: below its
    run's own commits (first parents whose Memsync-Run-Id is the proposal's); for a branch made by
    hand, its merge base with the memory."""
    oid: str | None = tip
    steps = 0
    made = mem.git.commit_info(tip).time
    while oid is not None and steps < MAX_WALK:
        info = mem.git.commit_info(oid)
        if first(parse(info.message), "Memsync-Run-Id") != pid:
            if oid == tip:
                break
            return oid, made
        made = info.time
        oid = info.parents[0] if info.parents else None
        steps += 1
    if oid is None and steps:
        return None, made  # the run started an empty memory
    return (mem.git.merge_base(tip, memory_tip) if memory_tip else None), made


def _describe(mem: Memory, pid: str, name: str, tip: str, memory_tip: str | None) -> Proposal:
    from memsync.sync.proposalcheck import summarise

    base, made = find_base(mem, pid, tip, memory_tip)
    info = mem.git.commit_info(tip)
    created = rfc3339(made)
    proposal = Proposal(pid, name, first(parse(info.message), "Memsync-Run-Id") or pid, "open", base, tip, created)
    proposal.moved = memory_tip is not None and memory_tip != base
    proposal.files, proposal.added, proposal.removed, proposal.flags = summarise(mem, base, tip)
    return proposal


def _closed(mem: Memory, pid: str, name: str, record: str, memory_tip: str | None) -> Proposal:
    info = mem.git.commit_info(record)
    trailers = parse(info.message)
    proposal = _describe(mem, pid, name, info.parents[0], memory_tip)
    state = first(trailers, "Memsync-Proposal-State")
    proposal.state = "accepted" if state == "accepted" else "rejected"
    proposal.reason = first(trailers, "Memsync-Reason")
    proposal.closed_by = info.author_name
    proposal.accepted_as = first(trailers, "Memsync-Accepted-As")
    proposal.record = record
    return proposal


def list_proposals(mem: Memory, include_closed: bool = False, memory: str | None = None) -> list[Proposal]:
    with mem.locked():
        return _listed(mem, read_hub(mem, memory), memory or mem.name, include_closed)


def _listed(mem: Memory, hub: HubProposals, name: str, include_closed: bool) -> list[Proposal]:
    found: list[Proposal] = []
    for pid in sorted(hub.open.keys() | hub.closed.keys()):
        tip = hub.open.get(pid)
        record = hub.closed.get(pid)
        if record is not None and (tip is None or mem.git.commit_info(record).parents[0] == tip):
            proposal = _closed(mem, pid, name, record, hub.memory_tip)
        else:
            assert tip is not None
            proposal = _describe(mem, pid, name, tip, hub.memory_tip)
            if hub.memory_tip is not None and mem.git.is_ancestor(tip, hub.memory_tip):
                proposal.state = "accepted"  # merged elsewhere (a forge's pull request)
                proposal.moved = True
        if include_closed or proposal.state == "open":
            found.append(proposal)
    return found


def find(mem: Memory, pid: str) -> tuple[Proposal, HubProposals]:
    """One proposal (caller holds the memory's lock), with what the hub holds."""
    from memsync.util.names import check_run_id

    check_run_id(pid)
    hub = read_hub(mem)
    if pid not in hub.open and pid not in hub.closed:
        raise ProposalNotFound(pid, mem.name, sorted(hub.open))
    listed = [p for p in _listed(mem, HubProposals(hub.memory_tip, {k: v for k, v in hub.open.items() if k == pid},
                                                   {k: v for k, v in hub.closed.items() if k == pid}),
                                 mem.name, True)]
    return listed[0], hub


def waiting(mem: Memory) -> list[str]:
    """The open proposals of this memory as last seen here (this clone's own, and those the last
    `memsync proposals` found): no connection to the hub. One whose tip the memory's branch
    holds is accepted, not waiting."""
    merged = mem.git.ref_oid(mem.tracking_ref)
    found: set[str] = set()
    for prefix in (f"{OPEN_PREFIX}{mem.name}/", f"{SEEN}heads/proposals/{mem.name}/"):
        for ref, tip in mem.git.refs_under(prefix):
            pid = ref.removeprefix(prefix)
            if _valid_id(pid) and (merged is None or not mem.git.is_ancestor(tip, merged)):
                found.add(pid)
    return sorted(found)


def on_hub(name: str, remote: str | None = None) -> Memory:
    """The memory `name` of a hub (`--remote`, else MEMSYNC_REMOTE, else the embedded one) as
    proposals see it with no clone of it here: a bare cache repository under MEMSYNC_HOME holds
    what is fetched. Its configuration is the default one (the operator's own storage.yaml is
    in a clone: checks there may be stricter)."""
    import hashlib

    from memsync.core.config import StorageConfig
    from memsync.core.hubbind import bind
    from memsync.git import hub as hubmod
    from memsync.git.repo import GitRepo
    from memsync.sync.hubs import ensure_hub
    from memsync.util.names import check_name

    check_name(name)
    url = hubmod.resolve(remote, None, name)
    hub = bind(url)
    ensure_hub(hub)
    path = hubmod.ensure_home() / "cache" / f"proposals-{hashlib.sha256(url.url.encode()).hexdigest()[:16]}.git"
    return Memory(path, StorageConfig(name), GitRepo.bare(path, create=True), hub)


def hub_wide(remote: str | None = None, include_closed: bool = False) -> list[Proposal]:
    """Every memory's proposals on a hub, from no clone (on_hub): what `memsync proposals`
    lists outside a memory."""
    from memsync.git import hub as hubmod

    probe = on_hub("proposals", remote) if not remote or not hubmod.is_template(remote) else None
    if probe is None:
        raise UsageError("a hub address with {name} in it names one memory's hub", "add --memory NAME")
    names: set[str] = set()
    for prefix in (OPEN_PREFIX, CLOSED_PREFIX):
        for ref in hub_refs(probe, prefix):
            parts = ref.removeprefix(prefix).split("/")
            if len(parts) == 2:
                names.add(parts[0])
    found: list[Proposal] = []
    for name in sorted(names):
        with contextlib.suppress(UsageError):  # not a memory name: never a proposal
            found += list_proposals(on_hub(name, remote), include_closed)
    return found


def check_room(mem: Memory) -> None:
    """Refuse one more proposal past MEMSYNC_MAX_PROPOSALS open ones for this memory."""
    cap = max_open()
    count = len(hub_refs(mem, f"{OPEN_PREFIX}{mem.name}/"))
    if count >= cap:
        raise TooManyProposals(mem.name, count, cap)


def hub_write(mem: Memory, local: str, ref: str, new: str, expected: str | None) -> None:
    """Move the hub's `ref` to `new` (the local ref `local` names it), only forward: in place and
    compared with `expected` under the hub's lock on this machine, a fast-forward push elsewhere."""
    mem.hub.write_ref(mem.git, local, ref, new, expected)


def hub_delete(mem: Memory, ref: str, expected: str | None) -> None:
    """Remove the hub's `ref` (a closed proposal's branch, a pruned record); on this machine only
    if it still points at `expected` (None: wherever it points)."""
    mem.hub.delete_ref(mem.git, ref, expected)


__all__ = ["Proposal", "ProposalNotFound", "TooManyProposals", "branch_for", "find", "list_proposals"]
