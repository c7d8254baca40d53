"""Hand a command to a resident `memsync serve` instead of starting the work here.

Imported by the entry point before anything heavy: only `_socket` and what the interpreter has
loaded anyway (a served command's client is a fresh interpreter each time, so every module it
imports is paid for on every command: no contextlib, struct or signal here). When
`MEMSYNC_SERVER` names a socket of `memsync serve` run by the same user, the command line, the
working directory (as a descriptor), the umask, the environment and stdin/stdout/stderr (as
descriptors) go to the server, which forks a worker that already has typer, pygit2 and memsync
imported. The worker runs the command exactly as this process would have, on the caller's own
terminal or pipes, and sends back its exit code. Signals this process receives (Ctrl-C, SIGTERM,
SIGHUP) are passed on to the worker.

Anything short of a worker that has started (no server, a stale socket, another user's socket,
another memsync version, a server that went away) means the command runs here as it always did:
the server is an accelerator, never a dependency. A worker starts the command only when the
client, having heard from it, says go; from then on the worker's result is the command's result,
so a command is never run twice (a client that timed out never said go).
"""

from __future__ import annotations

import _socket
import os
import sys

__all__ = ["GO", "PROTOCOL", "decode", "encode", "served", "wanted"]

PROTOCOL = b"memsync-serve/1"
GO = b"g"
MAX_REQUEST = 8 << 20  # an environment plus a command line; anything bigger is not a request


def encode(fields: list[bytes]) -> bytes:
    """Length-prefixed fields: no parser, no escaping, exact bytes (argv and environment keep
    whatever bytes the caller had)."""
    body = b"".join(len(f).to_bytes(4, "big") + f for f in fields)
    return len(body).to_bytes(4, "big") + body


def decode(body: bytes) -> list[bytes]:
    fields, at = [], 0
    while at < len(body):
        if at + 4 > len(body):
            raise ValueError("truncated field length")
        n = int.from_bytes(body[at:at + 4], "big")
        at += 4
        if at + n > len(body):
            raise ValueError("truncated field")
        fields.append(body[at:at + n])
        at += n
    return fields


def recv_exact(sock: _socket.socket, n: int) -> bytes:
    chunks, got = [], 0
    while got < n:
        chunk = sock.recv(n - got)
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def wanted(argv: list[str]) -> bool:
    """Whether this command line may go to a server at all. `serve` itself, shell completion and
    a `run` on a terminal stay here: the worker has no controlling terminal, and a command an
    agent runs at a terminal needs one (job control, Ctrl-C reaching it, /dev/tty)."""
    if not os.environ.get("MEMSYNC_SERVER") or os.environ.get("_MEMSYNC_COMPLETE"):
        return False
    verb = next((w for w in argv if not w.startswith("-")), "")
    if verb == "serve":
        return False
    if verb in ("run", "watch", "mcp"):
        return not any(_isatty(fd) for fd in (0, 1, 2))
    return True


def _isatty(fd: int) -> bool:
    try:
        return os.isatty(fd)
    except OSError:
        return False


def _request(argv: list[str], version: str) -> list[bytes]:
    streams = []
    for stream in (sys.stdin, sys.stdout, sys.stderr):
        streams += [(getattr(stream, "encoding", None) or "utf-8").encode(),
                    (getattr(stream, "errors", None) or "strict").encode()]
    umask = os.umask(0o22)
    os.umask(umask)
    env = [k + b"=" + v for k, v in os.environb.items()]
    return [PROTOCOL, version.encode(), str(umask).encode(), *streams,
            str(len(argv)).encode(), *(os.fsencode(a) for a in argv), *env]


