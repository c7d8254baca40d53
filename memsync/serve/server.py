"""`memsync serve`: a resident process that runs memsync commands without start-up cost.

Every memsync command pays a start-up cost before any work (docs/PERFORMANCE.md): the interpreter,
typer, pygit2 and memsync's own modules. The server pays it once. It imports everything a command
may need and then waits on a Unix socket; each client (see handoff.py) gets a worker (worker.py), a
copy of the server with all of that already loaded, which takes on the caller's working directory,
umask, environment and stdin/stdout/stderr and runs the command line exactly as `memsync` would,
then reports the exit code. One worker is forked ahead of the next client (once no client has come
for _SPARE_AFTER) and handed its connection, so the fork is off the client's path. A fork is a
fresh process per command: nothing of one command (open repositories, locks, caches, globals, the
environment) reaches the next, and concurrent commands run in parallel as separate processes do.

The server itself never opens a repository, so each fork starts clean. It does keep a watchdog
observer on each memory its workers scan (tracker.py), and answers their questions about what
changed on a socket pair per worker (tracklink.py), so that a scan can look at those paths only
(git/hints.py). The observers' threads are the server's only ones, and a fork copies none of
them: a worker lets the trackers go without touching their threads or locks and closes the
inotify descriptors it inherited (Trackers.abandon). They block the stop signals (started under
util/threads.stops_blocked), so a SIGTERM sent to the server reaches the main thread's select()
and stops it at once. Only
the same user reaches it: the socket is mode 0600 and every peer's uid is checked
(SO_PEERCRED). When memsync's code on disk changes (an upgrade), the server declines the request
(the client then runs it in-process) and starts itself again with the new code.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import os
import selectors
import signal
import socket
import stat
import struct
import sys
import time
from collections.abc import Callable
from pathlib import Path

from memsync.errors import LockBusy, UsageError
from memsync.serve import handoff
from memsync.serve.tracker import Trackers
from memsync.serve.tracklink import Lines
from memsync.serve.worker import Spare, fork_for, fork_spare

_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)

__all__ = ["PRELOAD", "serve"]

# What a command may import: loaded once, before the first fork, so no worker pays for it (the
# verbs' own modules come with cli.prepare()).
PRELOAD = (
    "pygit2", "yaml", "memsync.cli.app", "memsync.sync.storage", "memsync.sync.exchange",
    "memsync.run.execute", "memsync.history.forensics", "memsync.history.log", "memsync.sync.listing",
    "memsync.live.watch", "memsync.live.changes", "memsync.core.maintenance", "memsync.sync.gc",
    "memsync.checks.guard", "memsync.checks.protect", "memsync.checks.secrets", "memsync.run.record",
    "memsync.core.readonly",
    "memsync.history.redact", "memsync.core.snapshot", "memsync.git.transport", "memsync.git.credentials",
    "memsync.git.hostkeys", "memsync.git.hubtree", "rich.console", "rich.progress", "rich.table",
)
_SOCKET_MAX = 107  # sun_path, less its NUL
# A new spare worker is forked once no client has arrived for this long: not while the worker just
# started is busy, which the fork and the spare's first steps would slow down (2 cores, measured).
_SPARE_AFTER = 0.03


def preload() -> None:
    for name in PRELOAD:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    from memsync.cli import app as cli

    cli.prepare()


def _loaded_files() -> dict[str, int]:
    """memsync's loaded modules and their mtimes: a change means an upgrade under the server."""
    root = Path(__file__).parent.parent  # the whole package, not just serve/
    stamps: dict[str, int] = {}
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if path and path.startswith(str(root)):
            with contextlib.suppress(OSError):
                stamps[path] = os.stat(path).st_mtime_ns
    return stamps


def _stale(stamps: dict[str, int]) -> bool:
    for path, mtime in stamps.items():
        try:
            if os.stat(path).st_mtime_ns != mtime:
                return True
        except OSError:
            return True
    return False


def _peer_uid(conn: socket.socket) -> int:
    _pid, uid, _gid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
    return int(uid)


def _reply(conn: socket.socket, *fields: bytes) -> None:
    conn.sendall(handoff.encode(list(fields)))


def bind(path: Path) -> socket.socket:
    """The listening socket at `path`, mode 0600. A live server there is an error; a dead one's
    socket is replaced; anything that is not a socket is left alone."""
    text = os.fsencode(path)
    if len(text) > _SOCKET_MAX:
        raise UsageError(f"the socket path is {len(text)} bytes; Unix sockets allow {_SOCKET_MAX}",
                         "pass a shorter --socket, e.g. under /run/user/$UID or /tmp")
    with contextlib.suppress(FileNotFoundError):
        st = os.lstat(path)
        if not stat.S_ISSOCK(st.st_mode):
            raise UsageError(f"{path} exists and is not a socket", "pass another --socket path")
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.connect(str(path))
        except OSError:
            path.unlink()  # nobody listens: a server that was killed
        else:
            raise LockBusy(f"a memsync server already listens on {path}",
                            "stop it first, or pass another --socket path")
        finally:
            probe.close()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)
    try:
        listener.bind(str(path))
    except OSError as exc:
        listener.close()
        raise UsageError(f"cannot listen on {path}: {exc.strerror}", "pass another --socket path") from exc
    finally:
        os.umask(old)
    listener.listen(128)
    return listener


