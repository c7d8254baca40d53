"""The processes a run's command started, found again by what no pid reuse can fake.

A run starts its command in a process group of its own (so a signal reaches all of it, and what
it leaves behind can be told from the caller's processes) and asks the kernel to kill the command
if memsync dies (PR_SET_PDEATHSIG, set in the child after its user and group are set, since a
change of credentials clears it). The parent-death signal follows the *thread* that forked: the
run forks from the thread that then waits for the command, so it fires only if memsync dies
while the command runs. It reaches the command itself, not what the command started: those are
found again, by anyone, from the run's mark (core/memory.py), as

* the processes of the command's process group that started no earlier than its leader (a group
  id is not reused while any process of the group lives; the leader's start time, in clock ticks
  since boot, tells a reused one), and
* any process started after memsync whose environment holds MEMSYNC_RUN_ID=<the run's id> (and
  the run's MEMSYNC_MEMORY_DIR, so another run given the same --run-id is left alone): a
  process that left the group (setsid, a daemon's double fork) keeps its environment.

Linux only (/proc); elsewhere nothing is found and a dead run's leftovers count as ended. A
process of another user that /proc does not show is not seen (root sees all, so --as-user runs
are covered); one that both leaves the group and scrubs its environment is not found either.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

from memsync.util.records import recordclass

__all__ = ["Agent", "child_setup", "end", "end_user", "of_user", "survivors", "take_terminal"]

_PROC = Path("/proc")
_PR_SET_PDEATHSIG = 1


@recordclass(frozen=True)
class Agent:
    """What a run's mark records of its command: enough to find its processes again."""

    run_id: str
    pgid: int  # the command's process group (the command's pid)
    started: str | None  # the group leader's start time, in clock ticks since boot
    since: str | None  # memsync's own start time: every process of the run started after it
    boot: str | None  # the boot the numbers belong to
    # the command's MEMSYNC_MEMORY_DIR: a process holding the run's id is the run's only with it too
    # (another run given the same --run-id, on another memory, is not this one's)
    memory: str | None = None

    def fields(self) -> dict[str, object]:
        return {"pgid": self.pgid, "started": self.started, "since": self.since, "boot": self.boot,
                "memory": self.memory}

    @classmethod
    def parse(cls, run_id: str, data: object) -> Agent | None:
        if not isinstance(data, dict) or not isinstance(data.get("pgid"), int) or data["pgid"] <= 1:
            return None
        text = {k: data.get(k) if isinstance(data.get(k), str) else None
                for k in ("started", "since", "boot", "memory")}
        return cls(run_id, int(data["pgid"]), text["started"], text["since"], text["boot"], text["memory"])


def _libc_prctl() -> Callable[..., int] | None:
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


def child_setup(terminal: int | None) -> Callable[[], None]:
    """The command's preexec: a process group of its own (setpgid; `process_group=` needs Python
    3.11); the parent-death signal (SIGKILL), checked against a parent that
    died before it was set; and, given the terminal's descriptor, the terminal's foreground
    handed to the command's own group (as a shell does), so Ctrl-C and reading stdin still work.
    Everything it needs is looked up here, in the parent: the child only makes system calls."""
    prctl = _libc_prctl()
    parent = os.getpid()

    def setup() -> None:
        os.setpgid(0, 0)
        if prctl is not None:
            prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            if os.getppid() != parent:  # memsync died before the signal was set
                os.kill(os.getpid(), signal.SIGKILL)
        if terminal is not None:
            with contextlib.suppress(OSError):
                take_terminal(terminal, os.getpgrp())

    return setup


