"""Talking to the hub: ls-remote, fetch, push; libgit2 errors become memsync errors here.

A push the server refuses (hook, protected branch) does not raise in libgit2: only the
`push_update_reference` callback says so, and it is checked. A non-fast-forward push raises and
becomes `NotFastForward`, which callers answer by fetching and merging again.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pygit2
from pygit2.enums import ConfigLevel, Option

from memsync.errors import (
    AuthFailed,
    DiskFull,
    HostKeyError,
    MemsyncError,
    PushRejected,
    RemoteError,
    RemoteUnreachable,
    RepoError,
)
from memsync.git import engine, native
from memsync.git.hub import HubUrl, safe_url
from memsync.git.packcheck import PackWatch
from memsync.git.repo import GitRepo
from memsync.util.records import recordclass

if TYPE_CHECKING:  # the network's helpers load with the first transfer: a hub on this machine needs none
    from memsync.git import fetchv2, netlimits
    from memsync.git.hostkeys import ServerIdentity

ProgressFn = Callable[[str, int, int, int], None]  # (phase, objects done, objects total, bytes)



def apply_timeouts() -> None:
    """libgit2's connect and I/O timeouts from MEMSYNC_CONNECT_TIMEOUT / MEMSYNC_IO_TIMEOUT
    (seconds): when memsync first reaches a hub, and again by a `memsync serve` worker for its
    caller's environment."""
    pygit2.option(Option.SET_SERVER_CONNECT_TIMEOUT, _seconds("MEMSYNC_CONNECT_TIMEOUT", 10) * 1000)
    pygit2.option(Option.SET_SERVER_TIMEOUT, _seconds("MEMSYNC_IO_TIMEOUT", 60) * 1000)


def _seconds(name: str, default: int) -> int:
    """A timeout in whole seconds (1.5 -> 2); a bad value is reported, with its variable, by
    netlimits.limits() when a network operation starts."""
    try:
        value = float(os.environ.get(name, "") or default)
    except ValueError:
        return default
    return max(1, math.ceil(value)) if math.isfinite(value) else default


_engaged = False


def _engage() -> None:
    """The process-wide settings a transfer needs, applied before memsync's first one (engine.py)."""
    global _engaged
    if not _engaged:
        from memsync.git import hostkeys, interrupts

        engine.engage()
        apply_timeouts()
        hostkeys.install()
        interrupts.install()
        _engaged = True


class NotFastForward(RemoteError):
    """The hub moved on since our fetch: fetch, merge and push again."""


@recordclass(frozen=True)
class Lease:
    """What a push expects the hub's branch to be (`tip` None: no such branch). The push's own
    ref advertisement is checked before anything is sent, and the server's update is conditional
    on that same value (the old id in the push command), so nothing the pusher has not seen is
    replaced."""

    tip: str | None


@recordclass(frozen=True)
class RemoteHead:
    ref: str
    oid: str


