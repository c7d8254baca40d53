"""A memory's branch fetched over git's protocol v2 from a git:// or smart HTTP(S) hub: the
`ls-refs` listing of the branch alone and, when the hub's tip is new here, a `fetch` command on
the same session (one git:// connection; over HTTP two POSTs on one kept-alive connection).
libgit2 speaks protocol v0 only: its fetch receives the hub's whole ref advertisement first,
~76 bytes per memory of a branch hub (docs/PERFORMANCE.md, "A pull over protocol v2").

The fetch wants the listed tip, offers a bounded number of the memory's own commits as haves,
says `done` at once (no negotiation rounds) and asks for no thin pack. A clone's first fetch
(`depth=1` into a repository with no commit yet) asks for the tip alone (`deepen 1`), as git's
`clone --depth 1` does: the answer's `shallow-info` may name the tip as where the history stops,
and nothing else; `.git/shallow` then says so before the tracking ref moves. The pack arrives in
side-band 1 (progress in 2, an error in 3); each piece is read by packcheck's StreamCheck, then
handed to libgit2's indexer (native.PackIndexer, in a thread of its own: IndexBeside), which
resolves no delta before its commit, after the check has read the whole pack; it hashes every
object, checks that every object a commit, tree or tag of the pack names is in the pack or the
repository, and writes the pack and its index. The tracking ref moves only once the wanted
commit is there; a refused pack leaves nothing behind (its temporary file is removed; a pack written whose
wanted commit is missing is deleted). Everything the server sends is untrusted and bounded as
libgit2's fetch is: netlimits' deadline and minimum rate, MEMSYNC_MAX_ADVERTISEMENT for what is
not the pack, git's largest pkt-line (docs/SECURITY.md, "The v2 ref listing ...": the v2 fetch).

A server without v2 or without its `fetch` command, a hub in another object format, a libgit2
whose indexer memsync cannot reach, or a refusal before the fetch command is answered: None,
and the caller fetches through libgit2 as before.
"""

from __future__ import annotations

import itertools
import math
import queue
import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pygit2
from pygit2.enums import SortMode

from memsync.errors import DiskFull, MemsyncError, RemoteError, RemoteUnreachable
from memsync.git import lsrefs, native, netlimits
from memsync.git.hub import HubUrl
from memsync.git.packcheck import StreamCheck
from memsync.git.pktline import Reader, pkt
from memsync.git.repo import GitRepo
from memsync.util import envcheck
from memsync.util.records import recordclass
from memsync.util.threads import helper_body, join_all

DOING = "cannot fetch from"
HAVES = 64  # the memory's commits offered, newest first: its tips are what the hub knows
_FLUSH, _DELIM = b"0000", b"0001"
_PACK, _PROGRESS, _ERROR = 1, 2, 3
_HEX = re.compile(r"[0-9a-f]{40}")
ProgressFn = Callable[[str, int, int, int], None]  # as transport.ProgressFn
QUEUED = 64  # pieces (of at most 64 KiB) queued for the indexer's thread before the reader waits
_REFUSED_HINT = "the server is broken or hostile; nothing was changed (MEMSYNC_V2_FETCH=0 fetches through libgit2)"


@recordclass(frozen=True)
class Fetched:
    tip: str | None  # the hub's tip of the branch (None: the hub has no such branch)


class _NoV2(Exception):
    """The server will not fetch over v2 here: libgit2's turn (nothing was changed)."""


