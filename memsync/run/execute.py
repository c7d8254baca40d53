"""`memsync run`: pull the memories, run the command, checkpoint while it runs, commit with the
run's identity when it exits (success or failure), push.

The command's exit code is memsync's exit code, unless the command succeeded and its memory could
not be saved (EXIT_UNSAVED, the commits named) or a policy kept files out (EXIT_BLOCKED).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from memsync.core import config as cfgmod
from memsync.core import memory, pacing
from memsync.core.attribution import Attribution, acting, operator
from memsync.core.memory import Memory, open_memory, running
from memsync.core.snapshot import Snapshot, describe, take
from memsync.errors import (
    EXIT_BLOCKED,
    EXIT_REJECTED,
    EXIT_REPO,
    EXIT_UNSAVED,
    Interrupted,
    MemsyncError,
    PushRejected,
    RepoError,
    UsageError,
)
from memsync.git import hub as hubmod
from memsync.live.changes import ChangeMonitor
from memsync.live.checkpoint import Checkpointer
from memsync.run.options import DEFAULT_CHECKPOINT, RunOptions
from memsync.run.record import RunTrust
from memsync.sync.exchange import converge, unpushed
from memsync.util import processes, sealed
from memsync.util.names import check_name, check_run_id, env_var_for, new_run_id, where_kept
from memsync.util.records import dataclass, field, fields

if TYPE_CHECKING:  # and imported where used: a plain run has no read-only memory, --as-user or conflict
    from memsync.core import readonly
    from memsync.git.hubtree import Oversize
    from memsync.git.merge import ConflictCopy
    from memsync.run import runas


def _quiet() -> float:
    """Seconds without writes before a checkpoint (MEMSYNC_QUIET), read when a run starts."""
    return float(os.environ.get("MEMSYNC_QUIET", "2.0"))


def _settle() -> float:
    """How recent a write is still settling (MEMSYNC_SETTLE), read when a run starts."""
    return float(os.environ.get("MEMSYNC_SETTLE", "0.5"))


Say = Callable[[str], None]


@dataclass(frozen=True)
class Mount:
    name: str
    path: Path
    read_only: bool = False


@dataclass
class MemoryOutcome:
    name: str
    root: str
    read_only: bool
    checkpoints: int = 0
    final_commit: str | None = None  # the run's record: always made, empty if nothing was left to commit
    files_changed: int = 0  # files the final commit changed (checkpoints counted apart)
    version: str | None = None  # the memory's head after the run (a merge, if others wrote too)
    pushed: bool = False
    unpushed: list[str] = field(default_factory=list)
    conflicts: list[ConflictCopy] = field(default_factory=list)
    merged: int = 0
    flags: list[str] = field(default_factory=list)
    blocked: list[str] = field(default_factory=list)
    read_only_changes: list[str] = field(default_factory=list)
    read_only_kept: str | None = None  # where the command's changes to a read-only memory were moved
    folded: int = 0  # commits the command made itself, folded into the run's (trust.py)
    kept_refs: list[str] = field(default_factory=list)  # where those commits stay reachable locally
    policy_kept: list[str] = field(default_factory=list)  # the command's versions of storage.yaml
    left_out: int = 0  # files the final snapshot did not commit (too large, ignored, ...)
    ignored: list[str] = field(default_factory=list)  # new files the operator's ignore rules kept out
    error: str | None = None
    rejected: bool = False  # the hub refused the final push (a hook, a protected branch, an access rule)
    unrecorded: bool = False  # the final commit failed (a full disk): the next command makes it, as the run's
    proposal: str | None = None  # the proposal waiting for review (--propose, or `mode: review` paths)


@dataclass
class RunReport:
    run_id: str
    command: list[str]
    exit_code: int
    duration: float
    memories: list[MemoryOutcome]

    @property
    def status(self) -> int:
        if self.exit_code != 0:
            return self.exit_code
        if any(m.unrecorded for m in self.memories):
            return EXIT_REPO
        if any(m.rejected for m in self.memories):
            return EXIT_REJECTED  # a retry would meet the same rule: said apart from a hub that was down
        if any(m.error or m.unpushed for m in self.memories):
            return EXIT_UNSAVED
        if any(m.blocked or m.read_only_changes or m.ignored for m in self.memories):
            return EXIT_BLOCKED
        return 0


@dataclass(frozen=True)
class Resolved(RunOptions):
    """A run's options (run/options.py) with what `execute` made of them."""

    user: runas.RunAs | None = None
    generated_id: bool = False  # the run id is memsync's (its clock is then checked: runclock.py)


