"""A hub, as the verbs talk to it: one type, two kinds, chosen once when its address is resolved.

`open_hub` looks at a resolved address (hub.py) once and returns a `LocalHub` (a bare repository
on this machine, read and written in place: its refs, `packed-refs`, objects lent to a clone,
`HEAD`, its lock and its repack; localhub.py) or a `NetworkHub` (everything through libgit2's
transports: transport.py's functions, wrapped as they are). A hub on this machine whose traffic
one of the operator's URL rules sends elsewhere (`url.<base>.insteadOf`) stays a LocalHub (its
lock, its policies), and its refs go through the transport, which follows the rule
(`LocalHub._in_place`, as before this module). Nothing above `git/` asks which kind it holds: it
calls a method, and reads a policy by its meaning (`pushes_ahead`, `queues_losers`,
`retries_under_lock`, `keeps_unreachable`, `copied_here`, `reached_elsewhere`).

The hub's lock and its automatic repack are the core's (core/locking.py, core/maintenance.py,
above this layer): whoever binds the hub lends them (`Keeper`, core/hubbind.bind).
"""

from __future__ import annotations

import contextlib
import os
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memsync.errors import RemoteError
from memsync.git import hub as hubmod
from memsync.git.hub import HubUrl
from memsync.util import envcheck
from memsync.util.records import recordclass

if TYPE_CHECKING:  # imported where used: a completion loads neither libgit2 nor a transport
    from memsync.git.pack import RepackResult
    from memsync.git.repo import GitRepo
    from memsync.git.transport import ProgressFn

KINDS = ("memory", "artifact")
DEFAULT_PATIENCE = 600.0  # seconds a push keeps retrying against other writers (MEMSYNC_PUSH_PATIENCE)
_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{1,62}[a-z0-9]$")


@recordclass(frozen=True)
class Keeper:
    """What the core lends a hub on this machine: its lock (`held(lock file, what, timeout)`,
    core/locking.py), the git lock files a dead holder left cleared under it
    (`clear_stale(git_dir, tenure, what)`), and the repack when one is due (`compact(git_dir)`,
    core/maintenance.auto_beside)."""

    held: Callable[[Path, str, float | None], AbstractContextManager[Any]]
    clear_stale: Callable[[Path, Any, str], object]
    compact: Callable[[Path], object]