class Callbacks(pygit2.RemoteCallbacks):
    """Credentials, host checks, progress and the server's verdict on each pushed ref."""

    def __init__(self, hub: HubUrl, progress: ProgressFn | None = None,
                 lease: tuple[str, Lease] | None = None, watch: netlimits.Watch | None = None,
                 sending: tuple[str, str] | None = None, pack: PackWatch | None = None) -> None:
        super().__init__()
        self.hub = hub
        self.pack = pack  # a fetched pack's objects, checked before libgit2 resolves them (packcheck.py)
        self.progress = progress
        self.lease = lease  # (remote ref, what it must be now)
        self.sending = sending  # (remote ref, the id the push must give it)
        # the operation's deadline, minimum rate and advertisement cap (a hub on this machine: none)
        self.watch = watch if watch is not None and watch.port is not None else None
        self._data_started = False
        self._received = -1  # bytes of pack received, as libgit2 last reported them
        self._quiet_progress: Any = None
        self._pack_builder: Any = None
        self.rejected: dict[str, str] = {}
        self.server_lines: list[str] = []
        # a push's remote and the ids of the tips its negotiation may keep (narrow_to); then
        # (heads advertised, heads kept) once the negotiation is narrowed
        self._narrow: tuple[pygit2.Remote, frozenset[bytes]] | None = None
        self.narrowed: tuple[int, int] | None = None
        from memsync.git.credentials import Credentials, configure_tls

        self.keyring = Credentials(hub)
        if hub.local_path is None and not hub.url.startswith("git://"):  # no TLS on file:// and git://
            configure_tls()  # loading a CA bundle is slow (docs/PERFORMANCE.md)

    def credentials(self, url: str, username_from_url: str | None, allowed_types: int):  # type: ignore[no-untyped-def]
        if self.watch is not None:
            self.watch.check()
        return self.keyring.acquire(url, username_from_url, allowed_types)

    def server_identity(self, identity: ServerIdentity) -> None:
        """Called by hostkeys' certificate hook with the server's key or TLS verdict."""
        from memsync.git.credentials import check_server

        check_server(self.hub, identity)

    def certificate_check(self, certificate: None, valid: bool, host: bytes) -> bool:
        # Only reached if the hostkeys hook is not installed: never accept what libgit2 refused.
        return bool(valid) and self.hub.kind != "ssh"

    def sideband_progress(self, string: str) -> None:
        from memsync.git import netlimits

        self._data()
        for line in re.split(r"[\r\n]+", string):
            if line.strip():
                self.server_lines.append(netlimits.server_text(line))
        del self.server_lines[:-netlimits.SERVER_LINES_MAX]  # an endless stream of messages stays small

    def _data(self) -> None:
        """The server's data (pack, progress) is arriving: its advertisement is over."""
        if self.watch is not None:
            if not self._data_started:
                self._data_started = True
                self.watch.advertised()
            self.watch.check()

    def _pack_progress(self, received_bytes: int) -> None:
        """libgit2 reports each object received and each delta resolved: with no new bytes, the
        process is at work on what it has (indexing), which the minimum rate does not count as a
        stall. New bytes are the server's progress, which the rate measures on the socket."""
        watch = self.watch
        if watch is None:
            return
        if not self._data_started:
            self._data()
        if received_bytes == self._received:
            watch.busy()  # raises past a limit
        elif watch.tripped is not None:
            raise watch.tripped
        self._received = received_bytes

    def _on_received(self, received_bytes: int, received: int, total: int) -> None:
        self._pack_progress(received_bytes)
        if self.pack is not None:
            self.pack.progress(received, total, received_bytes)

    def transfer_progress(self, stats: pygit2.remotes.TransferProgress) -> None:
        self._on_received(stats.received_bytes, stats.received_objects, stats.total_objects)
        if self.progress is not None:
            self.progress("receiving", stats.received_objects, stats.total_objects, stats.received_bytes)

    @property
    def fetch_options(self) -> Any:
        return self._fetch_options

    @fetch_options.setter
    def fetch_options(self, opts: Any) -> None:
        """pygit2 hands every fetch's options over here before the fetch (pygit2 1.21's
        git_fetch_options). With no progress to show, libgit2 gets a callback that does
        nothing instead of pygit2's (see interrupts.quiet_progress)."""
        from memsync.git import interrupts

        if opts is not None and self.progress is None:
            if self.watch is None and self.pack is None:
                opts.callbacks.transfer_progress = interrupts.QUIET_PROGRESS
            else:  # kept on self: libgit2 holds only a pointer to it
                self._quiet_progress = interrupts.received_bytes_progress(self._on_received)
                opts.callbacks.transfer_progress = self._quiet_progress
        self._fetch_options = opts

    @property
    def push_options(self) -> Any:
        return self._push_options

    @push_options.setter
    def push_options(self, opts: Any) -> None:
        """As fetch_options, for a push: libgit2 building the pack (no bytes on the wire yet) is
        the process's own progress, which the minimum rate does not count as a stall."""
        from memsync.git import interrupts

        if opts is not None and self.watch is not None:
            self._pack_builder = interrupts.packbuilder_progress(self.watch.busy)
            opts.callbacks.pack_progress = self._pack_builder
        self._push_options = opts

    def push_transfer_progress(self, objects_pushed: int, total_objects: int, bytes_pushed: int) -> None:
        if self.watch is not None:
            self.watch.check()
        if self.progress is not None:
            self.progress("sending", objects_pushed, total_objects, bytes_pushed)

    def narrow_to(self, remote: pygit2.Remote, tips: frozenset[bytes]) -> None:
        """Have the push on `remote` negotiate with only the advertised heads at one of `tips`
        (raw ids) or at the pushed refs' current tips, not with every head the hub advertises."""
        self._narrow = (remote, tips)

    def push_negotiation(self, updates: list[pygit2.remotes.PushUpdate]) -> None:
        """Called by libgit2 with the hub's current tips, before the pack is built and sent."""
        if self.watch is not None:
            self.watch.advertised()
        if self._narrow is not None:
            remote, tips = self._narrow
            self.narrowed = native.trim_push_heads(remote, tips | {u.src.raw for u in updates})
        if self.hub.port is not None:
            from memsync.git import sockets

            sockets.send_promptly(self.hub.port)
        if self.sending is not None:
            ref, oid = self.sending
            sent = [str(u.dst) for u in updates if u.dst_refname == ref]
            if sent != [oid]:  # the local ref was moved between memsync setting it and the push reading it
                raise RepoError(f"not pushed: what was to be pushed to {ref} changed under the push",
                                "nothing was sent; run the command again")
        if self.lease is None:
            return
        ref, lease = self.lease
        current = [None if _is_zero(u.src) else str(u.src) for u in updates if u.dst_refname == ref]
        if current != [lease.tip]:
            raise NotFastForward(f"the hub's {ref} is not at {(lease.tip or 'nothing')[:8]} any more")

    def push_update_reference(self, refname: str, message: str | None) -> None:
        if message:
            from memsync.git import netlimits

            self.rejected[refname] = netlimits.server_text(message)


