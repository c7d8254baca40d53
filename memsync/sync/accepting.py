"""The operator's verbs on a proposal: accept (a three-way merge into the memory as a new
version), reject (closed, its history kept on the hub), and pruning closed ones (`gc`).

Accepting merges the proposal's tip, so a forge sees its pull request as merged; accepting some
paths merges a commit holding only those (on the proposal's base), so the rest stays open and a
later accept of the whole merges cleanly. When the hub rewrote the memory's history since the
proposal's base (a redaction), the proposal's history is not brought back into the memory: its
changes are moved onto the rewritten counterpart of its base and merged from there.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from memsync.core.attribution import Attribution, operator
from memsync.core.memory import Memory, refuse_during_run
from memsync.errors import Blocked, RepoError, UsageError
from memsync.git import proposaltree
from memsync.git.scan import scan
from memsync.git.trailers import compose, first, parse
from memsync.sync.proposals import (
    CLOSED_PREFIX,
    Proposal,
    closed_ref,
    find,
    hub_delete,
    hub_refs,
    hub_write,
)
from memsync.util.records import field, recordclass

if TYPE_CHECKING:
    from memsync.git.merge import ConflictCopy

MAX_REWRITE_WALK = 20_000
MAX_FLAG_TRAILERS = 20  # Memsync-Flag trailers an accepted version carries (then Memsync-Flags-Omitted)


@recordclass
class Acceptance:
    proposal: Proposal
    version: str | None  # the memory's new version
    paths: list[str] = field(default_factory=list)  # accepted paths (empty: all)
    pushed: bool = False
    conflicts: list[str] = field(default_factory=list)  # "path -> copy" kept both
    closed: bool = False  # the whole proposal is in: it is now accepted
    moved_base: bool = False  # its base had been rewritten by the hub: moved onto the new one
    flags: list[str] = field(default_factory=list)


def _counterpart(mem: Memory, base: str, tip: str) -> str | None:
    """The version of the memory's (rewritten) history that stands for `base`: same author
    time and message (a redaction rewrites trees, not those)."""
    wanted = mem.git.commit_info(base)
    for steps, info in enumerate(mem.git.walk(tip)):
        if steps >= MAX_REWRITE_WALK:
            break
        if info.time == wanted.time and info.message == wanted.message:
            return info.oid
    return None


def chosen(proposal: Proposal, paths: list[str]) -> list[str]:
    """The proposal's files that `paths` name (a file, or a folder: every file under it)."""
    found: list[str] = []
    for path in paths:
        folder = path.strip("/") + "/"
        named = [f for f in proposal.files if f == path or f.startswith(folder)]
        if not named:
            raise UsageError(f"proposal {proposal.id} does not change {path}",
                             f"it changes: {', '.join(proposal.files[:10]) or 'nothing'}")
        found += [f for f in named if f not in found]
    return found


def candidate(mem: Memory, proposal: Proposal, paths: list[str]) -> str:
    """The commit accepting `proposal` (or its `paths`) merges into the memory."""
    memory_tip = mem.git.ref_oid(mem.tracking_ref)
    base = proposal.base
    moved = base is not None and memory_tip is not None and not mem.git.is_ancestor(base, memory_tip)
    if paths:
        paths = chosen(proposal, paths)
    if not paths and not moved:
        return proposal.tip
    if base is None:
        raise RepoError(f"proposal {proposal.id} has no base version to narrow it from",
                        "accept it whole")
    on = base
    if moved:
        assert memory_tip is not None
        found = _counterpart(mem, base, memory_tip)
        if found is None:
            raise RepoError(f"proposal {proposal.id}: its base {base[:8]} is no longer in the memory's history "
                            "(the hub rewrote it) and no version there stands for it",
                            "review it with `memsync review`, then make the change anew")
        on = found
    who = Attribution("run", f"Proposal {proposal.id}" + (f" ({len(paths)} of its files)" if paths else ""),
                      proposal.run_id)
    message = compose(who.subject, who.trailers([]))
    return proposaltree.overlay(mem.git, on, proposal.tip, paths or proposal.files, message, who.author())