class Hub(ABC):
    """Where a memory's versions are exchanged. `url`: its resolved address (never a credential
    when shown: `display`)."""

    pushes_ahead = False  # a push may go first, leased on the last fetch (exchange._push_ahead)
    queues_losers = False  # a lost race waits its turn in the hub's queue (sync/turns.py)
    retries_under_lock = False  # a retry holds the hub's lock for the whole fetch-merge-push
    keeps_unreachable = False  # a rewritten history's old objects stay there until its host prunes
    copied_here = False  # its shelf is a copy fetched now and then, not the hub itself (see shelf)
    reached_elsewhere = False  # another machine reaches it at the same address (a project's shared settings)

    heads_at = "refs/hub/"  # where a listing finds the hub's branches in its shelf (see shelf)

    def __init__(self, url: HubUrl, keeper: Keeper) -> None:
        self.url = url
        self._keeper = keeper

    @property
    def display(self) -> str:
        return self.url.display

    @property
    def key(self) -> str:
        return self.url.key

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.display!r})"

    @abstractmethod
    def tips(self, git: GitRepo, refs: list[str]) -> dict[str, str]:
        """The commits `refs` name on the hub (absent ones left out), each read alone."""

    @abstractmethod
    def fetch(self, git: GitRepo, ref: str, into: str, progress: ProgressFn | None = None,
              depth: int = 0) -> str | None:
        """`ref`'s tip with its objects fetched into `git` and its ref `into` set to it; None when
        the hub has no such branch (`into` is then left for the caller)."""

    @abstractmethod
    def push(self, git: GitRepo, source: str, ref: str, expected: str | None, progress: ProgressFn | None = None,
             *, sending: str | None = None, locked: bool = False) -> None:
        """Fast-forward the hub's `ref` to `source` (`sending`: the commit it was set to), only from
        `expected` (NotFastForward otherwise). `locked`: the caller holds the hub's lock."""

    @abstractmethod
    def write_ref(self, git: GitRepo, source: str, ref: str, new: str, expected: str | None) -> None:
        """Move `ref` forward to `new` (the local ref `source` names it), a proposal's branch."""

    @abstractmethod
    def delete_ref(self, git: GitRepo, ref: str, expected: str | None) -> None:
        """Remove `ref`; on this machine only while it points at `expected` (None: anywhere)."""

    @abstractmethod
    def replace_branch(self, git: GitRepo, source: str, ref: str, new: str, expected: str) -> None:
        """Point `ref` at `new` (a rewritten history, not a fast-forward) only from `expected`;
        NotFastForward or PushRejected when it is elsewhere or the hub refuses."""

    @abstractmethod
    def refs_under(self, git: GitRepo, prefix: str) -> dict[str, str]:
        """The hub's refs under `prefix` (proposals, the push queue), name: target."""

    def fetch_refs(self, git: GitRepo, refspecs: list[str], depth: int = 0) -> None:
        """Fetch several refs by their refspecs (`depth`: see transport.fetch), through the
        transport whatever the hub."""
        from memsync.git import transport

        transport.fetch(git, self.url, refspecs, depth=depth)

    def push_leased(self, git: GitRepo, source: str, ref: str, lease: str | None,
                    progress: ProgressFn | None = None, *, sending: str | None = None) -> None:
        """Push `source` (empty: delete) to `ref` only while the hub's `ref` is at `lease` (None:
        absent), through the transport whatever the hub: NotFastForward, nothing sent, when it
        is elsewhere (a push ahead of the fetch, the push queue's tickets: `pushes_ahead`,
        `queues_losers`)."""
        from memsync.git import transport

        transport.push(git, self.url, source, ref, progress, lease=transport.Lease(lease), sending=sending)

    def lock(self, timeout: float | None = None) -> AbstractContextManager[object]:
        """The hub's lock around a write memsync serialises itself (a network hub: its server does)."""
        return contextlib.nullcontext()

    def ensure(self, name: str = "", exchanged: Callable[[], bool] | None = None) -> None:  # noqa: B027
        """Make the embedded hub on first use (a network hub: nothing); `exchanged()`: whether the
        memory `name` about to use it has exchanged with it before (then a missing hub is an
        error, HubGone, never made anew)."""

    def repack(self) -> RepackResult | None:
        """Repack the hub (gc); None where its host keeps it compact."""
        return None

    def clone_depth(self, full_history: bool) -> int:
        """How much history a clone fetches (0: all)."""
        return 0

    def lend_objects(self, git: GitRepo) -> None:  # noqa: B027 (a network hub lends nothing)
        """A clone borrows the hub's object files before it fetches (hard links)."""

    @abstractmethod
    def shelf(self, doing: str, patterns: list[str], cache: str = "") -> GitRepo:
        """A repository here in which the hub's branches matching `patterns` are current, under
        `heads_at`: the hub itself on this machine, else a cache repository under MEMSYNC_HOME
        fetched now (`cache`: its name's prefix, "" for `list`'s, "ui-" for the page's)."""

    def places_here(self) -> list[Path]:
        """The hub's repositories on this machine (a purge of redacted content reaches them)."""
        return []