def _is_zero(oid: pygit2.Oid) -> bool:
    return not str(oid).strip("0")


def _anonymous(repo: pygit2.Repository, hub: HubUrl) -> pygit2.Remote:
    """A remote for exactly the hub memsync resolved. libgit2 applies `url.<base>.insteadOf` and
    `pushInsteadOf` even to anonymous remotes; a rule in the memory's own .git/config (which an
    agent or a careless command can write) would send the memory and its credential elsewhere."""
    _engage()
    return _resolved(repo, hub)


def rewritten(git: GitRepo, hub: HubUrl) -> bool:
    """Whether the operator's own `url.<base>.insteadOf` / `pushInsteadOf` sends this hub's traffic
    elsewhere: only the transport, which follows the rule, may then carry it (a hub on this
    machine is otherwise read and written in place, git/localhub.py). A rule in the repository's
    own config is refused, as for every transfer."""
    remote = _resolved(git._repo, hub)
    return remote.url != hub.url or remote.push_url not in (None, hub.url)


def _resolved(repo: pygit2.Repository, hub: HubUrl) -> pygit2.Remote:
    remote = repo.remotes.create_anonymous(hub.url)
    if remote.url == hub.url and remote.push_url in (None, hub.url):
        return remote
    rules = sorted({e.name for e in repo.config if e.level >= ConfigLevel.LOCAL
                    and e.name.lower().endswith((".insteadof", ".pushinsteadof"))})
    if not rules:
        return remote  # the operator's own global or system rule
    raise RepoError(f"the repository's own config rewrites the hub URL {hub.display} ({', '.join(rules)}); "
                    "memsync talks only to the hub it resolved",
                    f"remove the rule (git -C {Path(repo.workdir or repo.path)} config --unset {rules[0]}); "
                    "a hub is chosen by --remote, storage.yaml or MEMSYNC_REMOTE")


