"""Fetch, integrate and push one memory until the hub holds our work (or we give up).

The hub is only ever fast-forwarded. If it moved on since our fetch, we fetch, merge (keeping both
sides of any conflict) and try again, folding the retry's merge into the refused one so history
gets one merge per exchange. The hub (git/remote.py) says how: a hub on this machine is written in
place under its lock, its tip re-checked under it, and a retry holds that lock throughout.
On a network hub, a push of work ahead of our last fetch goes first, leased on that fetch's
tip (see _push_ahead): one connection instead of two while nobody else writes.

While an agent writes in the work tree (a run's checkpoints: `live`), nothing of the hub's
reaches the work tree, the index or the branch: the merge of the branch (the run's own commits)
and the hub's tip is a commit of its own that only the hub and the tracking ref point at
(integrate.merge_aside). The next checkpoint's merge has the previous one's run commit as its
base, so each side is its base plus what it wrote since, and the hub's changes reach the work
tree with the run's final exchange, once the agent has ended (BRIEF rule 9).
"""

from __future__ import annotations

import contextlib
import itertools
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from memsync.core.attribution import Attribution
from memsync.core.memory import Memory
from memsync.errors import AuthFailed, HostKeyError, RemoteUnreachable, RepoError
from memsync.git import rewrite
from memsync.git.hubtree import Oversize
from memsync.git.remote import push_patience
from memsync.git.trailers import compose, first, parse
from memsync.git.transport import NotFastForward, ProgressFn
from memsync.sync import shallow
from memsync.util import envcheck
from memsync.util.records import field, recordclass

if TYPE_CHECKING:  # imported only when needed: a status merges nothing
    from memsync.git.integrate import Integration
    from memsync.git.merge import ConflictCopy
    from memsync.sync.redaction import Decide, Recovery
    from memsync.sync.turns import Turn

MAX_ROUNDS = 20  # merges retried while files keep changing under them
BUSY_WAIT = 0.1  # seconds between tries of a merge whose files are open elsewhere
BACKOFF_BASE, BACKOFF_CAP = 0.02, 2.0
# tries of an exchange whose hub cannot be reached (MEMSYNC_NETWORK_TRIES; a hook sets 2): backoff
# 0.5, 1, 2 s (+ jitter), so a blip is ridden out and a dead hub fails in ~4 s
NETWORK_TRIES = 4


@recordclass
class Exchange:
    remote_head: str | None = None
    pushed: bool = False
    merges: list[Integration] = field(default_factory=list)
    redaction: Recovery | None = None  # the hub's history was redacted: ours was rewritten to match
    held_back: list[Oversize] = field(default_factory=list)  # over max_file_size: not checked out
    rule_files: list[str] = field(default_factory=list)  # .gitattributes/.gitignore the hub's versions changed

    @property
    def conflicts(self) -> list[ConflictCopy]:
        return [c for m in self.merges for c in m.conflicts]


def fetch(mem: Memory, progress: ProgressFn | None = None, depth: int = 0) -> str | None:
    """Update the tracking ref from the hub; the hub's tip, or None if the memory is not there.
    `depth`: see transport.fetch (a clone from a network hub fetches the tip alone)."""
    known = mem.git.ref_oid(mem.tracking_ref)
    tip = mem.hub.fetch(mem.git, f"refs/heads/{mem.branch}", mem.tracking_ref, progress, depth)
    if tip is None:
        mem.git.delete_ref(mem.tracking_ref)
    elif known is not None and tip != known and not rewrite.reaches(mem.git, tip, known):
        # the hub rewrote its history (a redaction, followed or not): what it had is still known
        # to have come from a hub, not from a `git commit` here (Memory.hub_tips)
        mem.git.set_ref(mem.rewritten_ref, known, "memsync: the hub's tip before it rewrote its history")
    return tip


def their_tag(mem: Memory, oid: str) -> str:
    """How to name the other side in a conflict copy: its run id, else its host."""
    trailers = parse(mem.git.commit_info(oid).message)
    return first(trailers, "Memsync-Run-Id") or first(trailers, "Memsync-Host") or "remote"


