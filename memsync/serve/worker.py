"""A `memsync serve` worker: a process forked from the server that runs one command, then exits.

The server keeps one worker forked ahead of the next client (a spare): it has already closed the
server's descriptors, holds its own line to the trackers (tracklink.py), and waits on a socket pair
for the server to pass it a client's connection. The fork (of a process with pygit2 and typer
loaded; docs/PERFORMANCE.md) is then off the client's path. When there is no spare (two clients at
once, or the spare has died), the server forks a worker for the client as it arrives. Either way a
worker serves exactly one client and has seen nothing of any command before it: the server, which
it is a copy of, never runs one.

With a client: its request (handoff.py) arrives, the worker answers with its pid and becomes the
caller (working directory, umask, environment, standard streams) while the client answers; the
command starts only when the client says go. A worker whose client gave up exits without running
anything, having written nothing.
"""

from __future__ import annotations

import atexit
import contextlib
import io
import os
import signal
import socket
import struct
import sys
from collections.abc import Callable
from typing import NoReturn

from memsync import __version__
from memsync.serve import handoff
from memsync.serve.tracklink import Link

__all__ = ["Spare", "fork_for", "fork_spare"]

_FDS = 4  # the working directory, stdin, stdout, stderr


class Spare:
    """The server's end of a spare worker: a socket pair on which it is handed its client."""

    def __init__(self, control: socket.socket) -> None:
        self.control = control

    def hand(self, conn: socket.socket) -> bool:
        """Pass `conn` to the spare, which from then on is that client's worker. False: it cannot
        take it (it has died); the caller forks a worker instead."""
        try:
            self.control.sendmsg([b"c"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("i", conn.fileno()))])
        except OSError:
            return False
        finally:
            self.close()
        return True

    def close(self) -> None:
        """Also what stops an unused spare: it exits when its end of the pair reads end-of-file."""
        self.control.close()