@dataclass
class Mounted:
    """One memory of a run and everything the run keeps about it."""

    mem: Memory
    outcome: MemoryOutcome
    base: str | None = None  # writable: the branch's version when the command started
    trust: RunTrust | None = None  # writable: the run's record and its checks (record.py)
    guard: readonly.Protection | None = None  # read-only: the state the undo puts back
    lent: runas.Lent | None = None  # --as-user: what was handed over
    checkpoints: int = 0
    last_who: Attribution | None = None  # the author of its last checkpoint (a deferred push's)

    @property
    def name(self) -> str:
        return self.mem.name

    @property
    def writable(self) -> bool:
        return self.trust is not None


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
    from memsync.sync import storage

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
        if not offline and not present:
            held = _clone_or_create(m, remote, create, say)
        elif not offline and not m.read_only:
            storage.record_hub(m.path, remote)  # a run may be a memory's first push
        mem = open_memory(m.path, remote)
        if not m.read_only and memory.live_run(mem) is None:  # a live run settles its own
            from memsync.core.unverified import settle

            with mem.locked():  # a dead run's leftovers are that run's: settled before this run claims it
                from memsync.sync.proposing import recover

                recover(mem, offline)  # a killed proposal run's directory: its leftovers proposed, HEAD back
                mem.git.check_state(mem.branch)
                settle(mem, by="run")  # and unpushed commits memsync did not make are checked (refused if bad)
        joined = _own(mem, run_id, claim, claimed)
        if m.read_only:
            _set_writable(mem, True)
        if not offline:
            held += _pull(mem, m.read_only, run_id if joined else None)
        for h in held:
            say(f"{m.name}/{h.path} not checked out: {h.size} bytes, larger than max_file_size")
        memories.append(mem)
    if offline:
        say("offline: running on the local copies; nothing was pulled")
    return memories


def _clone_or_create(m: Mount, remote: str | None, create: bool, say: Say) -> list[Oversize]:
    from memsync.errors import MemoryNotFound
    from memsync.sync import storage

    try:
        return storage.clone(m.name, m.path, remote=remote).exchange.held_back
    except MemoryNotFound as exc:
        if not create or m.read_only:
            start = "" if m.read_only else (f"; to start a new memory {m.name!r} there, ask for it: `--create` "
                                             "(create=True in Python)")
            exc.hint = f"{exc.hint}{start}"
            raise
    storage.init(m.path, name=m.name, remote=remote)
    storage.record_hub(m.path, remote)  # bound to its hub as a pushed memory is (hubbind.py)
    say(f"{m.name}: a new memory (the hub had none of that name); the run's push publishes it")
    return []


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


def _pull(mem: Memory, read_only: bool, joined_run: str | None = None) -> list[Oversize]:
    from memsync.sync.hubs import ensure_hub

    # Joining the run that owns the memory: its uncommitted files are that run's work.
    who = acting(joined_run, "Save the run's changes") if joined_run else operator("Save local changes before the run")

    def resnap() -> None:
        if read_only:
            changed = ", ".join(c.path for c in mem.git.scan()[:5])
            raise RepoError(f"read-only memory {mem.name!r} has local changes that block its update: {changed}",
                            f"move them out of {mem.root} (a read-only memory is never committed), then run again")
        take(mem, who)

    with mem.locked():
        mem.git.check_state(mem.branch)
        mem.git.ensure_layout(mem.branch, None)
        ensure_hub(mem.hub, mem)
        if not read_only:
            take(mem, who)  # prepare() has settled what a dead run or the agent left
        return converge(mem, operator("Merge the remote memory before the run"), resnap, push=False).held_back


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


def shown_command(command: list[str]) -> str:
    """The command as it may be shown and recorded (stderr, the Memsync-Command trailer): likely
    credentials are redacted (memsync.cmdline), because commit trailers are pushed and kept forever."""
    from memsync.run.cmdline import shown_command as redacted

    return redacted(command)