def _connect(path: str) -> _socket.socket | None:
    """The server's socket, only if it is ours: owned by this uid (not a symlink), and the process
    listening on it runs as this uid (SO_PEERCRED). The environment, credentials included, is
    handed over only then."""
    if not hasattr(_socket, "SO_PEERCRED") or not hasattr(_socket, "AF_UNIX"):
        return None
    try:
        st = os.lstat(path)
    except OSError:
        return None
    import stat

    if not stat.S_ISSOCK(st.st_mode) or st.st_uid != os.getuid():
        return None
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.settimeout(5.0)
        sock.connect(path)
        uid = int.from_bytes(sock.getsockopt(_socket.SOL_SOCKET, _socket.SO_PEERCRED, 12)[4:8], sys.byteorder)
        if uid != os.getuid():  # struct ucred: pid, uid, gid
            sock.close()
            return None
        return sock
    except OSError:
        sock.close()
        return None


def _seal_for_run(argv: list[str]) -> None:
    """A `run` handed over still starts an agent that runs as this user: this process holds the
    caller's environment (credentials included), so it gets what `run` does to itself in-process:
    non-dumpable, and the credentials wiped from its initial environment block (the copy sent to
    the server is taken before)."""
    if next((w for w in argv if not w.startswith("-")), "") not in ("run", "mcp", "watch"):
        return
    from memsync.util import sealed

    sealed.make_undumpable()
    for name in sealed.CREDENTIAL_VARS:
        if name in os.environ:
            sealed.wipe_initial_copy(name)
    remote = os.environ.get("MEMSYNC_REMOTE")
    if remote and sealed.strip_userinfo(remote) != remote:
        sealed.wipe_initial_copy("MEMSYNC_REMOTE")


def served(argv: list[str], version: str) -> int | None:
    """Run the command through the server named by MEMSYNC_SERVER: its exit code, or None when
    there is no usable server and nothing was started (the caller then runs it here)."""
    sock = _connect(os.environ.get("MEMSYNC_SERVER", ""))
    if sock is None:
        return None
    try:
        cwd = os.open(".", os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        sock.close()
        return None
    try:
        message = encode(_request(argv, version))
        fds = b"".join(fd.to_bytes(4, sys.byteorder) for fd in (cwd, 0, 1, 2))
        sock.sendmsg([message[:4096]], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, fds)])
        if len(message) > 4096:
            sock.sendall(message[4096:])
        _seal_for_run(argv)  # while the server finds a worker
        reply = decode(recv_exact(sock, int.from_bytes(recv_exact(sock, 4), "big")))
    except (OSError, EOFError, ValueError):
        sock.close()
        return None  # nothing was started
    finally:
        os.close(cwd)
    if not reply or reply[0] != b"pid":
        sock.close()
        return None  # the server declined (another version, stale code): run it here
    worker = int(reply[1])
    try:
        sock.sendall(GO)  # the worker starts only now: a client that gave up above never has it run
    except OSError:
        sock.close()
        return None
    return _wait(sock, worker)


_INTERRUPTED = 130  # errors.EXIT_INTERRUPTED (not imported: the client stays lean)


def _wait(sock: _socket.socket, worker: int) -> int:
    import _signal  # type: ignore[import-not-found]  # not `signal`: its enums cost more than this whole client

    def forward(signum: int, _frame: object) -> None:
        try:
            os.kill(worker, signum)
        except OSError:  # the worker has ended already
            return

    for signum in (_signal.SIGINT, _signal.SIGTERM, _signal.SIGHUP, _signal.SIGQUIT):
        _signal.signal(signum, forward)
    sock.settimeout(None)
    try:  # a forwarded signal interrupts nothing: recv resumes after the handler (PEP 475)
        reply = decode(recv_exact(sock, int.from_bytes(recv_exact(sock, 4), "big")))
    except (OSError, EOFError, ValueError):  # killed (kill -9, an OOM kill): stopped from outside, not a bug
        sys.stderr.write(f"error: interrupted: the memsync server's worker (pid {worker}) ended before the "
                         "command finished (killed?); nothing half-done is kept, the next command recovers\n"
                         "hint: run the command again; the server's output may say why it ended; unset "
                         "MEMSYNC_SERVER to run commands in-process\n")
        return _INTERRUPTED
    finally:
        sock.close()
    if len(reply) == 2 and reply[0] == b"exit":
        return int(reply[1])
    return 1