class NetworkHub(Hub):
    """A hub reached through libgit2's transports (transport.py's functions, as they are)."""

    pushes_ahead = True
    queues_losers = True
    keeps_unreachable = True
    copied_here = True
    reached_elsewhere = True

    def tips(self, git: GitRepo, refs: list[str]) -> dict[str, str]:
        from memsync.git import transport

        return transport.branch_tips(git, self.url, refs)

    def fetch(self, git: GitRepo, ref: str, into: str, progress: ProgressFn | None = None,
              depth: int = 0) -> str | None:
        from memsync.git import transport

        return transport.fetch(git, self.url, [f"+{ref}:{into}"], ref, progress, depth)

    def push(self, git: GitRepo, source: str, ref: str, expected: str | None, progress: ProgressFn | None = None,
             *, sending: str | None = None, locked: bool = False) -> None:
        from memsync.git import transport

        transport.push(git, self.url, source, ref, progress, sending=sending)

    def write_ref(self, git: GitRepo, source: str, ref: str, new: str, expected: str | None) -> None:
        from memsync.git import transport

        transport.push(git, self.url, source, ref, sending=new)

    def delete_ref(self, git: GitRepo, ref: str, expected: str | None) -> None:
        from memsync.git import transport

        with contextlib.suppress(transport.NotFastForward):
            transport.push(git, self.url, "", ref)

    def replace_branch(self, git: GitRepo, source: str, ref: str, new: str, expected: str) -> None:
        from memsync.git import transport

        # the push's own ref advertisement must show `expected`, and the server moves the branch
        # only from what it advertised: a push landing at any moment is never overwritten
        transport.push(git, self.url, source, ref, force=True, lease=transport.Lease(expected))

    def refs_under(self, git: GitRepo, prefix: str) -> dict[str, str]:
        from memsync.git import transport

        return transport.refs_under(git, self.url, prefix)

    def clone_depth(self, full_history: bool) -> int:
        return 0 if full_history else 1

    def shelf(self, doing: str, patterns: list[str], cache: str = "") -> GitRepo:
        """The cache repository, with the hub's branches that match `patterns` (e.g. `memory/*`)
        fetched under `heads_at`, under the cache's lock."""
        from memsync.git import transport
        from memsync.git.repo import GitRepo

        home = hubmod.ensure_home()
        what = f"the {'listing' if not cache else cache.rstrip('-')} cache"
        with self._keeper.held(home / f"{cache}cache.lock", what, None) as tenure:
            git = GitRepo.bare(listing_cache(self.url, cache), create=True)
            self._keeper.clear_stale(git.git_dir, tenure, what)  # a killed `list` or page
            transport.fetch(git, self.url, [f"+refs/heads/{p}:{self.heads_at}{p}" for p in patterns])
        return git


