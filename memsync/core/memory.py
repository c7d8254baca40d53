"""A memory directory: its root, its storage.yaml, its repository and its hub."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from memsync.core import config as cfgmod
from memsync.core import maintenance
from memsync.core.config import StorageConfig
from memsync.core.locking import clear_stale_git_locks, held
from memsync.errors import ConfigError, NotAMemory, RunInProgress
from memsync.git import checkoutjournal
from memsync.git.hub import HubUrl
from memsync.git.remote import Hub
from memsync.git.repo import GitRepo
from memsync.util import notices
from memsync.util.fs import read_private, write_private
from memsync.util.records import recordclass, replace

HUB_BEFORE_REWRITE = "refs/memsync/hub-before-rewrite"  # local only, never pushed
REDACTION_BACKUPS = "refs/memsync/redaction-backup/"  # histories kept after following a redaction


@recordclass
class Memory:
    root: Path
    config: StorageConfig
    git: GitRepo
    hub: Hub  # bound once per command (core/hubbind.bind_memory): a hub on this machine or across the network
    # where what is known of the hub's branch is kept: "origin" for the memory's own hub, a name
    # of its own for a hub given with --remote, so a push to a mirror never stands in for it
    tracking: str = "origin"
    # a run's final commit could not be made (a full disk): its mark stays when the run ends, so
    # the next command commits what the run left as that run's (unverified.vet), never the operator's
    run_unrecorded: int | None = None  # the run's exit code
    own_hub: HubUrl | None = None  # the memory's own hub, when `hub` is a mirror given with --remote

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

    @property
    def rewritten_ref(self) -> str:
        """The tip this hub had before its history was rewritten (a redaction), kept by fetch."""
        return f"{HUB_BEFORE_REWRITE}/{self.tracking}/{self.branch}"

    def hub_tips(self) -> list[str]:
        """What is known to be on a hub: the tip last fetched from this hub, then (given another
        with --remote) the memory's own hub's, then what a hub had before rewriting its history.
        Commits below them came from a hub, not from a `git commit` here (unverified.py)."""
        refs = [self.tracking_ref]
        if self.tracking != "origin":
            refs.append(f"refs/remotes/origin/{self.branch}")
        refs += [self.rewritten_ref, f"{HUB_BEFORE_REWRITE}/origin/{self.branch}"]
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
            if (self.git.git_dir / RUN_MARKER).exists():
                _reclaim(self)
            yield
            maintenance.auto(self.git.git_dir, self.git.let_go)


def _reclaim(mem: Memory) -> None:
    """A killed --as-user run's processes are ended and its tree taken back before anything else
    (core/orphans.py)."""
    data = read_mark(mem)
    if data is None or "as_user" not in data:
        return
    if not runner_alive(RunMark(str(data["run_id"]), int(data["pid"]), data.get("started"), data.get("boot"))):
        from memsync.core.orphans import reclaim

        reclaim(mem.root, mem.git.git_dir / RUN_MARKER, mem.name, data)


def find(start: Path) -> Path:
    root = cfgmod.find_root(start)
    if root is None:
        if (start / cfgmod.CONFIG_DIR / cfgmod.CONFIG_FILE).is_dir():
            raise ConfigError(f"{start / '.vm0' / 'storage.yaml'} is a directory, not a file",
                              "remove it, then run `memsync init`")
        raise NotAMemory(str(start))
    return root


def open_memory(start: Path, remote: str | None = None, *, first_push: bool = False,
                cloned_from: Hub | None = None) -> Memory:
    """The memory `start` is in, its storage.yaml read and its repository opened once, its hub
    resolved and bound once (hubbind.bind_memory). `first_push`: a memory that records no hub
    records the one this push goes to. `cloned_from`: the hub this command cloned the memory from just
    now (storage.clone_bound), not resolved and bound again."""
    from memsync.util import fiforelease

    fiforelease.watch()  # libgit2 opens files by path, blocking: a FIFO swapped in must not hold it for ever
    root = find(start)
    config = cfgmod.load(root)
    git = GitRepo.open(root)
    from memsync.core.hubbind import bind_memory
    from memsync.core.ownfolders import keep_out
    from memsync.git.packcheck import bound

    git.object_bound = bound(config.max_file_size)  # what a fetch may make (git/packcheck.py)
    binding = bind_memory(config, git, remote, first_push, root, cloned_from)
    mem = Memory(root, config, git, binding.hub, binding.tracking, own_hub=binding.own)
    keep_out(root, binding.hub)  # MEMSYNC_HOME or a hub inside the memory is never committed (core/ownfolders.py)
    if (git.git_dir / "memsync-ro-guard.json").exists():  # a run killed while it held this memory read-only
        from memsync.core.readonly import recover

        recover(mem)
    return mem


RUN_MARKER = "memsync-run.json"
_MARK_BYTES = 16384  # the mark with its command's and --as-user's records


@recordclass(frozen=True)
class RunMark:
    """The `memsync run` that owns a memory directory while it runs (a file in .git, never
    committed). A mark whose process is gone is stale and ignored: a kill -9 never blocks."""

    run_id: str
    pid: int
    started: str | None = None  # the process's start time (Linux), so a reused pid is not taken for it
    boot: str | None = None  # the machine's boot id, so a pid from before a reboot is not either
    # memsync itself is gone but these processes of its command still run (util/processes.py):
    # the run still owns the memory, since they may be halfway through a file
    left: tuple[int, ...] = ()


def _process_started(pid: int) -> str | None:
    from memsync.util.holders import process_started

    return process_started(pid)


def runner_alive(mark: RunMark) -> bool:
    """Judged here by pid, start time and boot id (holders.py), never by a clock."""
    import socket

    from memsync.util.holders import ProcessIdentity, may_be_alive

    return may_be_alive(ProcessIdentity(mark.pid, socket.gethostname(), mark.boot, mark.started))


def read_mark(mem: Memory) -> dict[str, Any] | None:
    """The run mark's fields as written (None: no mark, or not one memsync wrote)."""
    import json

    try:
        data = json.loads(read_private(mem.git.git_dir / RUN_MARKER, _MARK_BYTES).decode("utf-8"))
        RunMark(str(data["run_id"]), int(data["pid"]))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return data if isinstance(data, dict) else None