def fetch(git: GitRepo, hub: HubUrl, want: str, into: str,
          progress: ProgressFn | None = None, depth: int = 0) -> Fetched | None:
    """The hub's `want` fetched into the tracking ref `into`; None: fetch through libgit2.
    `depth`: 0 all of its history; 1 the tip alone, for a repository with no commit yet."""
    if hub.kind not in ("git", "http") or hub.port is None or not native.PackIndexer.available():
        return None
    if depth and (depth != 1 or not _fresh(git)):
        return None
    with netlimits.watch(hub.port, hub.display, DOING, expects_pack=True) as watch:
        sent, written, roots = False, list[Path](), list[str]()
        try:
            with lsrefs.session(hub, watch.limits, DOING) as talk:
                if talk is None or "fetch" not in talk.capabilities \
                        or talk.capabilities.get("object-format", "sha1") not in ("", "sha1") \
                        or (depth and "shallow" not in talk.capabilities["fetch"].split()):
                    return None
                listed = lsrefs.ls_refs(talk, [want])
                if listed is None:
                    return None
                tip = listed.get(want)
                if tip is None or git.ref_oid(into) == tip:
                    return Fetched(tip)
                if not git.has_object(tip):
                    sent = True
                    reader = talk.command(request(tip, haves(git._repo), shallow(git._repo), depth))
                    if reader is None:
                        raise _NoV2
                    written, roots = _receive(git, hub, reader, watch, progress, bool(depth))
        except _NoV2:
            return None
        except (OSError, RemoteError) as exc:
            if not sent:
                lsrefs.unanswered(exc, hub, watch, DOING)
                return None
            raise _failed(exc, hub, watch) from exc
    _settle(git, hub, tip, into, written, roots if depth else [], bool(depth))
    return Fetched(tip)


def _fresh(git: GitRepo) -> bool:
    """A repository with no commit yet and no history cut short: a clone's first fetch."""
    return git.head_oid() is None and not any(True for _ in git._repo.references.iterator()) \
        and not shallow(git._repo)


def request(tip: str, have: list[str], shallow: list[str], depth: int = 0) -> bytes:
    """The fetch command: no thin pack; no deepening (a shallow memory stays as shallow as it is:
    the server is told where its history stops, as libgit2 tells it), except a clone's `deepen`."""
    lines = [pkt(b"ofs-delta\n"), pkt(f"want {tip}\n".encode())]
    lines += [pkt(f"shallow {oid}\n".encode()) for oid in shallow]
    lines += [pkt(f"have {oid}\n".encode()) for oid in have]
    if depth:
        lines.append(pkt(f"deepen {depth}\n".encode()))
    return b"".join([pkt(b"command=fetch\n"), _DELIM, *lines, pkt(b"done\n"), _FLUSH])


def haves(repo: pygit2.Repository) -> list[str]:
    """Up to HAVES of the memory's commits, newest first, from every ref it holds."""
    walker = repo.walk(None, SortMode.TIME)
    for ref in repo.references.iterator():
        target = ref.target
        if isinstance(target, pygit2.Oid):
            try:
                walker.push(target)
            except (pygit2.GitError, ValueError, KeyError):
                continue  # a tag of a tree, a dangling ref: not a commit to offer
    try:
        return [str(commit.id) for commit in itertools.islice(walker, HAVES)]
    except (pygit2.GitError, KeyError):
        return []


def shallow(repo: pygit2.Repository) -> list[str]:
    """The commits at which a shallow memory's history stops (.git/shallow)."""
    try:
        text = (Path(repo.path) / "shallow").read_text(encoding="ascii", errors="replace")
    except OSError:
        return []
    return [line for line in text.split() if _HEX.fullmatch(line)]


def _receive(git: GitRepo, hub: HubUrl, reader: Reader, watch: netlimits.Watch,
             progress: ProgressFn | None, deepened: bool) -> tuple[list[Path], list[str]]:
    """Read the answer to the fetch command into a pack written through libgit2's indexer: (the
    files written that were not there before, the commits its shallow-info says the history
    stops at). `deepened`: a clone's tip alone, whose pack names parents it leaves out: the
    indexer does not check what the pack names, _settle does (_missing)."""
    reader.cap = math.inf  # the pack has no cap of its own; everything else is counted here
    other, roots = _to_pack(reader, hub, watch.limits)
    watch.advertised()  # the pack begins: the advertisement's cap no longer applies on the socket
    indexer: native.PackIndexer | None = None
    try:
        indexer = native.PackIndexer(git._repo, verify=not deepened)
        with IndexBeside(indexer) as beside:
            _stream(reader, hub, watch, other, StreamCheck(git.object_bound, hub.display), beside, progress)
            beside.finish()  # every piece checked and indexed: only now may deltas be resolved
        watch.busy()
        with watch.working():
            return _commit(git, indexer), roots
    except native.IndexerError as exc:
        raise _refused(exc, hub, Path(git._repo.path)) from exc
    finally:
        if indexer is not None:
            indexer.close()