def fork_spare(line: socket.socket, in_child: Callable[[], None]) -> Spare:
    """A worker forked now for the next client. `line` is its end of a tracker line; `in_child`
    closes the server's descriptors in the new process. OSError: no fork."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        pid = os.fork()
    except OSError:
        ours.close()
        theirs.close()
        raise
    if pid == 0:
        _child(lambda: _await_client(theirs), line, [ours], in_child)
    theirs.close()
    return Spare(ours)


def fork_for(conn: socket.socket, line: socket.socket, in_child: Callable[[], None]) -> None:
    """A worker forked for a client that has arrived (no spare was ready). OSError: no fork."""
    if os.fork() == 0:
        _child(lambda: conn, line, [], in_child)


def _child(client: Callable[[], socket.socket], line: socket.socket, drop: list[socket.socket],
           in_child: Callable[[], None]) -> NoReturn:
    """In a new worker: the server's descriptors closed, its own session and line, default signals;
    then its client, and exit. Nothing raised here reaches the server's code that forked it."""
    try:
        for sock in drop:
            sock.close()
        in_child()
        from memsync.git import hints

        hints.source = Link(line)
        os.setsid()  # out of the server's session: only the client's forwarded signals arrive
        for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD):
            signal.signal(signum, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        conn = client()
    except BaseException:
        os._exit(1)
    _serve(conn)


def _await_client(control: socket.socket) -> socket.socket:
    """A spare's wait for its client's connection (close-on-exec at once: an agent a `run` starts
    never inherits it). End-of-file: the server has stopped, restarted or gone; exit."""
    _data, ancillary, _flags, _addr = control.recvmsg(1, socket.CMSG_SPACE(4), socket.MSG_CMSG_CLOEXEC)
    fds = _descriptors(ancillary)
    control.close()
    if len(fds) != 1:
        os._exit(0)
    return socket.socket(fileno=fds[0])


def _descriptors(ancillary: list[tuple[int, int, bytes]]) -> list[int]:
    fds: list[int] = []
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            usable = len(payload) - len(payload) % 4
            fds += list(struct.unpack(f"{usable // 4}i", payload[:usable]))
    return fds


def _serve(conn: socket.socket) -> NoReturn:
    code = 1
    try:
        try:
            fields, fds = _receive(conn)
        except (OSError, EOFError, ValueError):
            os._exit(1)
        if len(fds) != _FDS or len(fields) < 9 or fields[0] != handoff.PROTOCOL:
            _reply(conn, b"declined", b"not a request")
            os._exit(1)
        if fields[1].decode() != __version__:
            _reply(conn, b"declined", b"another memsync version")
            os._exit(1)
        _reply(conn, b"pid", str(os.getpid()).encode())
        argv = _take_over(fields, fds)  # while the client answers: nothing runs, nothing is written yet
        if handoff.recv_exact(conn, len(handoff.GO)) != handoff.GO:  # the client gave up: do nothing
            os._exit(1)
        code = _run(argv)
    except BaseException:
        code = 1
    finally:
        with contextlib.suppress(BaseException):
            _reply(conn, b"exit", str(code).encode())
        os._exit(code)


def _reply(conn: socket.socket, *fields: bytes) -> None:
    conn.sendall(handoff.encode(list(fields)))


def _receive(conn: socket.socket) -> tuple[list[bytes], list[int]]:
    conn.settimeout(10.0)
    data, ancillary, _flags, _addr = conn.recvmsg(4096, socket.CMSG_SPACE(_FDS * 4))
    fds = _descriptors(ancillary)
    if len(data) < 4:
        data += handoff.recv_exact(conn, 4 - len(data))
    (n,) = struct.unpack("!I", data[:4])
    if n > handoff.MAX_REQUEST:
        raise ValueError("request too large")
    body = data[4:]
    if len(body) < n:
        body += handoff.recv_exact(conn, n - len(body))
    return handoff.decode(body), fds
def _take_over(fields: list[bytes], fds: list[int]) -> list[str]:
    """Become the caller: its directory, umask, environment and standard streams."""
    cwd, *streams = fds
    os.fchdir(cwd)
    os.close(cwd)
    os.umask(int(fields[2]))
    encodings = [(fields[3 + 2 * i].decode(), fields[4 + 2 * i].decode()) for i in range(3)]
    count = int(fields[9])
    argv = [os.fsdecode(a) for a in fields[10:10 + count]]
    os.environb.clear()
    for item in fields[10 + count:]:
        key, sep, value = item.partition(b"=")
        if sep and key:
            os.environb[key] = value
    for target, fd in enumerate(streams):
        os.dup2(fd, target)
        os.close(fd)
    sys.stdin = _stream(0, "r", *encodings[0])
    sys.stdout = _stream(1, "w", *encodings[1])
    sys.stderr = _stream(2, "w", *encodings[2], line_buffering=True)
    for name in ("stdin", "stdout", "stderr"):  # what a library falls back to, the same streams
        setattr(sys, f"__{name}__", getattr(sys, name))
    sys.argv = ["memsync", *argv]
    from memsync.git import engine, transport

    engine.find_configuration_again()

    transport.apply_timeouts()
    return argv


def _stream(fd: int, mode: str, encoding: str, errors: str, line_buffering: bool = False) -> io.TextIOWrapper:
    interactive = False
    with contextlib.suppress(OSError):
        interactive = os.isatty(fd)
    raw = io.FileIO(fd, mode, closefd=False)
    buffered: io.BufferedReader | io.BufferedWriter = io.BufferedReader(raw) if mode == "r" else io.BufferedWriter(raw)
    return io.TextIOWrapper(buffered, encoding=encoding, errors=errors,
                            line_buffering=line_buffering or interactive)


def _run(argv: list[str]) -> int:
    from memsync.cli.app import main

    try:
        code = main(argv)
    except KeyboardInterrupt:
        sys.stderr.write("error: interrupted\n")
        code = 130
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    with contextlib.suppress(Exception):
        atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    return code