def live_run(mem: Memory) -> RunMark | None:
    """The live run that owns this memory, if any: its memsync process lives, or processes its
    command started still run after memsync died (`left`)."""
    data = read_mark(mem)
    if data is None:
        return None
    mark = RunMark(str(data["run_id"]), int(data["pid"]), data.get("started"), data.get("boot"))
    if runner_alive(mark):
        return mark
    from memsync.util import processes

    agent = processes.Agent.parse(mark.run_id, data.get("agent"))
    left = processes.survivors(agent) if agent is not None else []
    return replace(mark, left=tuple(left)) if left else None


def in_use(mem: Memory, mark: RunMark, hint: str) -> RunInProgress:
    """The refusal for a memory `mark`'s run owns (exit 6), naming what still runs."""
    if mark.left:
        from memsync.errors import AgentLeftRunning

        return AgentLeftRunning(mem.name, mark.run_id, mark.pid, list(mark.left))
    return RunInProgress(mem.name, mark.run_id, mark.pid, hint)


def record_in_mark(mem: Memory, run_id: str, **fields: object) -> None:
    """Add `fields` to this process's mark for `run_id` (the command's processes, the user it
    runs as), so that a command after memsync's death finds them (util/processes.py)."""
    import os

    data = read_mark(mem)
    if data is None or data.get("run_id") != run_id or data.get("pid") != os.getpid():
        return
    import json

    write_private(mem.git.git_dir / RUN_MARKER, json.dumps({**data, **fields}).encode())


