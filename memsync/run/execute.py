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
from memsync.core.memory import Memory, running
from memsync.errors import (
    Interrupted,
    MemsyncError,
    UsageError,
)
from memsync.git import hub as hubmod
from memsync.run.finish import finish_run
from memsync.run.mounts import Mount, parse_mount, prepare
from memsync.run.options import DEFAULT_CHECKPOINT, RunOptions
from memsync.run.outcome import MemoryOutcome, Mounted, RunReport
from memsync.run.record import RunTrust
from memsync.run.session import RunSession, end_processes
from memsync.run.stopping import Signals, stop_grace, stop_requests
from memsync.util import processes, sealed
from memsync.util.names import check_run_id, env_var_for, new_run_id
from memsync.util.records import fields, recordclass

if TYPE_CHECKING:  # and imported where used: a plain run has no read-only memory, --as-user or conflict
    from memsync.run import runas


Say = Callable[[str], None]


@recordclass(frozen=True)
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
    if remote:  # no credential on the command line (the command's own can read it too); a user name is one
        hubmod.from_flag(remote, name=hubmod.TEMPLATE_PROBE)
    pacing.resolve(o.max_push_rate, None)  # a bad flag stops the run before anything is pulled
    user = None
    if as_user is not None:
        from memsync.run import runas

        user = runas.resolve(as_user)
        end_processes(user, None, say)  # one a past run left behind must not race the pre-run save
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

            m.protection = readonly.protect(m.mem, rid)
    with running(memories, rid):  # the run owns its memories: watch, push, pull... leave it its files
        shown = shown_command(command)
        say(f"run {rid}: {_plural(len(memories), 'memory', 'memories')} ready; starting {shown}")
        started = time.monotonic()
        session = RunSession(rid, shown, mounted, o, say)
        try:
            session.held.hold()
            proc, agent = _start(command, rid, memories, session.writable, o)
        except OSError as exc:
            session.end()
            failed = CommandFailedToStart(command[0], exc)
            # Recorded all the same: exit 127 on the hub says why the run did nothing.
            finish_run(RunReport(rid, command, failed.exit_code, time.monotonic() - started,
                                 [m.outcome for m in mounted]), session.writable, o.no_push, say)
            raise failed from exc
        with Signals(proc, stop_grace()) as signals:  # until the final push is done or given up
            code = _wait(proc)
            signals.command_exited()
            _terminal_back()
            session.end(agent)
            if signals.received:
                say("command stopped by signal; saving what it left")
            report = RunReport(rid, command, code, time.monotonic() - started, [m.outcome for m in mounted])
            finish_run(report, session.writable, o.no_push, say, signals)
            if not o.propose:
                from memsync.run.proposed import propose_reviewed

                propose_reviewed(session.writable, rid, say, push=not o.no_push)
            return report


def _start(command: list[str], rid: str, memories: list[Memory], writable: list[Mounted],
           o: Resolved) -> tuple[subprocess.Popen[bytes], processes.Agent]:
    """Lend the tree (--as-user) and start the command, each step recorded in the run's mark first."""
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
    return proc, agent


def _wait(proc: subprocess.Popen[bytes]) -> int:
    while True:
        try:
            code = proc.wait()
            break
        except (KeyboardInterrupt, Interrupted):
            continue
    return 128 - code if code < 0 else code


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
    return proc, processes.Agent(rid, proc.pid, process_started(proc.pid), process_started(os.getpid()), boot_id(),
                                 env.get("MEMSYNC_MEMORY_DIR"))


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