def _stream(reader: Reader, hub: HubUrl, watch: netlimits.Watch, other: int, check: StreamCheck,
            indexer: IndexBeside, progress: ProgressFn | None) -> None:
    """The packfile section: the pack (side-band 1) read by the check, then handed to the
    indexer, piece by piece (a piece the check refuses never reaches it); progress (2) counted;
    an error (3) or ERR line raised; to its closing flush."""
    while (payload := reader.payload()) is not None:
        watch.check()
        band, data = payload[0], payload[1:]
        if band == _PACK:
            check.feed(data)
            indexer.append(data)
            if progress is not None:
                stats = indexer.stats
                progress("receiving", stats.received_objects, stats.total_objects, stats.received_bytes)
            continue
        other += len(payload) + 4
        _over_cap(other, hub, watch.limits)
        if band == _ERROR or payload.startswith(b"ERR "):
            raise _server_error(hub, reader.shown(payload[1:] if band == _ERROR else payload[4:]))
        if band != _PROGRESS:
            raise RemoteError(f"{DOING} {hub.display}: the hub's pack stream is malformed (band {band})",
                              _REFUSED_HINT)
    if not reader.ended:
        raise RemoteError(f"{DOING} {hub.display}: the hub's pack stream is malformed (a delim packet)",
                          _REFUSED_HINT)


class IndexBeside:
    """libgit2's indexer taking a fetched pack's pieces in a thread of its own, beside the thread
    that reads the stream and checks each piece first (packcheck.StreamCheck): `append` queues a
    checked piece (waiting while QUEUED are queued) and raises a failure the indexer met;
    `finish` waits until the indexer has taken every piece and raises its failure. The indexer
    is given only pieces the check has read, and resolves deltas only at its commit, which the
    caller makes after `finish`: no delta of a refused pack is ever resolved, and no byte after a
    refused piece is ever indexed. The indexer is freed only once its thread has ended (`_stop`
    waits for it through Ctrl-C).

    Why this way round: the indexer works with the GIL released (it is given no Python callback:
    native.PackIndexer), so it takes the second core while the check, which needs the GIL between
    zlib's calls, runs in the reading thread: a 10,000-file clone 0.88-0.90x the wall time of one
    thread doing both. The check in the thread and the indexer in the reading thread (the round
    before) was as fast, but let the indexer take pieces past a refused one.
    MEMSYNC_PACK_INDEX_THREAD=0: the reading thread appends each piece itself."""

    def __init__(self, indexer: native.PackIndexer) -> None:
        self.indexer = indexer
        self._failure: BaseException | None = None
        self._abandoned = False  # the caller stopped: what is still queued is dropped, not indexed
        self._queue: queue.Queue[bytes | None] | None = None
        self._thread: threading.Thread | None = None
        if envcheck.switch("MEMSYNC_PACK_INDEX_THREAD"):
            self._queue = queue.Queue(maxsize=QUEUED)
            self._thread = threading.Thread(target=helper_body(self._run), name="memsync-indexer", daemon=True)
            self._thread.start()

    def __enter__(self) -> IndexBeside:
        return self

    def __exit__(self, kind: type[BaseException] | None, *exc: object) -> None:
        self._stop(abandon=kind is not None)

    @property
    def stats(self) -> Any:
        """libgit2's counts so far (read while the thread may be adding to them: a count behind)."""
        return self.indexer.stats

    def append(self, data: bytes) -> None:
        if self._queue is None:
            self.indexer.append(data)
            return
        self._raise_found()
        self._queue.put(data)

    def finish(self) -> None:
        """Every piece appended has been taken by the indexer, and none failed."""
        self._stop(abandon=False)
        self._raise_found()

    def _run(self) -> None:
        assert self._queue is not None
        while True:
            try:
                data = self._queue.get(timeout=0.1)
            except queue.Empty:
                if self._abandoned:
                    return
                continue
            if data is None:
                return
            if self._failure is None and not self._abandoned:
                try:
                    self.indexer.append(data)
                except BaseException as exc:  # raised in the reading thread (append, finish)
                    self._failure = exc

    def _stop(self, abandon: bool) -> None:
        """The thread ended (the indexer is freed after this: never while it appends), even
        through Ctrl-C: `abandon`, or a stop interrupted, drops what is queued."""
        thread, self._thread = self._thread, None
        if thread is None or self._queue is None:
            return
        try:
            if abandon:
                self._abandoned = True
            else:
                self._queue.put(None)
        except BaseException:
            self._abandoned = True
            raise
        finally:
            join_all([thread])

    def _raise_found(self) -> None:
        if self._failure is not None:
            raise self._failure