def run_in_progress(mem: Memory) -> str | None:
    """The id of a live `memsync run` using this memory, if any (a dead run's mark is stale)."""
    mark = live_run(mem)
    return mark.run_id if mark is not None else None


# Every verb that commits, pushes, rewrites history or repacks a memory's repository. None of them
# acts while a run owns the memory: it would commit the run's half-written files as someone else's,
# or change the repository under the run (an agent calling `memsync redact` inside its own run
# once wiped the hub's history that way). `refuse_during_run` is the one check they all make,
# under the memory's lock and before writing anything; tests/stories/test_run_ownership.py runs each verb
# against a live run, and fails when a command appears that is in neither table.
OWNED_VERBS = frozenset({"push", "pull", "restore", "revert", "redact", "gc", "watch", "hooks run",
                         "accept", "reject"})
# Verbs that never write to an existing memory's repository (or, for `run` and `mcp`, act as the
# run itself: `run` claims the memory, the MCP server's tools pass the run's id; `ui` restores and
# reverts through `restore`'s and `revert`'s own code, in a working copy of its own).
FREE_VERBS = frozenset({"init", "clone", "status", "list", "log", "diff", "contract", "run", "serve", "mcp", "ui",
                        "hooks install", "hooks uninstall", "hooks status", "completion show",
                        "completion install", "proposals", "review", "consolidate"})


def refuse_during_run(mem: Memory, verb: str, as_run: str | None = None) -> None:
    """May `verb` act on this memory now? Not while a run owns it (RunInProgress, exit 6), unless
    `as_run` names that run (an agent's tool call inside it, e.g. the MCP server's restore)."""
    if verb not in OWNED_VERBS:
        raise ValueError(f"refuse_during_run: {verb!r} is not in OWNED_VERBS")
    mark = live_run(mem)
    if mark is not None and mark.run_id != as_run:
        raise in_use(mem, mark, f"wait for the run to end (it commits and pushes its own files), then `memsync {verb}` "
                     "again; a run whose process is gone no longer counts")


def claim(mem: Memory, run_id: str) -> bool:
    """Mark the memory as owned by this process's run `run_id`, waiting up to the lock timeout
    while another live run owns it (then RunInProgress). False: the run already owns it (a tool
    server inside the run, on the same directory), so nothing was marked."""
    import json
    import os
    import time

    from memsync.core.locking import lock_timeout

    wait = lock_timeout()
    deadline = time.monotonic() + wait
    said = False
    while True:
        with mem.locked():
            mark = live_run(mem)
            if mark is None:
                from memsync.util.holders import boot_id

                started = _process_started(os.getpid())
                text = json.dumps({"run_id": run_id, "pid": os.getpid(), "started": started, "boot": boot_id()})
                write_private(mem.git.git_dir / RUN_MARKER, text.encode())
                return True
            if mark.run_id == run_id:
                return False
        if not said:  # a run waiting in silence looks hung
            who = f"pids {_pids(mark.left)} its command left" if mark.left else f"pid {mark.pid}"
            notices.warn(f"memory {mem.name!r} is in use by run {mark.run_id} ({who}); "
                         f"waiting up to {wait:.0f}s for it to end")
            said = True
        if time.monotonic() >= deadline:
            raise in_use(mem, mark, f"waited {wait:.0f}s; runs in one memory directory take turns: give each its own "
                         "directory (--memory NAME:PATH), or set MEMSYNC_LOCK_TIMEOUT to wait longer")
        time.sleep(0.2)


def _pids(pids: tuple[int, ...]) -> str:
    return ", ".join(map(str, pids[:5])) + (" ..." if len(pids) > 5 else "")


def release(mem: Memory, run_id: str) -> None:
    """Remove this process's mark for `run_id` (never another run's)."""
    import os

    mark_file = mem.git.git_dir / RUN_MARKER
    try:
        import json

        data = json.loads(read_private(mark_file, _MARK_BYTES).decode("utf-8"))
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
        data = json.loads(read_private(mark_file, _MARK_BYTES).decode("utf-8"))
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