def merge_in(mem: Memory, theirs: str, who: Attribution,
             resnapshot: Callable[[], None]) -> Integration:
    """Integrate `theirs`; if files change on disk meanwhile, snapshot them and retry."""
    from memsync.checks.merge_policy import strategy_for
    from memsync.git.integrate import WorktreeBusy, WorktreeChanged, integrate

    busy: list[str] = []
    for _ in range(MAX_ROUNDS):
        tag = their_tag(mem, theirs)
        ours = mem.git.head_oid()
        if ours is not None and shallow.is_shallow(mem) and mem.git.merge_base(ours, theirs) is None:
            shallow.complete(mem)  # the base is older than the shallow clone: fetch the rest
        subject = f"Merge {theirs[:8]} into {ours[:8] if ours else 'an empty memory'}"
        trailers = who.trailers([])
        message = compose(subject, trailers)
        try:
            result = integrate(mem.git, mem.branch, theirs, tag, message, who.author(), memory=mem.name,
                               max_file_size=mem.config.max_file_size,
                               strategy_for=lambda path: strategy_for(mem.config.merge, path))
        except WorktreeBusy as exc:
            busy = exc.paths
            time.sleep(BUSY_WAIT)
            continue
        except WorktreeChanged:
            busy = []
            resnapshot()
            time.sleep(0.05)
            continue
        return result
    if busy:
        from memsync.util.textsafe import display_path

        shown = ", ".join(display_path(p) for p in busy[:3]) + (" ..." if len(busy) > 3 else "")
        raise RepoError(f"not merged: the hub's version changes {shown}, open in another process in {mem.root}",
                        "the local version is committed and nothing was lost; run the command again once the "
                        "program writing there is done (memsync never writes over a file that is open)")
    raise RepoError("files kept changing during the merge", "retry when the writer is idle")


def _rule_changes(mem: Memory, before: str | None, remote: str) -> list[str]:
    """The rule files (.gitattributes, .gitignore) the hub changed since our last common version."""
    from memsync.checks.merge_policy import is_rule_file
    from memsync.git.ownership import changed_paths

    if before is None or before == remote:
        return []
    base = mem.git.merge_base(before, remote)
    if base is None or base == remote:
        return []
    return sorted(p for p in changed_paths(mem.git, base, remote) if is_rule_file(p))


def _follow_redaction(mem: Memory, theirs: str, decide: Decide | None = None) -> Recovery | None:
    """Histories that diverged may mean the hub's was redacted (see redaction.py)."""
    ours = mem.git.head_oid()
    if ours is None or mem.git.is_ancestor(ours, theirs) or mem.git.is_ancestor(theirs, ours):
        return None
    from memsync.sync.redaction import recover

    return recover(mem, theirs, decide)


OUTGOING = "refs/memsync/outgoing"


def _push_once(mem: Memory, expected: str | None, progress: ProgressFn | None, source: str | None = None,
               *, hub_locked: bool = False, sending: str | None = None) -> None:
    """`sending`: the commit `source` was just set to (a run's checked commit): what is pushed,
    whatever the ref holds by the time the push reads it."""
    shallow.check_push(mem, expected)
    mem.hub.push(mem.git, source or mem.local_ref, f"refs/heads/{mem.branch}", expected, progress,
                 sending=sending, locked=hub_locked)


def _backoff(lost: int) -> float:
    """Full jitter on a doubling ceiling (AWS's analysis of contended retries): writers that lost
    together do not come back together."""
    import random  # a lost race only

    return random.uniform(0.0, min(BACKOFF_CAP, BACKOFF_BASE * 2 ** min(lost, 16)))


def _fold(mem: Memory, merged: Integration, earlier: list[Integration]) -> Integration:
    """A merge on top of this exchange's previous merge, which the hub refused (another writer
    won): make the new one a merge of our own work and the hub's tip, so a retry adds no merge
    to history. The earlier merge never left this repository."""
    if not earlier or merged.head is None:
        return merged
    previous = earlier[-1]
    parents = mem.git.commit_info(merged.head).parents
    if previous.head is None or len(parents) != 2 or parents[0] != previous.head:
        return merged
    ours = mem.git.commit_info(previous.head).parents[0]
    folded = mem.git.reparent(merged.head, [ours, parents[1]])
    mem.git.note_made(folded)
    mem.git.set_ref(mem.local_ref, folded, "memsync: merge")
    earlier.pop()
    from memsync.git.integrate import Integration

    return Integration("merged", folded, previous.conflicts + merged.conflicts,
                       previous.kept_modified + merged.kept_modified, merged.held_back)