def translate(exc: Exception, hub: HubUrl, doing: str, watch: netlimits.Watch | None = None) -> MemsyncError:
    """A libgit2 failure as a one-line error with the URL redacted; the limit that stopped the
    operation if one did (libgit2 then only saw its connection close)."""
    from memsync.git import netlimits

    if watch is not None and watch.tripped is not None:
        return watch.tripped
    text = safe_url(str(exc)).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    text = netlimits.server_text(text)  # a server's message can be as long as it likes
    lowered = text.lower()
    where = hub.display
    if isinstance(exc, RemoteError):
        return exc
    if "not owned by current user" in lowered:  # a file:// hub owned by another user
        path = hub.local_path or hub.url
        return RemoteError(f"{doing} {where}: detected dubious ownership in repository at '{path}' "
                           "(owned by another user)",
                           f"if you trust it, add an exception: git config --global --add safe.directory {path}")
    if "no space left" in lowered or "disk quota" in lowered or "file too large" in lowered:
        # this machine's disk (the memory's .git, or a hub on this machine), not the hub's state:
        # the one low on space, first the folder of the file libgit2 names (a fetch's pack)
        from memsync.git.diskfull import full_place

        return DiskFull(full_place(text, [hub.local_path, Path.cwd()]), f"{doing} {where}: {text}")
    if "authentication" in lowered or "401" in lowered or "403" in lowered or "credentials" in lowered:
        return AuthFailed(f"{doing} {where}: authentication failed ({text})",
                          "check MEMSYNC_TOKEN / MEMSYNC_SSH_KEY (see README, Remotes)")
    if "host key" in lowered or "hostkey" in lowered or "certificate" in lowered:
        return HostKeyError(f"{doing} {where}: the server's identity was refused ({text})",
                            "see README, Remotes: trusting a host")
    if ("non-fast-forward" in lowered or "not fast-forward" in lowered or "fastforwardable" in lowered
            or "not present locally" in lowered):  # libgit2: the remote tip moved past our fetch
        return NotFastForward(f"{doing} {where}: the remote moved on meanwhile")
    if "redirect" in lowered:  # libgit2 follows the first request's redirect only, like git
        return RemoteUnreachable(f"{doing} {where}: the server redirected a request memsync does not follow ({text})",
                                 "if the hub moved, use the URL it redirects to as the remote")
    if "failed to resolve address" in lowered:
        return RemoteUnreachable(f"{doing} {where}: unknown host ({text})",
                                 "check the host name in the URL and the network's DNS "
                                 "(`memsync run --offline` works on the local copy)")
    if "timed out" in lowered:
        return RemoteUnreachable(f"{doing} {where}: the server did not answer in time ({text})",
                                 "check the server; MEMSYNC_CONNECT_TIMEOUT and MEMSYNC_IO_TIMEOUT (seconds) "
                                 "set the limits")
    if "connection refused" in lowered:
        return RemoteUnreachable(f"{doing} {where}: nothing is listening there ({text})",
                                 "the server is down or the port is wrong "
                                 "(`memsync run --offline` works on the local copy)")
    if "object format" in lowered or "object-format" in lowered or "sha256" in lowered:
        return RemoteError(f"{doing} {where}: the hub uses git's sha256 object format, which memsync "
                           f"(libgit2) cannot read ({text})",
                           "use a hub in the sha1 format (`git init --bare --object-format=sha1 PATH`, git's "
                           "default); a sha256 repository cannot be converted in place")
    if "no match for id" in lowered or ("object not found" in lowered and "odb" in lowered):
        # an object is missing from a repository, not a missing repository
        return RepoError(f"{doing} {where}: an object the history refers to is missing ({text})",
                         "run `git fsck` in the memory directory and on the hub; `memsync clone` into a "
                         "new directory gets a complete copy; nothing was pushed")
    if ("not found" in lowered or "does not appear to be a git repository" in lowered
            or "could not find repository" in lowered or "failed to resolve path" in lowered
            or "not a git repository" in lowered or "repository not exported" in lowered):
        return RemoteUnreachable(f"{doing} {where}: no git repository there ({text})",
                                 "check the URL; create a bare repository with `git init --bare`")
    return RemoteUnreachable(f"{doing} {where}: {text}",
                             "check the network and the URL (`memsync run --offline` works on the local copy)")


def _watch(hub: HubUrl, doing: str, expects_pack: bool = False) -> contextlib.AbstractContextManager[netlimits.Watch]:
    """The limits of one network operation on `hub` (a hub on this machine is not watched)."""
    from memsync.git import netlimits

    return netlimits.watch(hub.port if hub.local_path is None else None, hub.display, doing, expects_pack)


def _check_refs(count: int, hub: str, doing: str, cap: int, named: bool = False) -> None:
    """The advertisement's size against MEMSYNC_MAX_REFS: refused past it, only a warning for an
    operation that read `named` refs alone (netlimits.check_refs)."""
    from memsync.git import netlimits

    netlimits.check_refs(count, hub, doing, cap, named)


def check_local(hub: HubUrl) -> None:
    path = hub.local_path
    if path is not None and not (path / "HEAD").exists() and not (path / ".git").exists():
        raise RemoteUnreachable(f"remote {hub.display} does not exist",
                                f"create it with `git init --bare {path}`, or fix --remote")


def open_local_hub(hub: HubUrl, doing: str) -> GitRepo:
    """A hub on this machine, opened in place (`list` reads its refs and trees there)."""
    assert hub.local_path is not None
    try:
        return GitRepo.bare(hub.local_path)
    except pygit2.GitError as exc:  # e.g. an empty `.git` directory
        said = str(exc).lower()
        if "not owned by current user" in said or "object format" in said:  # a repository, not for libgit2
            raise translate(exc, hub, doing) from exc
        raise RemoteUnreachable(f"{doing} {hub.display}: no git repository there ({exc})",
                                "check the URL; create a bare repository with `git init --bare`") from exc


