"""init / push / pull / clone / status: the storage verbs as functions that return data.

This is memsync's Python API (see README, "Python API"); the CLI only renders what these return.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from memsync.core import config as cfgmod
from memsync.core.attribution import Attribution, operator
from memsync.core.config import StorageConfig
from memsync.core.hubbind import bind
from memsync.core.memory import Memory, RunMark, live_run, open_memory, refuse_during_run
from memsync.errors import ConfigError, DiskFull, InvalidName, RemoteError, RepoError, UsageError
from memsync.git import hub as hubmod
from memsync.git import transport
from memsync.git.hub import HubUrl
from memsync.git.remote import KINDS, Hub
from memsync.git.repo import GitRepo, WorkChange
from memsync.git.scan import scan
from memsync.git.transport import ProgressFn
from memsync.sync.exchange import Exchange, converge, fetch
from memsync.sync.hubs import LastRun, ensure_hub, last_run, ready_to_exchange
from memsync.sync.options import PullOptions, PushOptions, StatusOptions
from memsync.sync.redaction_log import RedactionNote
from memsync.sync.redaction_log import notes as redaction_notes
from memsync.util.fs import remove_dead_stagings
from memsync.util.names import check_name, check_type, conflict_copy_source, is_conflict_file, is_gathered
from memsync.util.records import field, recordclass
from memsync.util.timefmt import rfc3339

if TYPE_CHECKING:  # push, pull and clone import it when they run: status needs none of it
    from memsync.core.snapshot import Snapshot
    from memsync.core.unverified import Unverified


@recordclass
class Version:
    """A version of a memory as vm0 shows it: Version / Files / Size."""

    oid: str
    files: int
    size: int
    time: str  # RFC 3339, UTC: 2026-11-23T14:00:00Z

    @property
    def short(self) -> str:
        return self.oid[:8]

    @property
    def updated(self) -> str:
        return self.time


@recordclass
class InitResult:
    root: Path
    name: str
    type: str
    created: bool
    hub: str
    notes: list[str] = field(default_factory=list)  # what init did to an existing git repository
    adopted: bool = False  # an existing storage.yaml (e.g. vm0's) got its git repository now


@recordclass
class PushResult:
    version: Version | None
    committed: bool
    snapshot: Snapshot
    exchange: Exchange
    adopted: InitResult | None = None  # push in a directory that had only a (vm0) storage.yaml
    unverified: Unverified | None = None  # unpushed commits memsync did not make (unverified.py)
    mirror_of: str | None = None  # pushed with --remote to a hub not the memory's own: that own hub


@recordclass
class PullResult:
    version: Version | None
    snapshot: Snapshot
    exchange: Exchange
    remote_missing: bool = False


@recordclass
class ToFold:
    """A conflict file in the tree: which paths its versions belong to, how many, what to do."""

    file: str
    paths: list[str]
    versions: int
    how: str


def _to_fold(root: Path, files: list[str]) -> list[ToFold]:
    found = []
    for name in files:
        if is_gathered(name):
            from memsync.checks import gathered  # not for a status with none (docs/PERFORMANCE.md)

            try:
                entries = gathered.parse((root / name).read_bytes()).entries.values()
            except OSError:
                continue  # not checked out (held back) or unreadable: still listed in conflicts
            paths = sorted({e.path for e in entries if e.path})
            versions = len(entries)
        else:
            paths, versions = [conflict_copy_source(name)], 1
        into = " and ".join(paths) or "the file it is beside"
        found.append(ToFold(name, paths, versions, f"fold what is worth keeping into {into}, then delete {name}"))
    return found


@recordclass(frozen=True)
class RunningNow:
    run_id: str
    pid: int
    started: str | None  # RFC 3339, UTC (None: not known on this machine)


def _running(mark: RunMark | None) -> RunningNow | None:
    """The run mark as `status` shows it: its start time (clock ticks since boot, kept to tell a
    reused pid apart) as RFC 3339."""
    if mark is None:
        return None
    from memsync.util.holders import started_at

    when = started_at(mark.started)
    return RunningNow(mark.run_id, mark.pid, None if when is None else rfc3339(when))


@recordclass
class StatusReport:
    name: str
    type: str
    root: str
    remote: str
    branch: str
    remote_version: Version | None
    last_run: LastRun | None
    local_version: str | None
    ahead: int
    behind: int
    uncommitted: list[WorkChange] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)  # files holding versions to fold (gathered or copies)
    to_fold: list[ToFold] = field(default_factory=list)
    remote_error: str | None = None
    too_large: list[str] = field(default_factory=list)  # changed files over max_file_size: never committed
    ignored: list[str] = field(default_factory=list)  # new files hidden by ignore rules (.gitignore)
    # True when the remote could not be reached (remote_error) and remote_version / last_run are
    # as of the last successful fetch
    remote_cached: bool = False
    running: RunningNow | None = None  # the `memsync run` that owns this directory now, if any
    redactions: list[RedactionNote] = field(default_factory=list)  # refused / followed (redaction_log.py)
    proposals: list[str] = field(default_factory=list)  # open proposals, as last seen here (proposals.waiting)


def _version(git: GitRepo, oid: str | None) -> Version | None:
    if oid is None:
        return None
    files, size = git.tree_stats(oid)
    return Version(oid, files, size, rfc3339(git.commit_info(oid).time))


# -- init ----------------------------------------------------------------------------------------
def init(path: Path, name: str | None = None, kind: str | None = None,
         remote: str | None = None) -> InitResult:
    """Make `path` a memory. It writes nothing into the tree: the merge rules the contract promises
    (log.md line by line) are memsync's defaults (merge_policy.py), not a `.gitattributes` the
    agent could open and rewrite."""
    root = path.resolve()
    cfg_file = cfgmod.config_path(root)
    if cfg_file.is_dir():
        raise ConfigError(f"{cfg_file} is a directory, not a file", "remove it, then run `memsync init` again")
    created = not cfg_file.exists()
    hub = hubmod.from_flag(remote, hubmod.TEMPLATE_PROBE) if remote else None  # refused early: a credential
    if created:
        chosen = root.name if name is None else name
        try:
            check_name(chosen)
        except InvalidName as exc:
            raise InvalidName(exc.name, exc.problem, exc.suggestion, how="try --name {}") from None
        hub = hubmod.from_flag(remote, chosen) if remote else None
        cfg = StorageConfig(name=chosen, type=check_type(kind or "memory"),
                            remote=hub.url if hub else None)
        _write_config(root, cfgmod.render(cfg))
    else:
        cfg = cfgmod.load(root)
        if name is not None and name != cfg.name:
            raise UsageError(f"{root} is already the memory {cfg.name!r}",
                             f"edit {cfg_file} to rename it, or init another directory")
        if kind is not None and kind != cfg.type:
            raise UsageError(f"{root} is already a memory of type {cfg.type!r}")
        hub = hubmod.from_flag(remote, cfg.name) if remote else None
        if hub is not None and cfg.remote != hub.url:
            if cfg.remote:
                raise UsageError(f"{cfg_file} already names the remote {hubmod.safe_url(cfg.remote)}",
                                 "edit `remote:` in storage.yaml to change it")
            _append_line(cfg_file, f"remote: {hub.url}")
            cfg.remote = hub.url
    adopted = not created and not (root / ".git").exists()
    resolved = hubmod.resolve(None, cfg.remote, cfg.name)
    try:
        git = GitRepo.init(root, cfg.hub_branch)
        notes = git.ensure_layout(cfg.hub_branch, resolved.url)
    except PermissionError as exc:
        raise RepoError(f"cannot write in {root}: {exc.strerror}", "run it in a writable directory") from exc
    return InitResult(root, cfg.name, cfg.type, created, resolved.display, notes, adopted)


def _write_config(root: Path, text: str) -> None:
    try:
        cfgmod.atomic_write(cfgmod.config_path(root), text)
    except PermissionError as exc:
        raise RepoError(f"cannot write in {root}: {exc.strerror}", "run it in a writable directory") from exc
    except OSError as exc:
        raise RepoError(f"cannot write {cfgmod.config_path(root)}: {exc.strerror}") from exc


def _append_line(path: Path, line: str) -> None:
    text = path.read_text(encoding="utf-8")
    sep = "" if text.endswith("\n") or not text else "\n"
    cfgmod.atomic_write(path, text + sep + line + "\n")


# -- push / pull ----------------------------------------------------------------------------------
def push(path: Path, options: PushOptions | None = None, *, progress: ProgressFn | None = None) -> PushResult:
    """Commit local changes as the operator and deliver them to the hub (never forced).

    A directory with a storage.yaml but no git repository (vm0 users type `push` first) is
    adopted as `init` would adopt it."""
    o = options or PushOptions()
    force, message, remote = o.force, o.message, o.remote
    adopted = _adopt_config_only(path, remote)
    mem = open_memory(path, remote, first_push=True)  # a memory's first push binds it to its hub (hubbind.py)
    who = operator(message or "Update memory from the operator")
    from memsync.core.snapshot import take
    from memsync.core.unverified import vet

    with mem.locked():
        refuse_during_run(mem, "push")
        ready_to_exchange(mem)
        found = vet(mem)
        snap = take(mem, who, allow_empty=force or mem.git.head_oid() is None)
        try:
            with snap.folded():
                exchange = converge(mem, who, lambda: _resnap(mem, who), progress=progress)
        except RemoteError as exc:
            _kept_locally(mem, exc)
            raise
        own = None if mem.own_hub is None else mem.own_hub.display
        return PushResult(_version(mem.git, mem.git.head_oid()), snap.commit is not None, snap, exchange,
                          adopted, found, own)


def _kept_locally(mem: Memory, exc: RemoteError) -> None:
    """A push the hub did not take says what happened to the work: it is committed here."""
    head = mem.git.head_oid()
    if head is None or head == mem.git.ref_oid(mem.tracking_ref):
        return
    exc.message = f"{exc.message}; your changes are committed locally ({head[:8]}), not pushed"
    if exc.hint is None or "--offline" in exc.hint:
        exc.hint = "nothing is lost: run `memsync push` again when the hub is back"
    else:
        exc.hint = f"{exc.hint}; nothing is lost: `memsync push` again delivers it"


def _adopt_config_only(path: Path, remote: str | None) -> InitResult | None:
    root = cfgmod.find_root(path)
    if root is None or (root / ".git").exists():
        return None
    return init(root, remote=remote)


def _resnap(mem: Memory, who: Attribution) -> None:
    """After a merge met files changed on disk: a full scan, since a change tracker (serve) may
    not have seen the change (a memory map, a hard link)."""
    from memsync.core.snapshot import take

    take(mem, who, full_scan=True)


def pull(path: Path, *, remote: str | None = None, progress: ProgressFn | None = None) -> PullResult:
    """Commit local changes (as the operator), then merge the hub's version in. Never pushes."""
    mem = open_memory(path, remote)
    who = operator("Save local changes before pulling")
    from memsync.core.snapshot import take
    from memsync.core.unverified import vet

    with mem.locked():
        refuse_during_run(mem, "pull")
        ready_to_exchange(mem)
        vet(mem, refuse=False, by="pull")  # a dead run's leftovers are that run's, not the operator's
        snap = take(mem, who)
        exchange = converge(mem, operator("Merge the remote memory"), lambda: _resnap(mem, who),
                        push=False, progress=progress)
        return PullResult(_version(mem.git, mem.git.head_oid()), snap, exchange,
                          remote_missing=exchange.remote_head is None)