def converge(mem: Memory, who: Attribution, resnapshot: Callable[[], None], *, push: bool = True,
         progress: ProgressFn | None = None, accept: Callable[[str], None] | None = None,
         vetted: Callable[[], list[str]] | None = None, depth: int = 0,
         follow: Decide | None = None, live: bool = False, fetched: tuple[str | None] | None = None) -> Exchange:
    """Fetch + merge (+ push) until the hub holds our work; caller holds the memory's lock.

    `accept` may refuse (raise) a fetched version before anything of it reaches the work tree.
    `vetted` (a run): the commits already checked; push nothing but those, the hub's, and
    commits this process made on top of them. The exact commit checked is pushed, so a
    `git commit` landing meanwhile cannot ride along.

    Losing the race to another writer is retried until MEMSYNC_PUSH_PATIENCE runs out, each retry
    folding its merge into the previous one. On a hub on this machine the retry takes the hub's
    lock for the whole fetch-merge-push, so it cannot lose again. On a network hub the loser
    queues on the hub and retries in its turn (turns.py), or backs off with jitter where the
    hub refuses the queue. On a network hub the first try may be a push alone (_push_ahead);
    when that cannot be, the exchange goes on as above at once. `depth`: of the fetches (a
    clone's: see shallow.py). `follow`: the operator's word on a hub's redaction that is not
    secrets only (redaction.py). `live`: an agent may be writing in the work tree: merge aside
    (see the module's docstring) and leave work tree, index and branch as they are. `fetched`:
    (the hub's tip,) as the caller fetched it under the same lock (`fetch`), merged by the first
    round instead of fetching again."""
    deadline = time.monotonic() + push_patience()
    places: list[Turn] = []  # the ticket a lost race took in a network hub's queue
    try:
        return _converge(mem, who, resnapshot, deadline, places, push=push, progress=progress, accept=accept,
                         vetted=vetted, depth=depth, follow=follow, live=live, fetched=fetched)
    finally:
        for turn in places:
            turn.release()


def _converge(mem: Memory, who: Attribution, resnapshot: Callable[[], None], deadline: float, places: list[Turn], *,
              push: bool, progress: ProgressFn | None, accept: Callable[[str], None] | None,
              vetted: Callable[[], list[str]] | None, depth: int, follow: Decide | None,
              live: bool = False, fetched: tuple[str | None] | None = None) -> Exchange:
    result = Exchange()
    network_failures = 0
    lost = 0
    ahead_first = push and accept is None and mem.hub.pushes_ahead
    while True:
        serial = lost > 0 and mem.hub.retries_under_lock
        try:
            if ahead_first:
                ahead_first = False  # once: after a refusal or a network failure, the full exchange
                head = _push_ahead(mem, progress, vetted)
                if head is not None:
                    break
            with mem.hub.lock(push_patience()) if serial else contextlib.nullcontext():
                remote = fetch(mem, progress, depth) if fetched is None else fetched[0]
                fetched = None
                if live:
                    head = _merge_aside(mem, remote, who, result)
                elif remote is not None:
                    if accept is not None:
                        accept(remote)
                    result.redaction = _follow_redaction(mem, remote, follow) or result.redaction
                    before = mem.git.head_oid()
                    merged = merge_in(mem, remote, who, resnapshot)
                    result.held_back += merged.held_back
                    result.rule_files += [p for p in _rule_changes(mem, before, remote) if p not in result.rule_files]
                    if merged.outcome == "merged":
                        result.merges.append(_fold(mem, merged, result.merges))
                result.remote_head = remote
                if not live:
                    head = mem.git.head_oid()
                if not push or head is None or head == remote:
                    return result
                source = sending = None
                if vetted is not None:
                    _refuse_foreign(mem, head, [t for t in (remote, *vetted()) if t])
                if vetted is not None or live:
                    mem.git.set_ref(OUTGOING, head, "memsync: push")
                    source, sending = OUTGOING, head
                _push_once(mem, remote, progress, source, hub_locked=serial, sending=sending)
        except NotFastForward:
            lost += 1
            if time.monotonic() >= deadline:
                raise RepoError(f"the hub kept moving: other writers won {lost} times in "
                                f"{push_patience():.0f}s; the version is committed locally",
                                "retry `memsync push` (set MEMSYNC_PUSH_PATIENCE to wait longer)") from None
            if not _take_turn(mem, places, deadline):
                time.sleep(_backoff(lost))
            continue
        except RemoteUnreachable:
            network_failures += 1
            if network_failures >= envcheck.number("MEMSYNC_NETWORK_TRIES", NETWORK_TRIES):
                raise
            import random

            time.sleep(0.5 * 2 ** (network_failures - 1) + random.uniform(0, 0.25))
            continue
        break
    mem.git.set_ref(mem.tracking_ref, head, "memsync: pushed")
    result.remote_head = head
    result.pushed = True
    return result