class LocalHub(Hub):
    """A bare repository on this machine, read and written in place (localhub.py). Where one of
    the operator's URL rules (`url.<base>.insteadOf`, read from the repository `git` at hand)
    sends its traffic elsewhere, its refs are reached through the transport, which follows the
    rule (and refuses a rule in the repository's own configuration): `_in_place`."""

    retries_under_lock = True

    heads_at = "refs/heads/"

    def __init__(self, url: HubUrl, path: Path, keeper: Keeper) -> None:
        super().__init__(url, keeper)
        self.path = path
        self._transport = NetworkHub(url, keeper)  # where a URL rule sends the hub's traffic

    def _repo(self, doing: str) -> GitRepo:
        """The hub's repository, opened once per operation (a fetch, a push), never kept between
        two: a run or `watch` lasts hours, and a handle would hold the packs a repack removed."""
        from memsync.git import transport

        return transport.open_local_hub(self.url, doing)

    def _in_place(self, git: GitRepo) -> bool:
        from memsync.git import transport

        return not transport.rewritten(git, self.url)

    @contextlib.contextmanager
    def _locked(self, timeout: float | None) -> Iterator[None]:
        what = f"the hub {self.display}"
        with self._keeper.held(self.path / "memsync.lock", what, timeout) as tenure:
            self._keeper.clear_stale(self.path, tenure, what)
            yield

    def lock(self, timeout: float | None = None) -> AbstractContextManager[object]:
        return self._locked(timeout)

    def tips(self, git: GitRepo, refs: list[str]) -> dict[str, str]:
        from memsync.git import localhub, transport

        if not self._in_place(git):
            return self._transport.tips(git, refs)
        transport.check_local(self.url)
        opened = self._repo("cannot fetch from")
        return {ref: tip for ref in refs if (tip := localhub.branch_tip(self.url, ref, opened)) is not None}

    def fetch(self, git: GitRepo, ref: str, into: str, progress: ProgressFn | None = None,
              depth: int = 0) -> str | None:
        """The branch's tip read from the hub alone, once its objects are here (hard-linked);
        the transport fetches only when they could not all be linked. libgit2's local transport
        would list and peel every ref of the hub first: the cost grew with the number of
        memories (bench/fleet.py)."""
        from memsync.git import localhub, transport

        if depth != 0 or not self._in_place(git):
            return self._transport.fetch(git, ref, into, progress, depth)
        transport.check_local(self.url)
        known = git.ref_oid(into)
        tip = localhub.branch_tip(self.url, ref, self._repo("cannot fetch from"))
        if tip is None or tip == known:
            return tip
        if localhub.link_hub_objects(self.path, git.git_dir, have=git.has_object) and git.has_object(tip):
            git.set_ref(into, tip, "memsync: fetch")  # a commit here comes with its history
            return tip
        return transport.fetch(git, self.url, [f"+{ref}:{into}"], ref, progress, depth)

    def push(self, git: GitRepo, source: str, ref: str, expected: str | None, progress: ProgressFn | None = None,
             *, sending: str | None = None, locked: bool = False) -> None:
        from memsync.git import localhub
        from memsync.git.transport import NotFastForward

        with contextlib.nullcontext() if locked else self.lock(push_patience()):
            if not self._in_place(git):
                self._transport.push(git, source, ref, expected, progress, sending=sending)
                return
            opened = self._repo("cannot push to")
            if localhub.branch_tip(self.url, ref, opened) != expected:
                raise NotFastForward("the hub moved on meanwhile")
            new = sending or git.ref_oid(source)
            assert new is not None
            localhub.push(git, self.url, new, ref, expected, opened)
            localhub.point_head(self.path, ref)
        if not locked:  # every push adds a pack: keep the hub compact, beside its lock (maintenance.py)
            self._keeper.compact(self.path)

    def write_ref(self, git: GitRepo, source: str, ref: str, new: str, expected: str | None) -> None:
        from memsync.git import localhub

        if not self._in_place(git):
            self._transport.write_ref(git, source, ref, new, expected)
            return
        with self.lock(push_patience()):
            localhub.push(git, self.url, new, ref, expected)

    def delete_ref(self, git: GitRepo, ref: str, expected: str | None) -> None:
        from memsync.git import localhub, proposaltree

        if not self._in_place(git):
            self._transport.delete_ref(git, ref, expected)
            return
        with self.lock(push_patience()):
            tip = localhub.branch_tip(self.url, ref)
            if tip is not None and (expected is None or tip == expected):
                proposaltree.delete_hub_ref(self.url, ref, tip)

    def replace_branch(self, git: GitRepo, source: str, ref: str, new: str, expected: str) -> None:
        from memsync.git import localhub, rewrite, transport

        with self.lock():
            if localhub.branch_tip(self.url, ref) != expected:
                raise transport.NotFastForward(f"the hub's {ref} is not at {expected[:8]} any more")
            transport.push(git, self.url, source, source)  # the objects, under a ref of their own
            try:
                rewrite.set_hub_ref(self.path, ref, new, expected)
            finally:
                rewrite.delete_ref(self.path, source)

    def refs_under(self, git: GitRepo, prefix: str) -> dict[str, str]:
        from memsync.git import proposaltree, transport

        if not self._in_place(git):
            return self._transport.refs_under(git, prefix)
        transport.check_local(self.url)
        return proposaltree.hub_refs(self.url, prefix)

    def ensure(self, name: str = "", exchanged: Callable[[], bool] | None = None) -> None:
        if self.path != hubmod.embedded_hub_path():
            return
        from memsync.errors import RepoError
        from memsync.git import transport

        if exchanged is not None and not (self.path / "HEAD").exists() and exchanged():
            raise HubGone(name, self.path)
        home = hubmod.memsync_home()
        try:
            hubmod.ensure_home()
        except OSError as exc:
            raise RepoError(f"cannot create {home}: {exc.strerror}",
                            "set MEMSYNC_HOME to a writable directory") from exc
        with self._keeper.held(home / "hub.lock", "the embedded hub", None):
            transport.ensure_bare(self.path)

    def repack(self) -> RepackResult | None:
        if not (self.path / "objects").is_dir():
            return None
        from memsync.git import pack

        with self.lock():
            return pack.repack(self.path)

    def lend_objects(self, git: GitRepo) -> None:
        from memsync.git import localhub

        localhub.link_hub_objects(self.path, git.git_dir, packs=True)

    def places_here(self) -> list[Path]:
        return [self.path]

    def shelf(self, doing: str, patterns: list[str], cache: str = "") -> GitRepo:
        from memsync.git import transport

        transport.check_local(self.url)  # a clear error if it is missing
        return transport.open_local_hub(self.url, doing)


