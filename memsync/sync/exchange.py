"""Fetch, integrate and push one memory until the hub holds our work (or we give up).

The hub is only ever fast-forwarded. If it moved on since our fetch, we fetch, merge (keeping both
sides of any conflict) and try again, folding the retry's merge into the refused one so history
gets one merge per exchange. On a file:// hub, libgit2's local transport is not trusted to
serialise concurrent ref updates: pushes take the hub's lock and re-check its tip under it.
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
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from memsync.core import maintenance
from memsync.core.attribution import Attribution
from memsync.core.locking import clear_stale_git_locks, held
from memsync.core.memory import Memory
from memsync.errors import AuthFailed, HostKeyError, RemoteUnreachable, RepoError
from memsync.git import localhub, rewrite, transport
from memsync.git.hubtree import Oversize
from memsync.git.trailers import compose, first, parse
from memsync.git.transport import NotFastForward, ProgressFn
from memsync.sync import shallow
from memsync.util.fs import atomic_write
from memsync.util.records import dataclass, field

if TYPE_CHECKING:  # imported only when needed: a status merges nothing
    from memsync.git.integrate import Integration
    from memsync.git.merge import ConflictCopy
    from memsync.sync.redaction import Decide, Recovery
    from memsync.sync.turns import Turn

MAX_ROUNDS = 20  # merges retried while files keep changing under them
BUSY_WAIT = 0.1  # seconds between tries of a merge whose files are open elsewhere
DEFAULT_PATIENCE = 600.0  # seconds a push keeps retrying against other writers
BACKOFF_BASE, BACKOFF_CAP = 0.02, 2.0
NETWORK_TRIES = 4  # backoff 0.5, 1, 2 s (+ jitter): a blip is ridden out, a dead hub fails in ~4 s


@dataclass
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
    spec = f"+refs/heads/{mem.branch}:{mem.tracking_ref}"
    known = mem.git.ref_oid(mem.tracking_ref)
    tip = _fetch_in_place(mem, known) if depth == 0 and localhub.in_place(mem.git, mem.hub) else _NOT_IN_PLACE
    if tip is _NOT_IN_PLACE:
        tip = transport.fetch(mem.git, mem.hub, [spec], f"refs/heads/{mem.branch}", progress, depth)
    elif tip is not None and tip != known:
        mem.git.set_ref(mem.tracking_ref, tip, "memsync: fetch")
    if tip is None:
        mem.git.delete_ref(mem.tracking_ref)
    elif known is not None and tip != known and not rewrite.reaches(mem.git, tip, known):
        # the hub rewrote its history (a redaction, followed or not): what it had is still known
        # to have come from a hub, not from a `git commit` here (Memory.hub_tips)
        mem.git.set_ref(mem.rewritten_ref, known, "memsync: the hub's tip before it rewrote its history")
    return tip


_NOT_IN_PLACE = "not read in place"


def _fetch_in_place(mem: Memory, known: str | None) -> str | None:
    """A hub on this machine: its branch's tip, read from the hub alone, once its objects are
    here (hard-linked, as before a transport fetch); `_NOT_IN_PLACE` when they could not all be
    (the transport then fetches what is missing). libgit2's local transport would list and peel
    every ref of the hub first: the cost grew with the number of memories (bench/fleet.py)."""
    assert mem.hub.local_path is not None
    transport.check_local(mem.hub)
    tip = localhub.branch_tip(mem.hub, f"refs/heads/{mem.branch}")
    if tip is None or tip == known:
        return tip
    linked = link_hub_objects(mem.hub.local_path, mem.git.git_dir, have=mem.git.has_object)
    if linked and mem.git.has_object(tip):  # a commit here comes with its history (link_hub_objects)
        return tip
    return _NOT_IN_PLACE


def local_tip(hub: Path, ref: str) -> str | None:
    """The commit id `ref` names in a bare repository on this machine, read from its files (a
    loose ref, else packed-refs); None if absent or not a plain id. A hint only: the fetch
    that follows asks the hub itself."""
    text: str | None
    try:
        with open(os.path.join(hub, ref), "rb") as fh:
            text = fh.read(128).decode("ascii").strip()
    except FileNotFoundError:
        text = _packed_ref(hub, ref)
    except (OSError, UnicodeDecodeError):
        return None
    return text if text is not None and len(text) == 40 and _is_hex(text) else None


def _packed_ref(hub: Path, ref: str) -> str | None:
    try:
        with open(os.path.join(hub, "packed-refs"), "rb") as fh:
            wanted = b" " + ref.encode() + b"\n"
            for line in fh:
                if line.endswith(wanted):
                    return line[:40].decode("ascii")
    except (OSError, UnicodeDecodeError):
        pass
    return None


def _is_hex(text: str) -> bool:
    return all(c in "0123456789abcdef" for c in text)


def link_hub_objects(hub: Path, git_dir: Path, packs: bool = False,
                     have: Callable[[str], bool] | None = None) -> bool:
    """Hard-link a hub's object files into the memory's repository before fetching from a hub on
    this machine, as `git clone /path` does; they are never modified, only replaced.

    Loose objects always (a plain `git push` leaves them loose, and libgit2's local transport
    would pack each one in memory: a 200 MB file cost ~450 MB of RSS); with `packs`, the packs
    too (a clone: libgit2 would otherwise recompute every delta, ~40 s at 100,000 files).
    `have(oid)`: objects the memory already holds (packed) are not linked again; a hub shared by
    many memories would otherwise hand each of them every memory's loose objects on every fetch,
    and the memory's automatic repack would pack them again each time.
    All or nothing: a fetch trusts that a commit it finds here comes with its whole history, so a
    partial copy would leave holes; on any failure (another file system, a repack removing files
    meanwhile) the links made are undone, False is returned and the fetch transfers what it needs.
    Loose objects go first: a repack writes its pack before removing them, so anything that
    vanished under us is in a pack listed afterwards.
    Linking any loose object links the packs too: a `git push` to the hub leaves commits loose
    whose parents are packed, and a loose commit without its history is a hole (libgit2's push
    then walks into it: "object not found", and `git fsck` reports a broken link)."""
    source, target = os.path.join(hub, "objects"), os.path.join(git_dir, "objects")
    linked: list[str] = []

    def link(src: str, dst: str) -> None:
        try:
            os.link(src, dst)
        except FileExistsError:
            return  # placed meanwhile (by another fetch): objects are never modified
        linked.append(dst)

    loose_linked = False
    try:
        for fan in sorted(n for n in os.listdir(source) if len(n) == 2 and _is_hex(n)):
            names = [n for n in os.listdir(os.path.join(source, fan)) if len(n) == 38]
            if not names:
                continue
            fan_dir = os.path.join(target, fan)
            if len(names) <= 8:  # a few: one stat each; many (a shared hub): one listing
                present = {n for n in names if os.path.exists(os.path.join(fan_dir, n))}
            else:
                try:
                    present = set(os.listdir(fan_dir))
                except FileNotFoundError:
                    present = set()
            missing = [n for n in names if n not in present and (have is None or not have(fan + n))]
            if not missing:
                continue
            if not present:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(fan_dir)  # (most fan directories exist already: one failed call)
            for name in missing:
                link(os.path.join(source, fan, name), os.path.join(fan_dir, name))
            loose_linked = True
        if packs or loose_linked:
            pack_dir = os.path.join(target, "pack")
            os.makedirs(pack_dir, exist_ok=True)
            for pack in sorted(Path(source, "pack").glob("pack-*.pack")):
                for src in (pack, pack.with_suffix(".idx")):  # the .idx last: a pack is visible once both exist
                    if not os.path.exists(os.path.join(pack_dir, src.name)):
                        link(str(src), os.path.join(pack_dir, src.name))
    except OSError:
        for path in reversed(linked):
            with contextlib.suppress(OSError):
                os.unlink(path)
        return False
    return True


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
    local_path = mem.hub.local_path
    source = source or mem.local_ref
    shallow.check_push(mem, expected)
    if local_path is None:
        transport.push(mem.git, mem.hub, source, f"refs/heads/{mem.branch}", progress, sending=sending)
        return
    with contextlib.nullcontext() if hub_locked else hub_lock(mem, push_patience()):
        ref = f"refs/heads/{mem.branch}"
        if not localhub.in_place(mem.git, mem.hub):  # the operator's URL rule: where the transport goes
            transport.push(mem.git, mem.hub, source, ref, progress, sending=sending)
            return
        if localhub.branch_tip(mem.hub, ref) != expected:
            raise NotFastForward("the hub moved on meanwhile")
        new = sending or mem.git.ref_oid(source)
        assert new is not None
        localhub.push(mem.git, mem.hub, new, ref, expected)
        point_head(local_path, f"refs/heads/{mem.branch}")
    if not hub_locked:  # every push adds a pack: keep the hub compact, beside its lock (maintenance.py)
        maintenance.auto_beside(local_path)


def point_head(hub: Path, ref: str) -> bool:
    """A hub on this machine whose HEAD names a branch it does not have (`git init --bare` leaves
    an unborn master or main) gets HEAD on `ref`, the first memory pushed to it: a plain
    `git clone` of the hub then checks that memory out instead of nothing. A HEAD its owner
    pointed at an existing branch is left alone. Call under the hub's lock."""
    head = os.path.join(hub, "HEAD")
    try:
        with open(head, encoding="ascii") as fh:
            text = fh.read(512).strip()
    except (OSError, UnicodeDecodeError):
        return False
    if not text.startswith("ref: refs/heads/") or local_tip(hub, text[5:]) is not None:
        return False
    try:
        # as readable as before (a hub served as another user)
        atomic_write(Path(head), f"ref: {ref}\n".encode("ascii"), keep_mode=True, durable=False)
    except OSError:
        return False  # a read-only hub: only a plain clone's convenience is lost
    return True


