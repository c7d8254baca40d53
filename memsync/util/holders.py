"""Who may still hold a lock, judged by what no clock can fake.

A process is named by its pid, its start time in clock ticks since boot (/proc/PID/stat, field 22)
and the machine's boot id: a pid reused after the holder died, or the same pid after a reboot, is
another process. Whether a git lock file may still be held is judged from the processes that
could hold it: one that has the file open (libgit2 keeps it open while it writes), or a `git`
program working in that repository (`git commit` keeps index.lock closed while its editor is
open). Nothing here compares a clock with a file's time.

Linux only (/proc); elsewhere nothing can be told and every holder counts as possibly alive.
Processes of other users that /proc does not show are not seen.
"""

from __future__ import annotations

import functools
import os
import socket
from collections.abc import Iterator, Sequence
from pathlib import Path

from memsync.util.records import recordclass

_PROC = Path("/proc")


@recordclass(frozen=True)
class ProcessIdentity:
    pid: int
    host: str
    boot: str | None = None  # the machine's boot id
    started: str | None = None  # start time in clock ticks since that boot

    def fields(self) -> list[str]:
        return [str(self.pid), self.host, self.boot or "-", self.started or "-"]


def boot_id() -> str | None:
    return _boot_id()


@functools.cache
def _boot_id() -> str | None:
    try:
        return (_PROC / "sys" / "kernel" / "random" / "boot_id").read_text(encoding="ascii").strip() or None
    except OSError:
        return None


def process_started(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (None: no such process, or no /proc)."""
    try:
        stat = (_PROC / str(pid) / "stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()
    return fields[19] if len(fields) > 19 else None  # field 22 of the whole line


def started_at(ticks: str | None) -> float | None:
    """A start time in clock ticks since boot (process_started) as seconds since the epoch, by
    this boot's time in /proc/stat (None: not known here)."""
    if ticks is None or not ticks.isdigit():
        return None
    try:
        with open(_PROC / "stat", encoding="ascii", errors="replace") as fh:
            btime = next((int(line.split()[1]) for line in fh if line.startswith("btime ")), None)
        hertz = os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None
    return None if btime is None or hertz <= 0 else btime + int(ticks) / hertz


def current() -> ProcessIdentity:
    return ProcessIdentity(os.getpid(), socket.gethostname(), boot_id(), process_started(os.getpid()))


def may_be_alive(who: ProcessIdentity) -> bool:
    """False only when this machine can tell that `who` is gone: it ran here (same host and boot
    id) and its pid is free or now names a process started at another time."""
    if who.host != socket.gethostname():
        return True  # another machine's process: nothing here can tell
    here = boot_id()
    if who.boot is not None and here is not None and who.boot != here:
        return False  # it ran before this machine last booted
    try:
        os.kill(who.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # alive, another user's
    if who.started is None:
        return True
    now = process_started(who.pid)
    return now is None or now == who.started


def _pids() -> list[str]:
    try:
        return [entry for entry in os.listdir(_PROC) if entry.isdigit() and int(entry) != os.getpid()]
    except OSError:
        return []


def open_elsewhere(path: Path) -> int | None:
    """The pid of another live process that has `path` open, if any (None where /proc cannot tell)."""
    try:
        target = str(path.resolve())
    except OSError:
        return None
    for pid in _pids():
        try:
            fds = os.listdir(_PROC / pid / "fd")
        except OSError:
            continue  # gone, or another user's
        for fd in fds:
            try:
                if os.readlink(_PROC / pid / "fd" / fd) == target:
                    return int(pid)
            except OSError:
                continue
    return None


def git_working_in(places: Sequence[Path]) -> int | None:
    """The pid of a running `git` program (git or a git-* helper) working in one of `places` (a
    repository's git directory and work tree): its current directory is there, or its command
    line or GIT_DIR / GIT_WORK_TREE / GIT_INDEX_FILE names a path there. Such a process may hold
    any of that repository's lock files, even closed ones."""
    roots = [_resolved(p) for p in places]
    for pid in _pids():
        base = _PROC / pid
        try:
            exe = os.path.basename(os.readlink(base / "exe")).removesuffix(" (deleted)")
        except OSError:
            continue  # gone, a kernel thread, or another user's process
        if exe != "git" and not exe.startswith("git-"):
            continue
        try:
            cwd = os.readlink(base / "cwd")
        except OSError:
            continue
        if any(_inside(cwd, root) for root in roots):
            return int(pid)
        if any(_inside(os.path.join(cwd, named), root) for named in _named_paths(base) for root in roots):
            return int(pid)
    return None


def _named_paths(base: Path) -> Iterator[str]:
    """Paths a git process was told about: its arguments (`--git-dir=X` too) and git's variables."""
    try:
        args = (base / "cmdline").read_bytes().split(b"\0")
    except OSError:
        args = []
    for arg in args[1:]:
        text = os.fsdecode(arg)
        yield text.split("=", 1)[1] if text.startswith("--") and "=" in text else text
    try:
        environ = (base / "environ").read_bytes().split(b"\0")
    except OSError:
        return
    for entry in environ:
        name, _, value = os.fsdecode(entry).partition("=")
        if name in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR") and value:
            yield value


def _resolved(path: Path) -> str:
    try:
        return os.path.realpath(path)
    except OSError:
        return os.path.abspath(path)


def _inside(path: str, root: str) -> bool:
    if not path:
        return False
    full = os.path.realpath(path) if os.path.isabs(path) else os.path.abspath(path)
    return full == root or full.startswith(root.rstrip("/") + "/")


__all__ = ["ProcessIdentity", "boot_id", "current", "git_working_in", "may_be_alive", "open_elsewhere",
           "process_started"]