def _refuse_bad(mem: Memory, proposal: Proposal, theirs: str) -> list[str]:
    """The secret scan and the protect rules, as for any commit; the flags to record."""
    from memsync.sync.proposalcheck import check_changes

    base = mem.git.commit_info(theirs).parents[0] if theirs != proposal.tip else proposal.base
    checked = check_changes(mem, proposaltree.changes(mem.git, base, theirs))
    if theirs == proposal.tip:  # its history comes along: a secret added, then removed, is still in it
        checked.secrets += [s for s in _history_secrets(mem, theirs, base) if s not in checked.secrets]
    if checked.secrets and mem.config.secrets == "block":
        raise Blocked(f"proposal {proposal.id} holds likely secrets: {'; '.join(checked.secrets[:5])}",
                      "reject it (`memsync reject`); secrets: block in storage.yaml keeps them out of the memory")
    if checked.violations:
        raise Blocked(f"proposal {proposal.id} breaks protect rules: {'; '.join(checked.violations[:5])}",
                      "accept its other paths (`memsync accept ID -- PATH...`) or reject it")
    if checked.secrets:
        from memsync.util import notices

        notices.warn(f"proposal {proposal.id} holds likely secrets: {'; '.join(checked.secrets[:5])}")
    return checked.flags


MAX_HISTORY_SCAN = 1000  # a proposal's versions whose changes are scanned one by one


def _history_secrets(mem: Memory, tip: str, base: str | None) -> list[str]:
    """Likely secrets in any version of a proposal's own history, not only in its tip; a longer
    history than MAX_HISTORY_SCAN is refused rather than merged unread."""
    from memsync.checks.secrets import scan_bytes
    from memsync.sync.proposalcheck import MAX_TEXT, blob_data

    if mem.config.secrets == "off":
        return []
    found: list[str] = []
    for steps, info in enumerate(mem.git.walk(tip, hide=base)):
        if steps >= MAX_HISTORY_SCAN:
            raise Blocked(f"the proposal's history holds more than {MAX_HISTORY_SCAN} versions: not scanned",
                          "accept some of its paths (`memsync accept ID -- PATH...`): that merges its result only")
        parent = info.parents[0] if info.parents else None
        for change in proposaltree.changes(mem.git, parent, info.oid):
            data = blob_data(mem, change.new)
            if data is not None and len(data) <= MAX_TEXT:
                found += [f"{s.path}:{s.line} {s.rule} {s.preview} (in {info.short})"
                          for s in scan_bytes(change.path, data)]
    return found


def accept(mem: Memory, pid: str, paths: list[str] | None = None) -> Acceptance:
    """Merge the proposal `pid` (or its `paths`) into the memory as a new version, pushed.
    Refused while a run owns the memory; the work tree must hold no unsaved change."""
    from memsync.sync.exchange import converge

    paths = sorted(set(paths or []))
    with mem.locked():
        refuse_during_run(mem, "accept")
        mem.git.check_state(mem.branch)
        if scan(mem.git).changes:
            raise UsageError(f"memory {mem.name!r} has local changes", "save them first (`memsync push`), "
                             "so that accepting a proposal commits nothing but the proposal")
        proposal, _hub = find(mem, pid)
        if proposal.state == "accepted":
            raise UsageError(f"proposal {pid} is already accepted", "`memsync log` shows the version")
        resnap = _no_changes(mem)
        converge(mem, operator("Merge the remote memory before accepting a proposal"), resnap, push=False)
        theirs = candidate(mem, proposal, paths)
        flags = _refuse_bad(mem, proposal, theirs)
        who = Attribution("operator", f"Accept proposal {pid}" + (f" ({', '.join(paths[:3])})" if paths else ""),
                          proposal.run_id, (("Memsync-Accepted-Proposal", pid),))
        result = _merge(mem, theirs, pid, who, flags)
        done = Acceptance(proposal, mem.git.head_oid(), paths, flags=flags,
                          moved_base=theirs != proposal.tip and not paths)
        done.conflicts = [f"{c.path} -> {c.copy}" for c in result]
        exchange = converge(mem, operator("Accept a proposal"), resnap, push=True)
        done.pushed, done.version = exchange.pushed, mem.git.head_oid()
        if not paths or set(chosen(proposal, paths)) >= set(proposal.files):
            _close(mem, proposal, "accepted", None, done.version)
            done.closed = True
        return done