def list_heads(git: GitRepo, hub: HubUrl) -> list[RemoteHead]:
    """The hub's ref advertisement (ls-remote): works on every transport."""
    repo = git._repo
    check_local(hub)
    with _watch(hub, "cannot list") as watch:
        cb = Callbacks(hub, watch=watch)
        try:
            heads = _anonymous(repo, hub).list_heads(callbacks=cb)
        except (pygit2.GitError, OSError, ValueError) as exc:
            raise translate(exc, hub, "cannot list", watch) from exc
    _check_refs(len(heads), hub.display, "cannot list", watch.limits.max_refs)
    return [RemoteHead(h.name, str(h.oid)) for h in heads if h.name and h.name.startswith("refs/heads/")]


def branch_tips(git: GitRepo, hub: HubUrl, refs: list[str]) -> dict[str, str]:
    """The tips of `refs` among the hub's ones (absent: not there), from one connection's ref
    advertisement, without a Python object per advertised ref (see `advertised`); a hub on
    this machine has them read in place by localhub.branch_tip instead. A git:// or HTTP(S)
    server that speaks protocol v2 sends just those refs (lsrefs.py)."""
    listed = _listed(git, hub, refs)
    if listed is not None:
        return listed

    def tips(remote: pygit2.Remote) -> tuple[int, dict[str, str]]:
        found: dict[str, str] = {}
        count = 0
        for ref in refs:
            count, tip = advertised(remote, ref)
            if tip is not None:
                found[ref] = tip
        return count, found

    return _read_advertisement(git, hub, tips, named=True)


def _listed(git: GitRepo, hub: HubUrl, refs: list[str]) -> dict[str, str] | None:
    """The tips of `refs` from a protocol-v2 ref listing, None where there is none to have: an
    SSH hub or one on this machine, a v0 server, MEMSYNC_V2_LISTING=0, or an operator's URL rule sending the hub's
    traffic elsewhere (only libgit2 follows it)."""
    from memsync.util import envcheck

    if hub.kind not in ("git", "http") or not envcheck.switch("MEMSYNC_V2_LISTING"):
        return None
    _engage()
    if rewritten(git, hub):
        return None
    from memsync.git import lsrefs

    return lsrefs.tips(hub, refs)


def refs_under(git: GitRepo, hub: HubUrl, prefix: str) -> dict[str, str]:
    """The hub's refs whose names start with `prefix`, and their tips, from one connection's
    advertisement (sync/turns.py reads its queue so)."""
    return _read_advertisement(git, hub, lambda remote: prefixed(remote, prefix))


def _read_advertisement(git: GitRepo, hub: HubUrl, read: Callable[[pygit2.Remote], tuple[int, dict[str, str]]],
                        named: bool = False) -> dict[str, str]:
    """`read` of one connection's ref advertisement (how many refs it held, what was found),
    under the network limits, the advertisement's size checked (`named`: `read` looked up refs
    by name, a warning past MEMSYNC_MAX_REFS)."""
    check_local(hub)
    with _watch(hub, "cannot list") as watch:
        cb = Callbacks(hub, watch=watch)
        try:
            remote = _anonymous(git._repo, hub)
            remote.connect(callbacks=cb)
            count, found = read(remote)
        except (pygit2.GitError, OSError, ValueError) as exc:
            raise translate(exc, hub, "cannot list", watch) from exc
    _check_refs(count, hub.display, "cannot list", watch.limits.max_refs, named)
    return found


def prefixed(remote: pygit2.Remote, prefix: str) -> tuple[int, dict[str, str]]:
    """(how many refs the advertisement held, those under `prefix` with their tips), as
    `advertised` reads it: no Python object for the refs not asked for."""
    return native.remote_heads(remote, prefix=prefix.encode())


UNSHALLOW = 2**31 - 1  # libgit2's GIT_FETCH_DEPTH_UNSHALLOW: the whole history behind a shallow clone