def _merge_aside(mem: Memory, remote: str | None, who: Attribution, result: Exchange) -> str | None:
    """A live exchange's commit to push: the branch itself when the hub has nothing it lacks,
    else a merge of the two that the work tree never sees (integrate.merge_aside); None when
    the hub already holds the branch. A retry's merge replaces the refused one in `result`."""
    ours = mem.git.head_oid()
    result.merges = []
    if ours is None or remote is None or ours == remote or mem.git.is_ancestor(remote, ours):
        return ours
    if mem.git.is_ancestor(ours, remote):
        return None
    from memsync.checks.merge_policy import strategy_for
    from memsync.git.integrate import merge_aside

    if shallow.is_shallow(mem) and mem.git.merge_base(ours, remote) is None:
        shallow.complete(mem)
    message = compose(f"Merge {remote[:8]} into {ours[:8]}", who.trailers([]))
    merged = merge_aside(mem.git, ours, remote, their_tag(mem, remote), message, who.author(), memory=mem.name,
                         strategy_for=lambda path: strategy_for(mem.config.merge, path))
    result.rule_files += [p for p in _rule_changes(mem, ours, remote) if p not in result.rule_files]
    result.merges.append(merged)
    return merged.head


def _take_turn(mem: Memory, places: list[Turn], deadline: float) -> bool:
    """After a lost race on a network hub: wait for our turn in its queue (turns.py). False
    where there is no queue to wait in (a hub on this machine, the queue off or refused): the
    caller backs off instead."""
    if not mem.hub.queues_losers:
        return False
    from memsync.sync import turns

    if not places:
        if not turns.enabled():
            return False
        places.append(turns.Turn(mem, deadline))
    return places[0].after_loss()


def _push_ahead(mem: Memory, progress: ProgressFn | None, vetted: Callable[[], list[str]] | None) -> str | None:
    """The common case on a remote hub: nothing arrived there since our last fetch, and our
    branch is ahead of what we fetched. Push on one connection instead of a fetch's and a push's
    (a connection costs most over SSH, then HTTP: docs/PERFORMANCE.md), leased on
    that tip: the push's own ref advertisement must show it, else nothing is sent, and the server
    moves the branch only from it. With the hub there, the full exchange would fetch nothing and
    merge nothing: the same checks run on the same versions.

    Returns the commit pushed, or None when the full exchange must run: nothing to push, the hub
    moved, commits to refuse, or a credential or host refused (the full exchange fails as it
    always has, or pushes after a fetch that needed only read access). A network failure raises,
    and counts as one of the exchange's tries; a refusal by the server (hook, protected branch)
    raises: the lease held, so the full exchange would have fetched nothing first."""
    known = mem.git.ref_oid(mem.tracking_ref)
    head = mem.git.head_oid()
    if head is None or head == known or (known is not None and not mem.git.is_ancestor(known, head)):
        return None
    if shallow.missing_root(mem, known) is not None:
        return None  # said by the full exchange, against the hub's actual tip
    source = mem.local_ref
    if vetted is not None:
        try:
            _refuse_foreign(mem, head, [t for t in (known, *vetted()) if t])
        except RepoError:
            return None  # said by the full exchange, against the hub's actual tip
        mem.git.set_ref(OUTGOING, head, "memsync: push")
        source = OUTGOING
    try:
        mem.hub.push_leased(mem.git, source, f"refs/heads/{mem.branch}", known, progress,
                            sending=None if source == mem.local_ref else head)
    except (NotFastForward, AuthFailed, HostKeyError):
        return None
    return head


def _refuse_foreign(mem: Memory, head: str, hide: list[str]) -> None:
    from memsync.git.ownership import foreign

    found = foreign(mem.git, [head], hide, mem.git.made, limit=5)
    if found:
        raise RepoError(f"not pushed: commits memsync did not make appeared on {mem.branch} "
                        f"({', '.join(c.short for c in found)})", "the run folds them into its next commit")


def unpushed(mem: Memory) -> list[str]:
    """Short ids of local versions the hub does not have (by our last knowledge of it)."""
    head = mem.git.head_oid()
    if head is None:
        return []
    remote = mem.git.ref_oid(mem.tracking_ref)
    return [info.short for info in itertools.islice(mem.git.walk(head, hide=remote), 50)]


__all__ = ["Exchange", "converge", "fetch", "unpushed"]