def _merge(mem: Memory, theirs: str, pid: str, who: Attribution, flags: list[str]) -> list[ConflictCopy]:
    from memsync.checks.merge_policy import strategy_for
    from memsync.core.snapshot import take
    from memsync.git.integrate import integrate

    if len(flags) > MAX_FLAG_TRAILERS:  # the proposal's own versions (and `review`) hold them all
        who = Attribution(who.actor, who.subject, who.run_id,
                          (*who.extra, ("Memsync-Flags-Omitted", str(len(flags) - MAX_FLAG_TRAILERS))))
        flags = flags[:MAX_FLAG_TRAILERS]
    message = compose(who.subject, who.trailers(flags))
    result = integrate(mem.git, mem.branch, theirs, pid, message, None, memory=mem.name,
                       max_file_size=mem.config.max_file_size,
                       strategy_for=lambda path: strategy_for(mem.config.merge, path))
    if result.outcome != "merged":  # a fast-forward (or nothing new): the acceptance is a version of its own
        take(mem, Attribution(who.actor, who.subject, who.run_id,
                              who.extra + tuple(("Memsync-Flag", f) for f in flags)),
             allow_empty=True, check_integrity=False)
    return list(result.conflicts)


def _no_changes(mem: Memory) -> Callable[[], None]:
    def resnap() -> None:
        raise RepoError(f"files changed in {mem.root} while the proposal was merged",
                        "run the command again when nothing writes there")
    return resnap


def reject(mem: Memory, pid: str, reason: str | None = None) -> Proposal:
    """Close the proposal `pid` unaccepted; its history stays on the hub (refs/memsync/proposals/)."""
    with mem.locked():
        refuse_during_run(mem, "reject")
        proposal, _hub = find(mem, pid)
        if proposal.state != "open":
            raise UsageError(f"proposal {pid} is already {proposal.state}",
                             "a rejected proposal can still be accepted: `memsync accept ID`")
        _close(mem, proposal, "rejected", reason, None)
        proposal.state, proposal.reason = "rejected", reason
        return proposal


def _close(mem: Memory, proposal: Proposal, state: str, reason: str | None, version: str | None) -> None:
    """Write the record of a closed proposal on the hub, then remove its branch."""
    from memsync.git.trailers import clean_value

    trailers = [("Memsync-Actor", "operator"), ("Memsync-Proposal", proposal.id),
                ("Memsync-Proposal-State", state)]
    if reason:
        trailers.append(("Memsync-Reason", clean_value(reason)[:500]))
    if version:
        trailers.append(("Memsync-Accepted-As", version))
    parents = [proposal.tip] + ([proposal.record] if proposal.record else [])
    record = proposaltree.record(mem.git, parents, compose(f"Proposal {proposal.id} {state}", trailers))
    ref = closed_ref(proposal.memory, proposal.id)
    local = f"refs/memsync/closing/{proposal.memory}/{proposal.id}"
    mem.git.set_ref(local, record, "memsync: close a proposal")
    hub_write(mem, local, ref, record, proposal.record)
    hub_delete(mem, f"refs/heads/{proposal.branch}", None)
    mem.git.delete_ref(local)
    for ref in (f"refs/heads/{proposal.branch}", f"refs/memsync/seen-proposals/heads/{proposal.branch}"):
        if mem.git.head_target() != ref:
            mem.git.delete_ref(ref)  # not waiting any more (proposals.waiting)
    proposal.record = record


def prune(mem: Memory, days: float) -> list[str]:
    """Forget closed proposals whose record is older than `days` (the hub's refs go; what an
    accepted one brought stays in the memory's history). The ids pruned."""
    cutoff = time.time() - days * 86400
    pruned: list[str] = []
    closed = hub_refs(mem, f"{CLOSED_PREFIX}{mem.name}/")
    wanted = [f"+{ref}:refs/memsync/pruning/{i}" for i, (ref, tip) in enumerate(closed.items())
              if not mem.git.has_object(tip)]
    if wanted:
        mem.hub.fetch_refs(mem.git, wanted)
    for ref, record in sorted(closed.items()):
        info = mem.git.commit_info(record)
        if info.time > cutoff or first(parse(info.message), "Memsync-Proposal-State") is None:
            continue
        hub_delete(mem, ref, record)
        pid = ref.removeprefix(f"{CLOSED_PREFIX}{mem.name}/")
        with contextlib.suppress(Exception):
            mem.git.delete_ref(f"refs/memsync/seen-proposals/memsync/proposals/{mem.name}/{pid}")
        pruned.append(pid)
    for ref, _tip in mem.git.refs_under("refs/memsync/pruning/"):
        mem.git.delete_ref(ref)
    return pruned


__all__ = ["Acceptance", "accept", "candidate", "prune", "reject"]
