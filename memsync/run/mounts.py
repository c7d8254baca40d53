"""A run's memories made ready: `--memory NAME[:PATH][:ro]` parsed, each memory cloned (or created)
or pulled, owned by the run, read-only ones made non-writable. Returns open memories; nothing here
starts the command."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from memsync.core import config as cfgmod
from memsync.core import memory
from memsync.core.attribution import Attribution, acting, operator
from memsync.core.memory import Memory, open_memory
from memsync.core.snapshot import take
from memsync.errors import (
    MemsyncError,
    RepoError,
    UsageError,
)
from memsync.git.scan import scan
from memsync.sync.exchange import converge
from memsync.util.names import check_name
from memsync.util.records import recordclass

if TYPE_CHECKING:  # and imported where used: a plain run has no read-only memory, --as-user or conflict
    from memsync.git.hubtree import Oversize
    from memsync.git.remote import Hub



Say = Callable[[str], None]


@recordclass(frozen=True)
class Mount:
    name: str
    path: Path
    read_only: bool = False


def parse_mount(spec: str, cwd: Path) -> Mount:
    """NAME[:PATH][:ro]"""
    parts = spec.split(":")
    read_only = False
    if len(parts) > 1 and parts[-1] in ("ro", "rw"):
        read_only = parts.pop() == "ro"
    name = parts[0]
    try:
        check_name(name)
    except MemsyncError as exc:
        raise UsageError(f"--memory {spec!r}: {exc.message}",
                         f"{exc.hint}; write NAME[:PATH][:ro]" if exc.hint else "write NAME[:PATH][:ro]") from exc
    raw_path = ":".join(parts[1:])
    path = Path(raw_path).expanduser() if raw_path else Path(name)
    return Mount(name, (cwd / path).resolve() if not path.is_absolute() else path, read_only)


def prepare(mounts: list[Mount], cwd: Path, remote: str | None, offline: bool, say: Say,
            run_id: str | None = None, claim: bool = False, create: bool = False) -> list[Memory]:
    """Clone or pull every memory before the command runs; stop on the first failure.

    A memory the hub does not have is refused (MemoryNotFound, naming those it has) unless
    `create`: then a writable one is started empty, and the run's push publishes it. Refusing is
    the default everywhere (`run`, `mcp`, the memory tool): a misspelt name or the wrong hub must
    not look like an empty memory to an agent ("no notes yet", seed 004).

    `claim`: the run `run_id` takes ownership of each memory first (a second run in the same
    directory waits up to the lock timeout, then exit 6). Without it, a memory owned by another
    live run is refused; one owned by the run `run_id` itself (a tool server inside it) is joined."""
    claimed: list[Memory] = []
    try:
        return _prepare(mounts, cwd, remote, offline, say, run_id, claim, claimed, create)
    except BaseException:
        for mem in claimed:
            memory.release(mem, run_id or "")
        raise


def _prepare(mounts: list[Mount], cwd: Path, remote: str | None, offline: bool, say: Say,
             run_id: str | None, claim: bool, claimed: list[Memory], create: bool) -> list[Memory]:

    if not mounts:
        root = cfgmod.find_root(cwd)
        if root is None:
            from memsync.errors import NotAMemory

            raise NotAMemory(str(cwd))
        mounts = [Mount(cfgmod.load(root).name, root)]
    seen: set[str] = set()
    for m in mounts:
        if m.name in seen or str(m.path) in seen:
            raise UsageError(f"memory {m.name!r} or path {m.path} is mounted twice")
        seen.update((m.name, str(m.path)))
    memories: list[Memory] = []
    for m in mounts:
        present = cfgmod.find_root(m.path) == m.path
        if present and cfgmod.load(m.path).name != m.name:
            raise UsageError(f"{m.path} holds the memory {cfgmod.load(m.path).name!r}, not {m.name!r}",
                             "give another PATH in --memory NAME:PATH")
        if offline and not present:
            raise UsageError(f"--offline: memory {m.name!r} has no local copy at {m.path}",
                             "run once without --offline to clone it")
        held: list[Oversize] = []
        cloned: Hub | None = None  # the hub a clone bound: the memory is opened with it (bound once)
        if not offline and not present:
            held, cloned = _clone_or_create(m, remote, create, say)
        # a run may be a memory's first push: it binds the memory to its hub as a push does (hubbind.py)
        mem = open_memory(m.path, remote, first_push=not offline and not m.read_only,
                          cloned_from=cloned)
        if not m.read_only and memory.live_run(mem) is None:  # a live run vets its own
            from memsync.core.unverified import vet

            with mem.locked():  # a dead run's leftovers are that run's: vetted before this run claims it
                from memsync.sync.proposing import recover

                recover(mem, offline)  # a killed proposal run's directory: its leftovers proposed, HEAD back
                mem.git.check_state(mem.branch)
                vet(mem, by="run")  # and unpushed commits memsync did not make are checked (refused if bad)
        joined = _own(mem, run_id, claim, claimed)
        if m.read_only:
            _set_writable(mem, True)
        if not offline:
            held += _pull(mem, m.read_only, run_id if joined else None, fresh=cloned is not None)
        for h in held:
            say(f"{m.name}/{h.path} not checked out: {h.size} bytes, larger than max_file_size")
        memories.append(mem)
    if offline:
        say("offline: running on the local copies; nothing was pulled")
    return memories


def _clone_or_create(m: Mount, remote: str | None, create: bool, say: Say) -> tuple[list[Oversize], Hub | None]:
    """What a clone held back and the hub it bound; a new memory (`create`) has none bound yet."""
    from memsync.errors import MemoryNotFound
    from memsync.sync import storage

    try:
        result, hub = storage.clone_bound(m.name, m.path, remote=remote)
        return result.exchange.held_back, hub
    except MemoryNotFound as exc:
        if not create or m.read_only:
            start = "" if m.read_only else (f"; to start a new memory {m.name!r} there, ask for it: `--create` "
                                             "(create=True in Python)")
            exc.hint = f"{exc.hint}{start}"
            raise
    storage.init(m.path, name=m.name, remote=remote)  # bound to its hub when it is opened (first_push)
    say(f"{m.name}: a new memory (the hub had none of that name); the run's push publishes it")
    return [], None


def _own(mem: Memory, run_id: str | None, claim: bool, claimed: list[Memory]) -> bool:
    """Claim the memory for the run (or check that no other run owns it); True if the run
    `run_id` already owned it (this process joins it, e.g. a tool server inside the run)."""
    if claim and run_id is not None:
        if memory.claim(mem, run_id):
            claimed.append(mem)
            return False
        return True
    memory.refuse_during_run(mem, "pull", as_run=run_id)
    return run_id is not None and memory.run_in_progress(mem) == run_id


def _pull(mem: Memory, read_only: bool, joined_run: str | None = None, fresh: bool = False) -> list[Oversize]:
    """The memory brought up to its hub's version before the run, local changes saved first.
    `fresh`: this process has just cloned it (the clone was the pull, and a work tree written by
    the clone has no local change to save): neither is done again."""
    from memsync.sync.hubs import ensure_hub

    # Joining the run that owns the memory: its uncommitted files are that run's work.
    who = acting(joined_run, "Save the run's changes") if joined_run else operator("Save local changes before the run")

    def resnap() -> None:
        if read_only:
            changed = ", ".join(c.path for c in scan(mem.git).changes[:5])
            raise RepoError(f"read-only memory {mem.name!r} has local changes that block its update: {changed}",
                            f"move them out of {mem.root} (a read-only memory is never committed), then run again")
        take(mem, who)

    with mem.locked():
        mem.git.check_state(mem.branch)
        mem.git.ensure_layout(mem.branch, None)
        ensure_hub(mem.hub, mem)
        if fresh:
            return []
        fetched = None
        if not read_only:  # prepare() has vetted what a dead run or the agent left
            fetched = _snapshot_beside_fetch(mem, who)
        return converge(mem, operator("Merge the remote memory before the run"), resnap, push=False,
                        fetched=fetched).held_back


def _snapshot_beside_fetch(mem: Memory, who: Attribution) -> tuple[str | None] | None:
    """The local changes saved before the run, the work tree's walk for it begun first and run
    in a thread while the hub is asked for its version (git/earlyscan.py: under the memory's
    lock, which the caller holds, and never used after it): the fetch's round trips and the
    walk's lstat() of every file overlap. (the hub's tip,) as fetched, for converge to merge;
    None when converge is left to fetch: the hub unreachable (converge retries), a joined run's
    snapshot (a run's own scan reads the index before it walks: it would set the walk aside), or
    MEMSYNC_NO_EARLY_WALK=1 (the walk and the fetch one after the other, as before)."""
    from memsync.core.lockfirst import enabled
    from memsync.errors import RemoteUnreachable
    from memsync.git import earlyscan
    from memsync.git.workdiff import scan_flags
    from memsync.sync.exchange import fetch

    if not enabled() or who.actor == "run":
        take(mem, who)
        return None
    earlyscan.start(mem.root, int(scan_flags()))
    try:
        try:
            fetched: tuple[str | None] | None = (fetch(mem),)
        except RemoteUnreachable:
            fetched = None
        take(mem, who)
    finally:
        earlyscan.forget()  # taken by the snapshot's scan, or dropped: never used past this lock
    return fetched


def _set_writable(mem: Memory, writable: bool) -> None:
    """Read-only memories: files are made non-writable for the run where the OS allows."""
    from memsync.core import readonly

    for rel in mem.git.tracked_paths():
        path = mem.root / rel
        try:
            st = path.lstat()
            mode = st.st_mode | 0o200 if writable else st.st_mode & ~0o222
            if mode != st.st_mode:
                readonly.chmod_nofollow(path, mode & 0o7777)
        except OSError:
            continue


__all__ = ["Mount", "parse_mount", "prepare"]