def _seal_self() -> None:
    """The server keeps no credential of its own: each worker gets its caller's environment. The
    ones it was started with are dropped (and wiped from /proc/PID/environ), and the process is
    made non-dumpable, which its workers inherit, as an in-process `run` makes itself."""
    from memsync.util import sealed

    sealed.make_undumpable()
    for name in (*sealed.CREDENTIAL_VARS, "MEMSYNC_REMOTE", "MEMSYNC_SERVER"):
        if name in os.environ:
            sealed.wipe_initial_copy(name)
            del os.environ[name]


def serve(path: Path, idle: float, say: Callable[[str], None], *, track: bool = True) -> int:
    """Accept clients until SIGTERM/SIGINT/SIGHUP (or `idle` seconds without one, when > 0).
    `track=False`: no change trackers, every scan a full one."""
    preload()
    gc.collect()
    gc.freeze()  # what is loaded stays out of the workers' collections: fewer copy-on-write pages
    stamps = _loaded_files()
    listener = bind(path)
    _seal_self()
    stopping: list[int] = []

    def stop(signum: int, _frame: object) -> None:
        stopping.append(signum)
        raise _Stop

    # a stop signal waits (blocked) until the loop below can take it: one that comes during the
    # set-up, or while the server restarted (held blocked across the exec), lands in the `try`
    signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
    for signum in _STOP_SIGNALS:
        signal.signal(signum, stop)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # workers are reaped by the kernel
    say(f"serving on {path} (pid {os.getpid()}); commands use it when MEMSYNC_SERVER={path}")
    restart = False
    trackers = Trackers(enabled=track)
    lines = Lines(trackers)
    selector = selectors.DefaultSelector()
    listener.setblocking(False)
    selector.register(listener, selectors.EVENT_READ)
    workers = _Workers(listener, selector, trackers, lines)
    last = time.monotonic()
    spare_due = last  # the first spare at once
    try:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)
        while True:
            now = time.monotonic()
            if now >= spare_due and not workers.replenish():
                spare_due = now + 1.0  # no fork (EAGAIN): again later, not in a busy loop
            _watch(selector, lines)
            wait = [idle - (now - last)] if idle > 0 else []
            if workers.spare is None:
                wait.append(spare_due - now)
            ready = selector.select(max(0.0, min(wait)) if wait else None)
            if not ready and idle > 0 and time.monotonic() - last >= idle:
                say(f"no command for {idle:g} s; stopping")
                break
            for key, _events in ready:
                if key.fileobj is listener:
                    last = time.monotonic()
                    spare_due = last + _SPARE_AFTER
                    if not _accept(listener, stamps, workers):
                        # from here a stop signal waits (blocked; kept pending across the exec, where
                        # the new server unblocks it and stops): it is never lost to the restart
                        signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
                        restart = True
                        break
                elif isinstance(key.fileobj, socket.socket) and not lines.readable(key.fileobj):
                    selector.unregister(key.fileobj)
                    lines.close(key.fileobj)
            if restart:
                break
    except _Stop:
        say(f"stopping ({signal.Signals(stopping[-1]).name})")
    finally:
        workers.close()
        selector.close()
        lines.close_all()
        trackers.close()
        listener.close()
        with contextlib.suppress(OSError):
            path.unlink()
    if restart and not stopping:
        say("memsync's code changed on disk; starting again with it")
        sys.stdout.flush()
        sys.stderr.flush()
        from memsync.util.selfcmd import memsync_command

        os.execv(sys.executable, memsync_command(*sys.argv[1:]))  # not the working directory's code
    return 0


def _accept(listener: socket.socket, stamps: dict[str, int], workers: _Workers) -> bool:
    """One client: a worker for it. False: memsync's code changed, the server must restart."""
    try:
        conn, _ = listener.accept()
    except (BlockingIOError, InterruptedError, ConnectionAbortedError):
        return True
    conn.setblocking(True)
    with conn:
        if _stale(stamps):
            with contextlib.suppress(OSError):  # a client that has gone already
                _reply(conn, b"declined", b"memsync's code changed")
            return False
        with contextlib.suppress(OSError):
            if _peer_uid(conn) != os.getuid():
                return True
            workers.start(conn)
    return True


class _Workers:
    """The server's workers (worker.py): one spare forked ahead of the next client, else one
    forked for the client that has arrived."""

    def __init__(self, listener: socket.socket, selector: selectors.BaseSelector, trackers: Trackers,
                 lines: Lines) -> None:
        self.listener, self.selector, self.trackers, self.lines = listener, selector, trackers, lines
        self.spare: Spare | None = None

    def start(self, conn: socket.socket) -> None:
        spare, self.spare = self.spare, None
        if spare is not None and spare.hand(conn):
            return
        line = self.lines.open()
        try:
            fork_for(conn, line, self._in_child)
        finally:
            line.close()

    def replenish(self) -> bool:
        """A new spare when there is none. False: the fork failed (the next client gets a worker
        of its own)."""
        if self.spare is not None:
            return True
        line = self.lines.open()
        try:
            self.spare = fork_spare(line, self._in_child)
        except OSError:
            return False
        finally:
            line.close()
        return True

    def close(self) -> None:
        if self.spare is not None:
            self.spare.close()
            self.spare = None

    def _in_child(self) -> None:
        """In a new worker: none of the server's descriptors but its own line."""
        with contextlib.suppress(OSError):
            self.selector.close()
        self.trackers.abandon()
        self.lines.close_all()
        self.listener.close()
        self.close()


def _watch(selector: selectors.BaseSelector, lines: Lines) -> None:
    """Keep the selector on every live line."""
    for sock in lines.buffers:
        try:
            selector.get_key(sock)
        except KeyError:
            selector.register(sock, selectors.EVENT_READ)


class _Stop(Exception):
    pass
