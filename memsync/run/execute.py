"""`memsync run`: pull the memories, run the command, checkpoint while it runs, commit with the
run's identity when it exits (success or failure), push.

The command's exit code is memsync's exit code, unless the command succeeded and its memory could
not be saved (EXIT_UNSAVED, the commits named) or a policy kept files out (EXIT_BLOCKED).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memsync.core import memory, pacing
from memsync.core.attribution import Attribution
from memsync.core.memory import Memory, running
from memsync.core.snapshot import take
from memsync.errors import (
    Interrupted,
    MemsyncError,
    UsageError,
)
from memsync.git import hub as hubmod
from memsync.live.changes import ChangeMonitor
from memsync.live.checkpoint import Checkpointer
from memsync.run.finish import deliver, finish_run, report_snapshot, undo_read_only
from memsync.run.mounts import Mount, parse_mount, prepare
from memsync.run.options import DEFAULT_CHECKPOINT, RunOptions
from memsync.run.outcome import MemoryOutcome, Mounted, RunReport
from memsync.run.record import RunTrust
from memsync.run.stopping import Signals, stop_grace, stop_requests
from memsync.util import processes, sealed
from memsync.util.names import check_run_id, env_var_for, new_run_id
from memsync.util.records import dataclass, fields

if TYPE_CHECKING:  # and imported where used: a plain run has no read-only memory, --as-user or conflict
    from memsync.run import runas


def _quiet() -> float:
    """Seconds without writes before a checkpoint (MEMSYNC_QUIET), read when a run starts."""
    return float(os.environ.get("MEMSYNC_QUIET", "2.0"))


def _settle() -> float:
    """How recent a write is still settling (MEMSYNC_SETTLE), read when a run starts."""
    return float(os.environ.get("MEMSYNC_SETTLE", "0.5"))


Say = Callable[[str], None]


@dataclass(frozen=True)
class Resolved(RunOptions):
    """A run's options (run/options.py) with what `execute` made of them."""

    user: runas.RunAs | None = None
    generated_id: bool = False  # the run id is memsync's (its clock is then checked: runclock.py)


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
    with sealed.seal(), stop_requests():
        options = Resolved(**{f.name: getattr(o, f.name) for f in fields(o)}, user=user, generated_id=run_id is None)
        return _execute(command, mounts, rid, cwd, say, options)


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
                    report_snapshot(snap, mem, say)
                    m.last_who = who
                    if not o.no_push and pacer.may_push(m.name):  # else it goes with a later push
                        deliver(mem, who, m.outcome, say, quiet_failure=True, trust=trust, live=True)
                        pacer.pushed(m.name)
            return bool(snap.pending)

        def push_deferred() -> None:
            for name in pacer.due():
                m = next(w for w in writable if w.name == name)
                assert m.trust is not None and m.last_who is not None
                try:
                    with m.mem.locked():
                        deliver(m.mem, m.last_who, m.outcome, say, quiet_failure=True, trust=m.trust,
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
            undo_read_only(mounted, say)
            failed = CommandFailedToStart(command[0], exc)
            # Recorded all the same: exit 127 on the hub says why the run did nothing.
            finish_run(RunReport(rid, command, failed.exit_code, time.monotonic() - started,
                              [m.outcome for m in mounted]), writable, o.no_push, say)
            raise failed from exc
        with Signals(proc, stop_grace()) as signals:  # until the final push is done or given up
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
            undo_read_only(mounted, say)
            finish_run(report, writable, o.no_push, say, signals)
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