def take_terminal(fd: int, pgid: int) -> None:
    """Make `pgid` the terminal's foreground group; SIGTTOU is held meanwhile, since a process
    of a background group may do this only with it blocked. OSError: not done."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTTOU})
    try:
        os.tcsetpgrp(fd, pgid)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _stat(pid: str) -> tuple[str, int, str] | None:
    """(state, process group, start time) of a process; None if it is gone."""
    try:
        text = (_PROC / pid / "stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    fields = text.rsplit(")", 1)[-1].split()
    if len(fields) < 20:
        return None
    return fields[0], int(fields[2]), fields[19]


def _later(started: str, than: str | None) -> bool:
    try:
        return than is None or int(started) >= int(than)
    except ValueError:
        return True


def _holds_run_id(pid: str, markers: list[bytes]) -> bool:
    try:
        environment = (_PROC / pid / "environ").read_bytes().split(b"\0")
    except OSError:
        return False
    return all(marker in environment for marker in markers)


def survivors(agent: Agent) -> list[int]:
    """The live (not zombie) processes of the run's command, this process aside."""
    from memsync.util.holders import boot_id

    here = boot_id()
    if agent.boot is not None and here is not None and agent.boot != here:
        return []  # a run of an earlier boot: nothing of it lives
    markers = [f"MEMSYNC_RUN_ID={agent.run_id}".encode()]
    if agent.memory is not None:
        markers.append(f"MEMSYNC_MEMORY_DIR={agent.memory}".encode())
    found: list[int] = []
    me = os.getpid()
    try:
        pids = [p for p in os.listdir(_PROC) if p.isdigit() and int(p) != me]
    except OSError:
        return []
    for pid in pids:
        info = _stat(pid)
        if info is None or info[0] in ("Z", "X"):
            continue
        _state, pgrp, started = info
        in_group = pgrp == agent.pgid and _later(started, agent.started)
        if in_group or (_later(started, agent.since) and _holds_run_id(pid, markers)):
            found.append(int(pid))
    return sorted(found)


def end(agent: Agent, grace: float = 2.0, within: float = 5.0, found: list[int] | None = None) -> list[int]:
    """End what is left of the run's command: SIGTERM, then SIGKILL after `grace` seconds, and
    wait (up to `within` more) until none is left; returns those still there (stuck in the kernel,
    or another user's that this process may not signal). `found`: `survivors(agent)` just read."""
    left = survivors(agent) if found is None else found
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, within)):
        if not left:
            return []
        for pid in left:
            with contextlib.suppress(OSError):
                os.kill(pid, sig)
        deadline = time.monotonic() + wait
        while left and time.monotonic() < deadline:
            time.sleep(0.02)
            left = survivors(agent)
    return left


_GONE_WITHIN = 5.0


def end_user(uid: int, gid: int) -> list[int]:
    """End every process of the uid (SIGKILL), and wait until none is left; returns those
    still there after the wait (a process stuck in the kernel). Called before memsync touches a
    tree the user could write (the pre-run save, the hand-back, the final snapshot): a process the
    command left running could otherwise swap folders for symlinks while memsync works. The kill
    is sent by a process running as that user, `kill(-1, SIGKILL)`: the kernel signals every
    process of the uid at once, so none can escape by forking. This is why --as-user wants a user
    of its own, not one other programs run as."""
    deadline = time.monotonic() + _GONE_WITHIN
    left = of_user(uid)
    while left:
        _kill_all_as(uid, gid)
        left = of_user(uid)
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.02)  # SIGKILL is delivered asynchronously; zombies are reaped by their parent
    return left


def _kill_all_as(uid: int, gid: int) -> None:
    """kill(-1, SIGKILL) from a child that has become that user (no program to exec: the user may be
    unable to run memsync's Python). The child only makes system calls and leaves with _exit."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads: the child execs nothing
        pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.setgroups([])
            os.setgid(gid)
            os.setuid(uid)
            if os.getuid() == uid != 0:
                code = 0
                with contextlib.suppress(ProcessLookupError):
                    os.kill(-1, 9)
        finally:
            os._exit(code)
    os.waitpid(pid, 0)


def of_user(uid: int) -> list[int]:
    """Live (not zombie) processes whose real, effective or saved uid is `uid`."""
    found: list[int] = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            status = Path(entry.path, "status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        uids = fields.get("Uid", "").split()
        if str(uid) in uids[:3] and not fields.get("State", "").strip().startswith(("Z", "X")):
            found.append(int(entry.name))
    return found