def _refused(exc: native.IndexerError, hub: HubUrl, git_dir: Path) -> MemsyncError:
    """The indexer's refusal: this machine's disk full (as transport.translate says it), else the pack's fault."""
    text = netlimits.server_text(str(exc))
    if any(m in text.lower() for m in ("no space left", "disk quota", "file too large")):
        from memsync.git.diskfull import full_place

        return DiskFull(full_place(text, [git_dir]), f"{DOING} {hub.display}: {text}")
    return RemoteError(f"{DOING} {hub.display}: refused the hub's pack ({text})", _REFUSED_HINT)


def _to_pack(reader: Reader, hub: HubUrl, limits: netlimits.Limits) -> tuple[int, list[str]]:
    """Read the answer's sections up to its `packfile` line: (the bytes read so far, the commits
    its shallow-info names as where the history stops)."""
    other, roots = 0, list[str]()
    while True:
        line = reader.line()
        if line is None:
            if reader.ended:
                raise RemoteError(f"{DOING} {hub.display}: the hub answered the fetch without a pack",
                                  _REFUSED_HINT)
            continue
        other += len(line) + 5
        _over_cap(other, hub, limits)
        if line.startswith(b"ERR "):
            raise _server_error(hub, reader.shown(line[4:]))
        if line.startswith((b"shallow ", b"unshallow ")):
            word, _, oid = line.decode("ascii", "replace").partition(" ")
            if word == "unshallow" or not _HEX.fullmatch(oid):
                raise RemoteError(f"{DOING} {hub.display}: the hub's shallow-info is malformed", _REFUSED_HINT)
            roots.append(oid)
        if line == b"packfile":
            return other, roots


def _commit(git: GitRepo, indexer: native.PackIndexer) -> list[Path]:
    """The pack's deltas resolved and its index written (the repository then reads it)."""
    pack_dir = Path(git._repo.path) / "objects" / "pack"
    before = set(_names(pack_dir))
    name = indexer.commit()
    written = [pack_dir / f"pack-{name}{ext}" for ext in (".pack", ".idx", ".rev")]
    return [p for p in written if p.name not in before]