def _plural(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def environment(run_id: str, memories: list[Memory], keep_ssh_agent: bool = False) -> dict[str, str]:
    """The command's environment: memsync's, minus every credential (see memsync/util/sealed.py)."""
    from memsync.util.sealed import child_environment

    env = child_environment(keep_ssh_agent)
    env["MEMSYNC_RUN_ID"] = run_id
    env["MEMSYNC_MEMORY_DIR"] = str(memories[0].root)
    for mem in memories:
        env[env_var_for(mem.name)] = str(mem.root)
    return env


class _HeldWhileRunning:
    """memsync's messages while the command runs are held and printed, whole, when it exits: the
    command writes to the same stderr, and a line of ours must never land inside one of its."""

    def __init__(self, say: Say) -> None:
        self._say = say
        self._held: list[str] | None = None
        self._lock = threading.Lock()

    def __call__(self, message: str) -> None:
        with self._lock:
            if self._held is not None:
                self._held.append(message)
                return
        self._say(message)

    def hold(self) -> None:
        with self._lock:
            self._held = []

    def release(self) -> None:
        with self._lock:
            held, self._held = self._held or [], None
        for message in held:
            self._say(message)


class CommandFailedToStart(MemsyncError):
    """The command could not be started: 127 if it was not found, 126 otherwise (as a shell)."""

    def __init__(self, program: str, exc: OSError) -> None:
        super().__init__(f"cannot start {program!r}: {exc.strerror}", "check the command and your PATH")
        self.exit_code = 127 if isinstance(exc, FileNotFoundError) else 126


DEFAULT_STOP_GRACE = 8.0


def _stop_grace() -> float:
    """Seconds the final push may go on after memsync is asked to stop (MEMSYNC_STOP_GRACE): within
    `docker stop`'s 10 s, so that the job still sees which versions were not pushed."""
    try:
        grace = float(os.environ.get("MEMSYNC_STOP_GRACE", DEFAULT_STOP_GRACE))
    except ValueError:
        return DEFAULT_STOP_GRACE
    return grace if grace >= 0 else DEFAULT_STOP_GRACE


class _Signals:
    """SIGTERM, SIGHUP and SIGINT from the command's start to the end of the final push.

    While the command runs they are forwarded to it (SIGINT only when not at a terminal, where
    Ctrl-C already reaches it). Once it has exited, memsync is not stopped at once: it commits,
    and the final push goes on until a second signal, or until `grace` seconds after the first
    signal memsync received (docker stop's SIGTERM may have come while the command ran); then
    the push is abandoned, the commit kept, and the run reports what was not pushed (exit 8).
    The handler only records: the main thread decides (_interruptible), so no signal lands in
    the middle of a commit."""

    def __init__(self, proc: subprocess.Popen[bytes], grace: float) -> None:
        self.proc = proc
        self.grace = grace
        self.received: list[int] = []  # while the command ran
        self.after: list[int] = []  # once it had exited
        self.first_at: float | None = None  # monotonic
        self.command_done = False
        self.saved: dict[int, object] = {}

    def __enter__(self) -> _Signals:
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            self.saved[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.first_at is None:
            self.first_at = time.monotonic()
        if self.command_done:
            self.after.append(signum)
            return
        self.received.append(signum)
        at_terminal = signum == signal.SIGINT and sys.stdin is not None and sys.stdin.isatty()
        if not at_terminal and self.proc.poll() is None:
            with contextlib.suppress(OSError):
                os.killpg(self.proc.pid, signum)  # the command's group: what it started hears it too

    def command_exited(self) -> None:
        self.command_done = True

    def stopping(self) -> bool:
        return self.first_at is not None

    def abandon_reason(self) -> str | None:
        """Why the final push must be given up now, if it must."""
        if len(self.after) >= 2:
            return "a second signal"
        if self.first_at is not None and time.monotonic() - self.first_at >= self.grace:
            return f"not done {self.grace:g}s after the signal"
        return None

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self.saved.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]


def execute(command: list[str], mounts: list[Mount], options: RunOptions | None = None, *,
            say: Say = lambda _m: None) -> RunReport:
    o = options or RunOptions()
    run_id, checkpoint, remote, as_user = o.run_id, o.checkpoint, o.remote, o.as_user
    if not command:
        raise UsageError("no command to run", "put it after --: memsync run -- CMD [ARGS...]")
    if o.propose and o.no_push:
        raise UsageError("--propose and --no-push: a proposal is a branch on the hub", "drop one of them")
    if not 0 <= checkpoint <= 86_400:  # also refuses nan and inf
        raise UsageError("--checkpoint must be 0 (off) to 86400 seconds", "e.g. --checkpoint 30")
    rid = new_run_id() if run_id is None else check_run_id(run_id)
    cwd = Path.cwd()
    if remote and hubmod.parse(remote, name=hubmod.TEMPLATE_PROBE).password:
        raise UsageError(f"--remote {hubmod.safe_url(remote)}: a credential on memsync's command line is "
                         "readable by every process on the machine (ps, /proc/PID/cmdline), the command's too",
                         "set MEMSYNC_TOKEN instead and give the URL without it")
    pacing.resolve(o.max_push_rate, None)  # a bad flag stops the run before anything is pulled
    user = None
    if as_user is not None:
        from memsync.run import runas

        user = runas.resolve(as_user)
        _end_processes(user, None, say)  # one a past run left behind must not race the pre-run save
    sealed.make_undumpable()
    with sealed.seal(), _stop_requests():
        options = Resolved(**{f.name: getattr(o, f.name) for f in fields(o)}, user=user, generated_id=run_id is None)
        return _execute(command, mounts, rid, cwd, say, options)


@contextlib.contextmanager
def _stop_requests() -> Iterator[None]:
    """SIGTERM and SIGHUP before the command starts (the opening pull) stop the run as Ctrl-C does:
    an error naming the signal (exit 128 + its number, as a shell reports it), the memories' claims
    released, nothing half-done left behind. Once the command runs, _Signals takes them over."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, frame: FrameType | None) -> None:
        stopped = Interrupted(f"stopped by {signal.Signals(signum).name} before the command started; nothing "
                              "was run", "nothing is lost: run it again")
        stopped.exit_code = 128 + signum
        raise stopped

    saved = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGHUP)
             if signal.getsignal(sig) in (signal.SIG_DFL, None)}
    try:
        yield
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)


def _execute(command: list[str], mounts: list[Mount], rid: str, cwd: Path, say: Say, options: Resolved) -> RunReport:
    memories = prepare(mounts or [], cwd, options.remote, options.offline, say, run_id=rid, claim=True,
                       create=options.create)
    if not options.propose:
        return _execute_prepared(command, mounts, rid, say, options, memories)
    from memsync.run.proposed import proposed

    with proposed(memories, {m.name for m in mounts if m.read_only}, rid, options.offline, say) as views:
        report = _execute_prepared(command, mounts, rid, say, options, views)
    for outcome in report.memories:
        if not outcome.read_only and outcome.final_commit:
            outcome.proposal = rid
    return report


def _execute_prepared(command: list[str], mounts: list[Mount], rid: str, say: Say, o: Resolved,
                      memories: list[Memory]) -> RunReport:
    read_only = {m.name for m in mounts if m.read_only}
    if o.generated_id:
        from memsync.run import runclock

        for behind in runclock.behind_history(memories):
            say(f"warning: {runclock.describe(behind)}")
    mounted = [Mounted(mem, MemoryOutcome(mem.name, str(mem.root), mem.name in read_only)) for mem in memories]
    writable = [m for m in mounted if m.mem.name not in read_only]
    for m in writable:
        m.base = m.mem.git.head_oid()
        m.trust = RunTrust.begin(m.mem, rid)
    # read-only memories: everything the command does there is undone (storage.yaml included)
    for m in mounted:
        if m.mem.name in read_only:
            from memsync.core import readonly

            m.guard = readonly.protect(m.mem, rid)
    with running(memories, rid):  # the run owns its memories: watch, push, pull... leave it its files
        shown = shown_command(command)
        say(f"run {rid}: {_plural(len(memories), 'memory', 'memories')} ready; starting {shown}")
        started = time.monotonic()
        by_root = {str(m.mem.root.resolve()): m for m in writable}
        pacer = pacing.PushPacer({m.name: pacing.resolve(o.max_push_rate, m.mem.config.max_push_rate)
                                  for m in writable})

        def checkpoint_action(monitor: ChangeMonitor, overdue: bool) -> bool:
            m = by_root[str(monitor.root)]
            mem, trust = m.mem, m.trust
            assert trust is not None
            m.checkpoints += 1
            who = Attribution("run", f"Checkpoint {m.checkpoints} of run {rid}", rid,
                              (("Memsync-Command", shown),
                               ("Memsync-Checkpoint", str(m.checkpoints))))
            with mem.locked():
                trust.check(say)
                snap = take(mem, who, settle=0.0 if overdue else _settle(), run_base=m.base,
                            run_flags=trust.run_flags(final=False))
                trust.committed(snap)
                if snap.commit is None:
                    m.checkpoints -= 1
                else:
                    m.outcome.checkpoints = m.checkpoints
                    _report(snap, mem, say)
                    m.last_who = who
                    if not o.no_push and pacer.may_push(m.name):  # else it goes with a later push
                        _deliver(mem, who, m.outcome, say, quiet_failure=True, trust=trust, live=True)
                        pacer.pushed(m.name)
            return bool(snap.pending)

        def push_deferred() -> None:
            for name in pacer.due():
                m = next(w for w in writable if w.name == name)
                assert m.trust is not None and m.last_who is not None
                try:
                    with m.mem.locked():
                        _deliver(m.mem, m.last_who, m.outcome, say, quiet_failure=True, trust=m.trust,
                                 live=True)
                finally:
                    pacer.pushed(name)  # an attempt counts: a failing hub is not retried every tick

        say = held_say = _HeldWhileRunning(say)
        monitors = [ChangeMonitor(m.mem.root, say) for m in writable] if o.checkpoint > 0 else []
        checkpointer = Checkpointer(monitors, checkpoint_action, quiet=min(_quiet(), o.checkpoint),
                                    max_interval=o.checkpoint,
                                    on_error=lambda m, e: say(f"checkpoint failed: {getattr(e, 'message', e)}"),
                                    extra=push_deferred)
        watching = _Watching(monitors, say)
        checkpointer.start()
        try:
            held_say.hold()
            env = environment(rid, memories, o.keep_ssh_agent)
            if o.user is not None:
                from memsync.run import runas

                for m in writable:  # recorded first: a command after memsync's death ends the user's processes
                    memory.record_in_mark(m.mem, rid, as_user={"uid": o.user.uid, "name": o.user.name})
                    m.lent = runas.hand_over(m.mem.root, o.user)
                    memory.record_in_mark(m.mem, rid, as_user={"uid": o.user.uid, "name": o.user.name,
                                                               "lent": runas.lent_fields(m.lent)})
            proc, agent = _spawn(command, env, o.user, rid)
            for mem in memories:
                memory.record_in_mark(mem, rid, agent=agent.fields())
        except OSError as exc:
            _hand_back(writable, o.user, say)
            checkpointer.stop()
            watching.stop()
            held_say.release()
            _undo_read_only(mounted, say)
            failed = CommandFailedToStart(command[0], exc)
            # Recorded all the same: exit 127 on the hub says why the run did nothing.
            _finish(RunReport(rid, command, failed.exit_code, time.monotonic() - started,
                              [m.outcome for m in mounted]), writable, o.no_push, say)
            raise failed from exc
        with _Signals(proc, _stop_grace()) as signals:  # until the final push is done or given up
            code = _wait(proc)
            signals.command_exited()
            _terminal_back()
            # what the command left running must not write while its files are saved (nor race the hand-back)
            _end_processes(o.user, agent, say)
            _hand_back(writable, o.user, say)
            checkpointer.stop()
            watching.stop()
            held_say.release()
            duration = time.monotonic() - started
            if signals.received:
                say("command stopped by signal; saving what it left")
            if pacer.deferred_total:
                say(f"max push rate: {_plural(pacer.deferred_total, 'checkpoint', 'checkpoints')} waited for a "
                    "later push")
            report = RunReport(rid, command, code, duration, [m.outcome for m in mounted])
            _undo_read_only(mounted, say)
            _finish(report, writable, o.no_push, say, signals)
            if not o.propose:
                from memsync.run.proposed import propose_reviewed

                propose_reviewed(writable, rid, say, push=not o.no_push)
            return report


class _Watching:
    """Starts the change monitors in a thread: watching a 100,000-file tree takes seconds to set
    up and the command must not wait for it (nor, if it is short, its end). Each monitor starts
    dirty, so whatever changed before its watches were in place is found by the first checkpoint.
    The watches are set up only once the command has run for GRACE seconds: a short command
    ends before any (setting up 10,000 files' watches costs ~70 ms of CPU, taken from the
    commit and push that follow it)."""

    GRACE = 0.25

    def __init__(self, monitors: list[ChangeMonitor], say: Say) -> None:
        self._monitors = monitors
        self._say = say
        self._lock = threading.Lock()
        self._stopped = False
        self._stopping = threading.Event()
        self._started: list[ChangeMonitor] = []
        self._thread = threading.Thread(target=self._start_all, name="memsync-watch-start", daemon=True)
        self._thread.start()

    def _start_all(self) -> None:
        if self._monitors and self._stopping.wait(self.GRACE):
            return
        for monitor in self._monitors:
            try:
                monitor.start()
            except Exception as exc:
                self._say(f"file events unavailable in {monitor.root} ({exc}); no checkpoints there")
                continue
            with self._lock:
                if self._stopped:
                    monitor.stop()
                    continue
                self._started.append(monitor)
            monitor.mark_dirty()

    def stop(self) -> None:
        self._stopping.set()
        with self._lock:
            self._stopped = True
            started, self._started = self._started, []
        for monitor in started:
            monitor.stop()


def _wait(proc: subprocess.Popen[bytes]) -> int:
    while True:
        try:
            code = proc.wait()
            break
        except (KeyboardInterrupt, Interrupted):
            continue
    return 128 - code if code < 0 else code


def _hand_back(writable: list[Mounted], user: runas.RunAs | None, say: Say) -> None:
    for m in writable:
        if m.lent is not None and user is not None:
            from memsync.run import runas

            try:
                runas.hand_back(m.mem.root, m.lent, user)
            except MemsyncError as exc:
                say(f"{m.name}: {exc.message}")
            except OSError as exc:
                say(f"{m.name}: the work tree was not fully handed back ({exc.strerror or exc}); "
                    f"check the owners under {m.mem.root}")


def _spawn(command: list[str], env: dict[str, str], user: runas.RunAs | None,
           rid: str) -> tuple[subprocess.Popen[bytes], processes.Agent]:
    """Start the command in a process group of its own, killed if memsync dies (processes.py),
    holding the terminal's foreground if memsync held it; returns it and its record for the mark.
    Called from the thread that then waits for it: the parent-death signal follows that thread."""
    from memsync.util.holders import boot_id, process_started

    terminal = _terminal()
    extra: dict[str, Any] = user.popen_args() if user else {}
    proc = subprocess.Popen(command, env=user.environment(env) if user else env,
                            preexec_fn=processes.child_setup(terminal), **extra)
    return proc, processes.Agent(rid, proc.pid, process_started(proc.pid), process_started(os.getpid()), boot_id())


def _terminal() -> int | None:
    """stdin's descriptor if it is a terminal whose foreground is memsync's group (a shell's job)."""
    try:
        fd = sys.stdin.fileno() if sys.stdin is not None else -1
        return fd if fd >= 0 and os.isatty(fd) and os.tcgetpgrp(fd) == os.getpgrp() else None
    except (OSError, ValueError):
        return None


def _terminal_back() -> None:
    """The terminal's foreground back to memsync's group once the command has exited, so a
    Ctrl-C during the final push reaches memsync."""
    try:
        fd = sys.stdin.fileno() if sys.stdin is not None else -1
        if fd >= 0 and os.isatty(fd) and os.tcgetpgrp(fd) != os.getpgrp():
            processes.take_terminal(fd, os.getpgrp())
    except (OSError, ValueError):
        return


def _end_processes(user: runas.RunAs | None, agent: processes.Agent | None, say: Say) -> None:
    """End what the command left running: with --as-user every process of the user; else its
    process group and every process carrying the run's id (processes.py), asked with SIGTERM first."""
    try:
        if user is not None:
            from memsync.run import runas

            left = runas.end_processes(user)
        else:
            if agent is not None and (found := processes.survivors(agent)):
                say(f"the command left {_plural(len(found), 'process', 'processes')} running (pids "
                    f"{', '.join(map(str, found[:5]))}): ended before its files are saved")
            left = processes.end(agent) if agent is not None else []
    except OSError as exc:
        why = getattr(exc, "strerror", None) or exc
        say(f"warning: {f'--as-user {user.name}' if user else 'run'}: cannot end the command's processes ({why})")
        return
    if left:
        whose = f"--as-user {user.name}: {len(left)} of the user's processes" if user else \
            f"{len(left)} processes the command left running"
        say(f"warning: {whose} did not end (pids {', '.join(map(str, left[:5]))})")


def _undo_read_only(mounted: list[Mounted], say: Say) -> None:
    """Put every read-only memory back as the run found it; name what the command changed there."""
    for m in mounted:
        if m.guard is None:
            continue
        mem, outcome = m.mem, m.outcome
        from memsync.core import readonly

        try:
            done = readonly.undo(mem, m.guard)
        except (OSError, MemsyncError) as exc:  # the writable memories are saved all the same
            outcome.read_only_changes = ["(not checked: the undo failed)"]
            say(f"read-only memory {mem.name!r}: cannot undo the run's changes "
                f"({getattr(exc, 'message', None) or getattr(exc, 'strerror', None) or exc}); "
                "the next memsync command in it finishes the undo")
            continue
        outcome.read_only_changes = done.changed
        outcome.read_only_kept = done.kept_in
        if done.dropped_commit:
            outcome.read_only_changes.append(f"commit {done.dropped_commit[:8]} (dropped from its branch)")
        if outcome.read_only_changes:
            kept = f"; what it made is kept in {done.kept_in}" if done.kept_in else ""
            say(f"read-only memory {mem.name!r} was changed during the run (not saved, not pushed): "
                + ", ".join(outcome.read_only_changes[:10]) + f"; put back as the run found it{kept}")


def _finish(report: RunReport, writable: list[Mounted], no_push: bool, say: Say,
            signals: _Signals | None = None) -> None:
    rid = report.run_id
    abandoned = False
    for m in writable:
        mem, outcome, trust = m.mem, m.outcome, m.trust
        assert trust is not None
        extra: tuple[tuple[str, str], ...] = (("Memsync-Command", shown_command(report.command)),
                                              ("Memsync-Exit-Code", str(report.exit_code)),
                                              ("Memsync-Duration", f"{report.duration:.1f}s"))
        if m.checkpoints:
            extra += (("Memsync-Checkpoints", str(m.checkpoints)),)
        who = Attribution("run", f"Run {rid} (exit {report.exit_code})", rid, extra)
        try:
            with mem.locked():
                try:
                    trust.check(say)
                    # Always a commit, empty if the checkpoints already saved everything: the run's
                    # outcome (exit code, duration, checkpoints) must reach the hub in its trailers.
                    snap = take(mem, who, run_base=m.base, run_flags=trust.run_flags(final=True),
                                allow_empty=True)
                    trust.committed(snap)
                finally:
                    outcome.folded, outcome.kept_refs = trust.folded, trust.kept
                    outcome.policy_kept = trust.policy_kept
                outcome.final_commit = snap.commit
                outcome.files_changed = len(snap.changes)
                outcome.blocked = snap.blocked
                outcome.left_out = snap.left_out
                outcome.ignored = snap.ignored
                outcome.flags = [f.trailer() for f in snap.flags] + snap.run_flags
                _report(snap, mem, say)
                outcome.version = mem.git.head_oid()
                if no_push or abandoned:
                    if abandoned:
                        outcome.error = "interrupted: not pushed"
                        outcome.unpushed = [outcome.version[:8]] if outcome.version else []
                    continue
                _interruptible(lambda mem=mem, who=who, outcome=outcome, trust=trust:  # type: ignore[misc]
                               _deliver(mem, who, outcome, say, quiet_failure=False, trust=trust), signals, say)
                outcome.version = mem.git.head_oid()
        except (KeyboardInterrupt, Interrupted) as exc:
            abandoned = True
            why = f" ({exc.message})" if isinstance(exc, Interrupted) and exc.message != "interrupted" else ""
            outcome.error = f"interrupted: the final push was abandoned{why}"
            outcome.unpushed = [outcome.version[:8]] if outcome.version else []
        except MemsyncError as exc:
            outcome.error = exc.message
            outcome.rejected = isinstance(exc, PushRejected)
            if isinstance(exc, RepoError) and outcome.final_commit is None:
                mem.run_unrecorded = report.exit_code  # the run's record could not be made: the next command makes it
                outcome.unrecorded = True
            with contextlib.suppress(MemsyncError):
                outcome.unpushed = unpushed(mem)
        except Exception as exc:  # libgit2 or the OS refusing a write: a full disk is an ordinary failure
            from memsync.git import diskfull

            full = diskfull.explain(exc, [mem.git.git_dir])
            if outcome.final_commit is None:
                mem.run_unrecorded = report.exit_code
                outcome.unrecorded = full is not None
            if full is None:
                raise
            outcome.error = full.message


_PUSH_FLOOR = 1.0


def _interruptible(work: Callable[[], None], signals: _Signals | None = None, say: Say = lambda _m: None) -> None:
    """Run `work` (a push) in a worker thread so that it can be abandoned at once: libgit2's
    blocking network calls would otherwise defer a Ctrl-C until they time out. With `signals`,
    a stop request lets it go on until _Signals.abandon_reason says otherwise (Interrupted);
    without, a Ctrl-C (Interrupted from the CLI's handler) abandons it."""
    failure: list[BaseException] = []

    def target() -> None:
        try:
            work()
        except BaseException as exc:  # handed to the main thread
            failure.append(exc)

    announced = False
    worker = threading.Thread(target=target, name="memsync-final-push", daemon=True)
    worker.start()
    tried = time.monotonic() + _PUSH_FLOOR  # a grace already spent still lets a quick push through
    while worker.is_alive():
        if signals is not None and signals.stopping():
            reason = signals.abandon_reason()
            if reason is not None and (signals.after[1:] or time.monotonic() >= tried):
                raise Interrupted(reason)
            if not announced:
                announced = True
                say(f"asked to stop: finishing the push (up to {signals.grace:g}s after the first signal; "
                    "a second signal abandons it, keeping the commit)")
        worker.join(0.1)
    if failure:
        raise failure[0]


def _deliver(mem: Memory, who: Attribution, outcome: MemoryOutcome, say: Say, quiet_failure: bool,
             trust: RunTrust, live: bool = False) -> None:
    """Push the run's commits. `live` (a checkpoint: the command may still be writing): the
    hub's new versions are merged aside, never into the work tree (exchange.converge)."""
    from memsync.errors import RemoteError as _RemoteError

    try:
        exchange = converge(mem, who, lambda: _resnap(mem, who), vetted=trust.vetted, live=live)
    except _RemoteError as exc:
        outcome.unpushed = unpushed(mem)
        if not quiet_failure:
            raise
        if outcome.error != exc.message:
            say(f"checkpoint push failed (will retry): {exc.message}")
        outcome.error = None
        return
    trust.synced(exchange)
    outcome.pushed = exchange.pushed or outcome.pushed
    outcome.unpushed = []
    outcome.merged += len(exchange.merges)
    outcome.conflicts.extend(exchange.conflicts)
    for c in exchange.conflicts:
        say(f"conflict in {mem.name}/{c.path}: kept this run's version there, the other {where_kept(c.copy)}")
    for path in exchange.rule_files:
        from memsync.checks.merge_policy import rule_file_line

        say(f"warning: {mem.name}: {rule_file_line(path)}")


def _resnap(mem: Memory, who: Attribution) -> None:
    take(mem, who)


def _report(snap: Snapshot, mem: Memory, say: Say) -> None:
    for line in describe(snap):
        say(f"warning: {mem.name}: {line}")


__all__ = [
    "DEFAULT_CHECKPOINT",
    "MemoryOutcome",
    "Mount",
    "RunOptions",
    "RunReport",
    "execute",
    "parse_mount",
    "threading",
]