@contextlib.contextmanager
def hub_lock(mem: Memory, timeout: float | None = None) -> Iterator[Path]:
    """The lock of a hub on this machine (every memsync write to it holds it), with git lock files
    left there by a dead holder cleared; yields the hub's path. `timeout`: see locking.held."""
    local_path = mem.hub.local_path
    assert local_path is not None
    what = f"the hub {mem.hub.display}"
    with held(local_path / "memsync.lock", what, timeout) as tenure:
        clear_stale_git_locks(local_path, tenure, what)
        yield local_path


def push_patience() -> float:
    """How long a push keeps trying while other writers win the race (MEMSYNC_PUSH_PATIENCE)."""
    try:
        return max(float(os.environ.get("MEMSYNC_PUSH_PATIENCE", DEFAULT_PATIENCE)), 0.0)
    except ValueError:
        return DEFAULT_PATIENCE


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
         follow: Decide | None = None, live: bool = False) -> Exchange:
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
    (see the module's docstring) and leave work tree, index and branch as they are."""
    deadline = time.monotonic() + push_patience()
    places: list[Turn] = []  # the ticket a lost race took in a network hub's queue
    try:
        return _converge(mem, who, resnapshot, deadline, places, push=push, progress=progress, accept=accept,
                         vetted=vetted, depth=depth, follow=follow, live=live)
    finally:
        for turn in places:
            turn.release()


def _converge(mem: Memory, who: Attribution, resnapshot: Callable[[], None], deadline: float, places: list[Turn], *,
              push: bool, progress: ProgressFn | None, accept: Callable[[str], None] | None,
              vetted: Callable[[], list[str]] | None, depth: int, follow: Decide | None,
              live: bool = False) -> Exchange:
    result = Exchange()
    network_failures = 0
    lost = 0
    ahead_first = push and accept is None and mem.hub.local_path is None
    while True:
        serial = lost > 0 and mem.hub.local_path is not None
        try:
            if ahead_first:
                ahead_first = False  # once: after a refusal or a network failure, the full exchange
                head = _push_ahead(mem, progress, vetted)
                if head is not None:
                    break
            with hub_lock(mem, push_patience()) if serial else contextlib.nullcontext():
                remote = fetch(mem, progress, depth)
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
            if network_failures >= NETWORK_TRIES:
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
    if mem.hub.local_path is not None:
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
    (a connection on loopback: ~4 ms over git://, ~60 ms over HTTP, ~225 ms over SSH), leased on
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
        transport.push(mem.git, mem.hub, source, f"refs/heads/{mem.branch}", progress,
                       lease=transport.Lease(known), sending=None if source == mem.local_ref else head)
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