class HubGone(RemoteError):
    """The embedded hub a memory exchanged with has disappeared: never silently made anew."""

    def __init__(self, name: str, path: Path) -> None:
        super().__init__(
            f"the hub {path} that memory {name!r} was pushed to has disappeared (a new empty one "
            "would fork the memory silently)",
            f"restore it from a backup, or re-create it on purpose with `git init --bare {path}`, "
            "then `memsync push` sends this memory's versions there",
        )
        self.path = path


def open_hub(url: HubUrl, keeper: Keeper) -> Hub:
    """The hub at `url`, of its kind, decided here once: a path on this machine is a LocalHub,
    any other address a NetworkHub."""
    path = url.local_path
    return NetworkHub(url, keeper) if path is None else LocalHub(url, path, keeper)


def names_seen(url: HubUrl) -> set[str]:
    """Memory names on the hub at `url`, read from files alone (a completion: no libgit2, no
    network): a hub on this machine's own refs, else those its last listing cached."""
    path = url.local_path
    return branch_names(path, "refs/heads/") if path is not None else branch_names(listing_cache(url), "refs/hub/")


def listing_cache(url: HubUrl, cache: str = "") -> Path:
    """The bare repository that caches what `list` (or, `cache` "ui-", the page) fetched of a
    network hub."""
    import hashlib

    return hubmod.memsync_home() / "cache" / (cache + hashlib.sha256(url.url.encode()).hexdigest()[:16] + ".git")


def branch_names(git_dir: Path, prefix: str) -> set[str]:
    """Memory names under `prefix` (refs/heads/ or refs/hub/) + memory|artifact in a repository
    on this machine, from its loose refs and its `packed-refs` file (no libgit2)."""
    found: set[str] = set()
    for kind in KINDS:
        with contextlib.suppress(OSError):
            found |= {e.name for e in os.scandir(git_dir / prefix / kind) if e.is_file()}
    with contextlib.suppress(OSError), open(git_dir / "packed-refs", encoding="utf-8", errors="replace") as fh:
        for line in fh:
            ref = line.strip().split(" ", 1)[-1]
            for kind in KINDS:
                head = f"{prefix}{kind}/"
                if ref.startswith(head):
                    found.add(ref[len(head):])
    return {n for n in found if _NAME.match(n)}


def push_patience() -> float:
    """How long a push keeps trying while other writers win the race (MEMSYNC_PUSH_PATIENCE)."""
    return envcheck.number("MEMSYNC_PUSH_PATIENCE", DEFAULT_PATIENCE)


__all__ = ["Hub", "HubGone", "Keeper", "LocalHub", "NetworkHub", "branch_names", "listing_cache", "names_seen",
           "open_hub", "push_patience"]