def _settle(git: GitRepo, hub: HubUrl, tip: str, into: str, written: list[Path], roots: list[str],
            deepened: bool = False) -> None:
    """Move the tracking ref to `tip` once the commit is here (a clone's tip alone: once
    `.git/shallow` says its history stops there, written before the commit is first read, as
    libgit2 reads a commit's parents through it); else remove what was just written."""
    said = None
    if any(root != tip for root in roots):  # one want, one version deep: the tip alone
        said = "the hub's shallow-info names a commit other than the one it listed"
    elif roots:
        said = _write_shallow(git, tip)
        written.append(Path(git._repo.path) / "shallow")
        git.reopen()
    if said is None:
        try:
            commit = git._repo[tip]
        except (KeyError, ValueError, pygit2.GitError):
            commit = None
        if not isinstance(commit, pygit2.Commit):
            said = f"the hub's pack does not hold the commit it listed ({tip[:8]})"
        elif deepened and not roots and commit.parent_ids:
            said = "the hub's pack of the tip alone does not say where its history stops"
    if said is None and deepened and (lacking := _missing(git._repo, tip)) is not None:
        said = f"the hub's pack lacks objects of the version it listed (at {lacking!r})"
    if said is not None:
        for path in written:
            path.unlink(missing_ok=True)
        raise RemoteError(f"{DOING} {hub.display}: {said}; nothing was changed", _REFUSED_HINT)
    git.set_ref(into, tip, "fetch")


def _missing(repo: pygit2.Repository, tip: str) -> str | None:
    """The first path of `tip`'s tree whose object is not here, or None: the check the indexer's
    `verify` makes, for a pack of the tip alone. A tree past hubtree's caps is not walked to its
    end: hubtree.check_tree refuses it before anything of it is written."""
    from memsync.git.hubtree import MAX_TREE_DEPTH, MAX_TREE_ENTRIES

    exists = repo.odb.exists
    stack: list[tuple[pygit2.Oid, str, int]] = [(repo[tip].peel(pygit2.Commit).tree_id, "", 1)]
    entries = 0
    while stack:
        oid, prefix, depth = stack.pop()
        tree = repo.get(oid) if exists(oid) else None
        if not isinstance(tree, pygit2.Tree):
            return prefix or "/"
        entries += len(tree)
        if depth > MAX_TREE_DEPTH or entries > MAX_TREE_ENTRIES:
            return None
        for entry in tree:
            kind = entry.type_str
            if kind == "tree":
                stack.append((entry.id, f"{prefix}{entry.name}/", depth + 1))
            elif kind == "blob" and not exists(entry.id):
                return prefix + (entry.name or "")
    return None


def _write_shallow(git: GitRepo, root: str) -> str | None:
    """`.git/shallow` naming `root` (written whole, then renamed into place); None, or what failed."""
    from memsync.util import fs

    try:
        fs.atomic_write(Path(git._repo.path) / "shallow", root.encode("ascii") + b"\n")
    except OSError as exc:
        return f"cannot write .git/shallow ({exc.strerror or exc})"
    return None


def _names(folder: Path) -> list[str]:
    try:
        return [p.name for p in folder.iterdir()]
    except OSError:
        return []


def _over_cap(count: int, hub: HubUrl, limits: netlimits.Limits) -> None:
    if count > limits.max_advertisement:
        raise netlimits.AdvertisementTooLarge(
            f"{DOING} {hub.display}: the server sent more than {limits.max_advertisement:,} bytes besides the "
            "pack (MEMSYNC_MAX_ADVERTISEMENT)",
            "the server is broken or hostile; raise MEMSYNC_MAX_ADVERTISEMENT only for a trusted one")


def _server_error(hub: HubUrl, text: str) -> RemoteError:
    return RemoteError(f"{DOING} {hub.display}: the server said: {text}", "check the hub and the memory's name")


def _failed(exc: OSError | RemoteError, hub: HubUrl, watch: netlimits.Watch) -> RemoteError:
    """A failure once the fetch command was sent: a limit, memsync's refusal, or the connection lost."""
    if watch.tripped is not None:
        return watch.tripped
    if isinstance(exc, RemoteError):
        return exc
    if isinstance(exc, TimeoutError):
        return RemoteUnreachable(f"{DOING} {hub.display}: the server did not answer in time ({exc})",
                                 "check the server; MEMSYNC_IO_TIMEOUT (seconds) sets the limit")
    return RemoteUnreachable(f"{DOING} {hub.display}: the connection ended before the pack's end ({exc}); "
                             "nothing was changed", "check the network and the server, then try again")