def fetch(git: GitRepo, hub: HubUrl, refspecs: list[str], want: str | None = None,
          progress: ProgressFn | None = None, depth: int = 0) -> str | None:
    """Fetch; returns the tip of the hub's ref `want` as advertised on that same connection
    (authoritative: a tracking ref left from before may be stale), None if it has none.
    `depth`: 0 all history (a shallow repository stays as shallow as it is), N the last N
    versions, UNSHALLOW what a shallow one lacks."""
    repo = git._repo
    check_local(hub)
    branch = _one_branch(refspecs, want, depth)
    fetched, listing = _fetch_v2(git, hub, branch, progress, depth)
    if fetched is not None:
        return fetched.tip
    unchanged = _unchanged(git, hub, branch) if listing else None
    if unchanged is not None:
        return unchanged
    remote = _anonymous(repo, hub)
    with _watch(hub, "cannot fetch from", expects_pack=True) as watch:
        pack = PackWatch(Path(repo.path) / "objects" / "pack", git.object_bound, hub.display)
        cb = Callbacks(hub, progress, watch=watch, pack=pack)
        try:
            remote.fetch(refspecs, callbacks=cb, depth=depth)
            count, tip = advertised(remote, want)
        except (pygit2.GitError, OSError, ValueError) as exc:
            raise translate(exc, hub, "cannot fetch from", watch) from exc
        finally:
            pack.close()
    named = not any("*" in spec for spec in refspecs)  # no listing: the refs it names, or none
    _check_refs(count, hub.display, "cannot fetch from", watch.limits.max_refs, named)
    return tip


def _one_branch(refspecs: list[str], want: str | None, depth: int) -> tuple[str, str] | None:
    """(the hub's ref, the tracking ref) of a fetch of one branch into its tracking ref with all
    its history or (a clone's) its tip alone, which a v2 listing or fetch can serve; None for
    any other fetch."""
    if want is None or depth not in (0, 1) or len(refspecs) != 1:
        return None
    source, _, destination = refspecs[0].lstrip("+").partition(":")
    return (want, destination) if source == want and destination else None


def _fetch_v2(git: GitRepo, hub: HubUrl, branch: tuple[str, str] | None,
              progress: ProgressFn | None, depth: int = 0) -> tuple[fetchv2.Fetched | None, bool]:
    """(the branch fetched over protocol v2 (fetchv2.py), or None: libgit2's to fetch; whether a
    v2 listing is still worth a try before libgit2's fetch). MEMSYNC_V2_FETCH=0: libgit2 fetches."""
    from memsync.util import envcheck

    if branch is None or not envcheck.switch("MEMSYNC_V2_FETCH") or hub.kind not in ("git", "http") \
            or not envcheck.switch("MEMSYNC_V2_LISTING"):
        return None, branch is not None
    _engage()
    if rewritten(git, hub):
        return None, False
    from memsync.git import fetchv2, native

    if not native.PackIndexer.available():
        return None, True
    return fetchv2.fetch(git, hub, branch[0], branch[1], progress, depth), False


def _unchanged(git: GitRepo, hub: HubUrl, branch: tuple[str, str] | None) -> str | None:
    """The tip of the hub's branch if the fetch of it has nothing to bring: a v2 listing
    (_listed) says the hub's branch is where the tracking ref is already. None: fetch."""
    if branch is None:
        return None
    want, destination = branch
    known = git.ref_oid(destination)
    if known is None:
        return None
    listed = _listed(git, hub, [want])
    return known if listed is not None and listed.get(want) == known else None


def advertised(remote: pygit2.Remote, want: str | None) -> tuple[int, str | None]:
    """(how many refs the connection's advertisement held, the tip of `want` among them),
    read from libgit2's list without a Python object per ref (pygit2's list_heads makes one,
    which a hub of many memories feels: docs/PERFORMANCE.md)."""
    count, found = native.remote_heads(remote, exact=None if want is None else want.encode())
    return count, next(iter(found.values()), None)