# -- clone ----------------------------------------------------------------------------------------
def clone(name: str, dest: Path | None = None, *, remote: str | None = None,
          progress: ProgressFn | None = None, full_history: bool = False) -> PullResult:
    """Create a working memory from the hub in `dest` (default ./NAME), atomically. From a network
    hub only the newest version is fetched unless `full_history`: older ones come when something
    reads them (shallow.py). A hub on this machine lends its object files, so all of it comes."""
    return clone_bound(name, dest, remote=remote, progress=progress, full_history=full_history)[0]


def clone_bound(name: str, dest: Path | None = None, *, remote: str | None = None,
                progress: ProgressFn | None = None, full_history: bool = False) -> tuple[PullResult, Hub]:
    """clone, and the hub it bound: a command that goes on with the memory (a run) opens it with
    that hub (open_memory's `bound`) instead of resolving and binding it again."""
    check_name(name)
    target = (dest or Path(name)).resolve()
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise UsageError(f"{target} already exists and is not empty",
                         "choose another DEST, or `memsync pull` inside it if it is this memory")
    url = hubmod.resolve(remote, None, name)
    hub = bind(url)  # once: a hub on this machine or across the network (git/remote.py)
    ensure_hub(hub)
    staging = target.parent / f".memsync-clone-{name}-{os.getpid()}"
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        remove_dead_stagings(target.parent, f".memsync-clone-{name}-")
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir()
    except OSError as exc:
        from memsync.git.diskfull import explain

        raise explain(exc, [target.parent]) or RepoError(f"cannot write in {target.parent}: {exc.strerror}") from exc
    try:
        result = None
        for kind in KINDS:  # a memory's branch first: a clone fetches it with no listing before (one connection)
            if kind != KINDS[0]:
                shutil.rmtree(staging)
                staging.mkdir()
            result = _clone_kind(staging, name, kind, url, hub, progress, full_history)
            if result is not None:
                break
        if result is None:
            from memsync.sync.listing import memory_names

            everything = {h.ref for h in transport.list_heads(GitRepo.open(staging), url)}  # for the names it suggests
            raise _not_found(name, url, memory_names(everything))
        if target.exists():
            target.rmdir()
        os.replace(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return result, hub


def _clone_kind(staging: Path, name: str, kind: str, url: HubUrl, hub: Hub, progress: ProgressFn | None,
                full_history: bool) -> PullResult | None:
    """The memory `name` of `kind` (memory or artifact) fetched and checked out in `staging`;
    None, nothing checked out, when the hub has no such branch (the fetch's own advertisement
    says so: no listing of the hub's refs before it)."""
    git = GitRepo.init(staging, f"{kind}/{name}")
    cfg = StorageConfig(name=name, type=kind, remote=url.recordable)  # the memory's hub from now on
    _write_config(staging, cfgmod.render(cfg))
    git.ensure_layout(cfg.hub_branch, url.url)  # HEAD is unborn: it moves to the memory's branch
    hub.lend_objects(git)
    mem = Memory(staging, cfg, git, hub)
    with mem.locked():
        depth = hub.clone_depth(full_history)
        exchange = converge(mem, operator("Clone"), lambda: None, push=False, progress=progress, depth=depth)
    if exchange.remote_head is None:
        return None
    from memsync.core.snapshot import Snapshot

    return PullResult(_version(git, git.head_oid()), Snapshot(), exchange)


def _not_found(name: str, hub: HubUrl, available: list[str]) -> RemoteError:
    from memsync.errors import MemoryNotFound

    return MemoryNotFound(name, hub.display, available)


def pull_or_clone(path: Path, options: PullOptions | None = None, *, progress: ProgressFn | None = None) -> PullResult:
    """`memsync pull [NAME]`: inside a memory, pull; outside one with NAME, clone into ./NAME."""
    o = options or PullOptions()
    name, remote = o.name, o.remote
    root = cfgmod.find_root(path)
    if root is None and name is not None:
        dest = path / name
        if cfgmod.find_root(dest) == dest.resolve():
            return pull(dest, remote=remote, progress=progress)
        return clone(name, dest, remote=remote, progress=progress)
    if root is not None and name is not None:
        current = cfgmod.load(root).name
        if current != name:
            raise UsageError(f"this directory is the memory {current!r}, not {name!r}",
                             f"run it outside, or `memsync clone {name}`")
    return pull(path, remote=remote, progress=progress)  # outside a memory without NAME: a clear error


# -- status ---------------------------------------------------------------------------------------
_LAST_RUN_FILE = "memsync-last-run.json"
_LAST_RUN_KEEP = 8


def _last_run_of(git: GitRepo, tip: str) -> LastRun | None:
    """last_run(git, tip), remembered in .git by tip: the history a commit reaches never changes,
    so neither does the answer, and the walk (the whole history, to order it by time) is done
    once per version instead of at every status."""
    import contextlib
    import json

    from memsync.util.fs import read_private, write_private

    target = git.git_dir / _LAST_RUN_FILE
    cache: dict[str, object] = {}
    try:
        loaded = json.loads(read_private(target, 64 * 1024))
        if isinstance(loaded, dict) and loaded.get("v") == 1 and isinstance(loaded.get("tips"), dict):
            cache = loaded["tips"]
    except (OSError, ValueError):
        pass
    if tip in cache:
        entry = cache[tip]
        if entry is None:
            return None
        if isinstance(entry, list) and len(entry) == 4 and all(isinstance(v, str) for v in entry[:3]) \
                and (entry[3] is None or type(entry[3]) is int):
            return LastRun(entry[0], entry[1], entry[2], entry[3])
    found = last_run(git, tip)
    if found is None and git.is_shallow:
        return None  # it may be in the versions a shallow clone left out: not an answer to keep
    cache.pop(tip, None)
    cache[tip] = None if found is None else [found.run_id, found.version, found.time, found.exit_code]
    keep = dict(list(cache.items())[-_LAST_RUN_KEEP:])
    with contextlib.suppress(OSError):  # only a cache: a read-only .git just walks again next time
        write_private(target, json.dumps({"v": 1, "tips": keep}).encode())
    return found


def status(path: Path, options: StatusOptions | None = None) -> StatusReport:
    mem = open_memory(path, (options or StatusOptions()).remote)
    with mem.locked():
        error = None
        try:
            ensure_hub(mem.hub, mem)
            fetch(mem)
        except (RemoteError, RepoError) as exc:
            if isinstance(exc, DiskFull):
                raise  # this machine's problem, not the hub's: not shown as "the remote's state is cached"
            error = exc.message
        git = mem.git
        remote_oid = git.ref_oid(mem.tracking_ref)
        head = git.head_oid()
        ahead = behind = 0
        if head and remote_oid:
            ahead, behind = git.ahead_behind(head, remote_oid)
        elif head:
            ahead = sum(1 for _ in git.walk(head))
        scanned = scan(git)
        changes = scanned.changes
        gone = {c.path for c in changes if c.kind == "deleted"}  # folded, not yet pushed
        conflicts = sorted({p for p in git.tracked_paths_containing(".conflict") if is_conflict_file(p)}
                           - gone | {c.path for c in changes if is_conflict_file(c.path) and c.kind != "deleted"})
        try:
            remote_version = _version(git, remote_oid)
        except RepoError as exc:  # a hub version past memsync's limits (hubtree.TreeTooLarge)
            remote_version, error = None, exc.message
        return StatusReport(
            name=mem.name, type=mem.config.type, root=str(mem.root), remote=mem.hub.display,
            branch=mem.branch, remote_version=remote_version,
            last_run=_last_run_of(git, remote_oid) if remote_oid else None, local_version=head,
            ahead=ahead, behind=behind, uncommitted=changes, conflicts=conflicts,
            to_fold=_to_fold(mem.root, conflicts), remote_error=error,
            too_large=_too_large(mem, changes), ignored=list(scanned.ignored),
            remote_cached=error is not None and remote_oid is not None, running=_running(live_run(mem)),
            redactions=redaction_notes(mem), proposals=_waiting(mem))


def _waiting(mem: Memory) -> list[str]:
    from memsync.sync.proposals import waiting

    return waiting(mem)


def _too_large(mem: Memory, changes: list[WorkChange]) -> list[str]:
    import stat

    found = []
    for change in changes:
        if change.kind == "deleted":
            continue
        try:
            st = (mem.root / change.path).lstat()
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode) and st.st_size > mem.config.max_file_size:
            found.append(change.path)
    return found
