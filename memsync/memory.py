"""A memory directory: its root, its storage.yaml, its repository and its hub."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from memsync import config as cfgmod
from memsync import hub as hubmod
from memsync import maintenance
from memsync.config import StorageConfig
from memsync.errors import ConfigError, NotAMemory, RunInProgress
from memsync.git import checkoutjournal
from memsync.git.repo import GitRepo, read_private, write_private
from memsync.hub import HubUrl
from memsync.locking import clear_stale_git_locks, held


@dataclass
class Memory:
    root: Path
    config: StorageConfig
    git: GitRepo
    hub: HubUrl
    # where what is known of the hub's branch is kept: "origin" for the memory's own hub, a name
    # of its own for a hub given with --remote, so a push to a mirror never stands in for it
    tracking: str = "origin"
    # a run's final commit could not be made (a full disk): its mark stays when the run ends, so
    # the next command commits what the run left as that run's (unverified.settle), never the operator's
    run_unrecorded: int | None = None  # the run's exit code

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def branch(self) -> str:
        return self.config.hub_branch

    @property
    def local_ref(self) -> str:
        return f"refs/heads/{self.branch}"

    @property
    def tracking_ref(self) -> str:
        return f"refs/remotes/{self.tracking}/{self.branch}"

    def hub_tips(self) -> list[str]:
        """What is known to be on a hub: the tip last fetched from this hub, then (given another
        with --remote) the memory's own hub's. Commits below them came from a hub, not from a
        `git commit` here (unverified.py)."""
        refs = [self.tracking_ref]
        if self.tracking != "origin":
            refs.append(f"refs/remotes/origin/{self.branch}")
        tips = [self.git.ref_oid(ref) for ref in refs]
        return list(dict.fromkeys(t for t in tips if t))

    @contextmanager
    def locked(self, timeout: float | None = None) -> Iterator[None]:
        """The memory's lock; stale git lock files left by a killed process are cleared.
        `timeout`: how long to wait for it (default MEMSYNC_LOCK_TIMEOUT), then LockBusy."""
        with held(self.git.git_dir / "memsync.lock", f"memory {self.name!r}", timeout) as tenure:
            clear_stale_git_locks(self.git.git_dir, tenure, f"memory {self.name!r}", timeout)
            if checkoutjournal.pending(self.git.git_dir):  # a checkout cut short: undone before anything looks
                from memsync.git.integrate import undo_interrupted_checkout

                undo_interrupted_checkout(self.git)
            yield
            maintenance.auto(self.git.git_dir)


def find(start: Path) -> Path:
    root = cfgmod.find_root(start)
    if root is None:
        if (start / cfgmod.CONFIG_DIR / cfgmod.CONFIG_FILE).is_dir():
            raise ConfigError(f"{start / '.vm0' / 'storage.yaml'} is a directory, not a file",
                              "remove it, then run `memsync init`")
        raise NotAMemory(str(start))
    return root


def open_memory(start: Path, remote: str | None = None) -> Memory:
    root = find(start)
    config = cfgmod.load(root)
    git = GitRepo.open(root)
    hub = hubmod.resolve(remote, config.remote)
    mem = Memory(root, config, git, hub, tracking_name(hub, config.remote))
    if (git.git_dir / "memsync-ro-guard.json").exists():  # a run killed while it held this memory read-only
        from memsync.readonly import recover

        recover(mem)
    return mem


def tracking_name(hub: HubUrl, configured: str | None) -> str:
    """"origin" when `hub` is the memory's own (configured, else the default; a hub on this
    machine however its path is spelled), else a name derived from its address."""
    key = _hub_key(hub)
    if key == _hub_key(hubmod.resolve(None, configured)):
        return "origin"
    return "hub-" + hashlib.sha1(key.encode("utf-8", "surrogateescape")).hexdigest()[:12]


def _hub_key(hub: HubUrl) -> str:
    local = hub.local_path
    return hub.url if local is None else str(local.expanduser().resolve())


RUN_MARKER = "memsync-run.json"


@dataclass(frozen=True)
class RunMark:
    """The `memsync run` that owns a memory directory while it runs (a file in .git, never
    committed). A mark whose process is gone is stale and ignored: a kill -9 never blocks."""

    run_id: str
    pid: int
    started: str | None = None  # the process's start time (Linux), so a reused pid is not taken for it


def _process_started(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()
    return fields[19] if len(fields) > 19 else None  # field 22: start time in clock ticks


def _alive(mark: RunMark) -> bool:
    import os

    try:
        os.kill(mark.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # alive, another user's
    return mark.started is None or _process_started(mark.pid) in (None, mark.started)


def live_run(mem: Memory) -> RunMark | None:
    """The live run that owns this memory, if any."""
    import json

    try:
        data = json.loads(read_private(mem.git.git_dir / RUN_MARKER, 4096).decode("utf-8"))
        mark = RunMark(str(data["run_id"]), int(data["pid"]), data.get("started"))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return mark if _alive(mark) else None


def run_in_progress(mem: Memory) -> str | None:
    """The id of a live `memsync run` using this memory, if any (a dead run's mark is stale)."""
    mark = live_run(mem)
    return mark.run_id if mark is not None else None


def refuse_during_run(mem: Memory, verb: str, as_run: str | None = None) -> None:
    """Operator verbs (push, pull, restore, revert) refuse while a run owns the memory: they would
    commit the run's half-written files as the operator's. `as_run`: the caller acts for that run
    (an agent's tool call inside it), which may go on."""
    mark = live_run(mem)
    if mark is not None and mark.run_id != as_run:
        raise RunInProgress(mem.name, mark.run_id, mark.pid,
                            f"wait for the run to end (it commits and pushes its own files), then `memsync {verb}` "
                            f"again; a run whose process is gone no longer counts")


def claim(mem: Memory, run_id: str) -> bool:
    """Mark the memory as owned by this process's run `run_id`, waiting up to the lock timeout
    while another live run owns it (then RunInProgress). False: the run already owns it (a tool
    server inside the run, on the same directory), so nothing was marked."""
    import json
    import os
    import time

    from memsync.locking import lock_timeout

    wait = lock_timeout()
    deadline = time.monotonic() + wait
    while True:
        with mem.locked():
            mark = live_run(mem)
            if mark is None:
                started = _process_started(os.getpid())
                text = json.dumps({"run_id": run_id, "pid": os.getpid(), "started": started})
                write_private(mem.git.git_dir / RUN_MARKER, text.encode())
                return True
            if mark.run_id == run_id:
                return False
        if time.monotonic() >= deadline:
            raise RunInProgress(mem.name, mark.run_id, mark.pid,
                                f"waited {wait:.0f}s; runs in one memory directory take turns: give each its own "
                                "directory (--memory NAME:PATH), or set MEMSYNC_LOCK_TIMEOUT to wait longer")
        time.sleep(0.2)


def release(mem: Memory, run_id: str) -> None:
    """Remove this process's mark for `run_id` (never another run's)."""
    import os

    mark_file = mem.git.git_dir / RUN_MARKER
    try:
        import json

        data = json.loads(read_private(mark_file, 4096).decode("utf-8"))
        ours = data.get("run_id") == run_id and int(data.get("pid", -1)) == os.getpid()
    except (OSError, ValueError, TypeError, AttributeError):
        return
    if ours:
        mark_file.unlink(missing_ok=True)


@contextmanager
def running(memories: list[Memory], run_id: str) -> Iterator[None]:
    """The run `run_id` owns these memories (claimed by `claim`, marked here if not yet) until the
    block ends, so that watch, push, pull, restore and revert leave the run its files."""
    for mem in memories:
        if live_run(mem) is None:
            claim(mem, run_id)
    try:
        yield
    finally:
        for mem in memories:
            if mem.run_unrecorded is None:
                release(mem, run_id)
            else:
                keep_for_recovery(mem, run_id, mem.run_unrecorded)


def keep_for_recovery(mem: Memory, run_id: str, exit_code: int) -> None:
    """Leave this process's mark for `run_id` behind with the run's exit code, so the next
    command folds the run's files into a commit of that run. On a disk too full even to
    rewrite it in place, the mark stays as it was (the exit code is then unknown to the recovery)."""
    import contextlib
    import json
    import os

    mark_file = mem.git.git_dir / RUN_MARKER
    with contextlib.suppress(OSError, ValueError, TypeError, AttributeError):
        data = json.loads(read_private(mark_file, 4096).decode("utf-8"))
        if data.get("run_id") != run_id or int(data.get("pid", -1)) != os.getpid():
            return
        text = json.dumps({**data, "exit_code": exit_code}).encode()
        try:
            write_private(mark_file, text)
        except OSError:  # no room for a new file: the mark's own block holds these few bytes more
            fd = os.open(mark_file, os.O_WRONLY | getattr(os, "O_NOFOLLOW", 0))
            try:
                os.pwrite(fd, text, 0)
                os.ftruncate(fd, len(text))
            finally:
                os.close(fd)