def push(git: GitRepo, hub: HubUrl, local_ref: str, remote_ref: str,
         progress: ProgressFn | None = None, *, force: bool = False, lease: Lease | None = None,
         sending: str | None = None) -> None:
    """Push of one ref, never forced except by `memsync redact` (which checks the hub's tip
    first); with a `lease`, only if the hub's ref is where the lease says (else NotFastForward,
    nothing sent). `sending`: the id `local_ref` was set to for this push; if the ref holds
    another when libgit2 reads it (an agent moved it meanwhile), nothing is sent (RepoError).
    Raises NotFastForward, PushRejected or RemoteError."""
    check_local(hub)
    with _watch(hub, "cannot push to") as watch:
        cb = Callbacks(hub, progress, None if lease is None else (remote_ref, lease), watch,
                       None if sending is None else (remote_ref, sending))
        try:
            # a handle of its own, whose pack builder keeps no delta cache (engine.for_packing)
            git.let_go()
            repo = engine.for_packing(git._repo.path)
            with engine.uncached():  # the handle must not cache again what git's handle holds
                send(repo, hub, f"{'+' if force else ''}{local_ref}:{remote_ref}", cb)
        except (pygit2.GitError, OSError, ValueError) as exc:
            raise translate(exc, hub, "cannot push to", watch) from exc
    if cb.rejected:
        reason = "; ".join(f"{ref}: {msg}" for ref, msg in cb.rejected.items())
        if any(_raced(m) for m in cb.rejected.values()):
            raise NotFastForward(f"the remote moved on meanwhile ({reason})")
        said = " | ".join(cb.server_lines[-5:])
        raise PushRejected(
            f"{hub.display} refused the push: {reason}" + (f" (server said: {said})" if said else ""),
            "the commit stays local; ask the hub's owner (hook or protected branch), then `memsync push`",
        )


def send(repo: pygit2.Repository, hub: HubUrl, refspec: str, cb: Callbacks) -> None:
    """libgit2's push of `refspec`. Its negotiation hides every head the hub advertises from the
    pack's walk, and each head the memory lacks costs a re-read of the pack folder: 86% of a push
    to a hub of 100,000 memories (docs/PERFORMANCE.md). Only the heads at one of the memory's own
    refs' tips (the tracking ref holds the hub's tip of the memory's branch) or at the pushed
    ref's tip can spare the pack an object, so the push negotiates with those alone
    (MEMSYNC_NARROW_PUSH=0: with every head, as libgit2 does)."""
    from memsync.util import envcheck

    remote = _anonymous(repo, hub)
    if envcheck.switch("MEMSYNC_NARROW_PUSH"):
        cb.narrow_to(remote, local_tips(repo))
    remote.push([refspec], callbacks=cb)


def local_tips(repo: pygit2.Repository) -> frozenset[bytes]:
    """The raw ids of the repository's refs' tips (a memory holds a handful of refs)."""
    tips = set()
    for ref in repo.references.iterator():
        target = ref.target
        if isinstance(target, pygit2.Oid):
            tips.add(target.raw)
    return frozenset(tips)


# The server refused because the ref moved under us: a non-fast-forward, or (git receive-pack)
# another push won the race for the ref's lock ("failed to update ref", "cannot lock ref ... is
# at X but expected Y"). Both are answered by fetching, merging and pushing again.
_RACE_MARKERS = ("fast-forward", "fetch first", "failed to update ref", "failed to lock",
                 "cannot lock ref", "stale info")


def _raced(message: str) -> bool:
    lowered = message.lower()
    return any(marker in lowered for marker in _RACE_MARKERS)


def ensure_bare(path: Path) -> None:
    """Create the embedded hub on first use (private, 0700), protected as a server should be."""
    if not (path / "HEAD").exists():
        try:
            path.mkdir(parents=True, exist_ok=True, mode=0o700)
            engine.create(path, bare=True)
        except (pygit2.GitError, OSError) as exc:
            raise RemoteError(f"cannot create the hub at {path}: {exc}",
                              "check MEMSYNC_HOME is writable") from exc
    protect_hub(path)


# A push through git (receive-pack) may never rewind or delete a memory's branch. memsync itself
# never needs either: it never force-pushes and never deletes a branch.
HUB_PROTECTION = ("receive.denyNonFastForwards", "receive.denyDeletes")


def protect_hub(path: Path) -> list[str]:
    """Set HUB_PROTECTION on a bare hub where unset; returns the keys set. A value its owner
    set (even `false`) is kept, and nothing else in the config changes."""
    config_file = path / "config"
    try:
        text = config_file.read_text(encoding="utf-8", errors="replace").lower()
    except OSError:
        return []
    if all(key.split(".")[1].lower() in text for key in HUB_PROTECTION):
        return []  # the cheap check every command makes; the exact one below only when needed
    added: list[str] = []
    try:
        config = pygit2.Config(str(config_file))
        for key in HUB_PROTECTION:
            if key not in config:
                config[key] = True
                added.append(key)
    except (pygit2.GitError, OSError):  # a read-only hub: memsync's own pushes need neither key
        return added
    return added
