"""Real git servers for tests: git daemon, smart HTTP(S), OpenSSH, and misbehaving ports.

Every server listens on 127.0.0.1 only, picks a free port once (by binding port 0)
and keeps it across restart(), so a test can stop a server mid-operation and bring
it back at the same address. stop() kills the server process and every process it
spawned (connection handlers, git-upload-pack, git-receive-pack, http-backend CGIs).

Linux only: process trees are found through /proc.
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import gzip
import io
import os
import pwd
import re
import shlex
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import zlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import IO, TypeVar, Union

HOST = "127.0.0.1"
START_TIMEOUT = 15.0
SSH_KEY_PASSPHRASE = "correct horse"
_PR_SET_CHILD_SUBREAPER = 36

# Config every server-side git process gets (via GIT_CONFIG_COUNT, so no file is needed).
_SERVER_GIT_CONFIG: tuple[tuple[str, str], ...] = (
    ("gc.auto", "0"),
    ("receive.autogc", "false"),
    ("maintenance.auto", "false"),
    ("http.receivepack", "true"),
    ("safe.directory", "*"),
)


_ServerT = TypeVar("_ServerT", bound="_Server")
# Any Popen: text or bytes mode.
AnyPopen = Union["subprocess.Popen[bytes]", "subprocess.Popen[str]"]

# --------------------------------------------------------------------------- helpers


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
        return port


def wait_for_port(port: int, timeout: float = START_TIMEOUT, host: str = HOST) -> None:
    """Block until something accepts TCP connections on host:port (127.0.0.1 by default)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection((host, port), timeout=1.0):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise TimeoutError(f"nothing listening on {host}:{port}") from None
            time.sleep(0.05)


def git_config_env(pairs: Sequence[tuple[str, str]]) -> dict[str, str]:
    """GIT_CONFIG_COUNT/KEY_n/VALUE_n variables that inject config without files."""
    env = {"GIT_CONFIG_COUNT": str(len(pairs))}
    for index, (key, value) in enumerate(pairs):
        env[f"GIT_CONFIG_KEY_{index}"] = key
        env[f"GIT_CONFIG_VALUE_{index}"] = value
    return env


def isolated_git_env(home: Path, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """An environment for running git with no system/user config and no prompts.

    Drops every inherited GIT_* / SSH_* variable, points HOME (and XDG_CONFIG_HOME)
    at ``home`` and sets a fixed author/committer identity.
    """
    source = os.environ if base is None else base
    env = {
        key: value for key, value in source.items() if not key.startswith(("GIT_", "SSH_")) and key != "XDG_CONFIG_HOME"
    }
    home.mkdir(parents=True, exist_ok=True)
    env.update(
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / ".config"),
        GIT_CONFIG_NOSYSTEM="1",
        GIT_TERMINAL_PROMPT="0",
        GIT_AUTHOR_NAME="Test Author",
        GIT_AUTHOR_EMAIL="author@example.invalid",
        GIT_COMMITTER_NAME="Test Committer",
        GIT_COMMITTER_EMAIL="committer@example.invalid",
        LC_ALL="C",
    )
    return env


def _server_env(home: Path) -> dict[str, str]:
    env = isolated_git_env(home)
    env.update(git_config_env(_SERVER_GIT_CONFIG))
    return env


@dataclass(frozen=True)
class _ProcInfo:
    pid: int
    ppid: int
    pgrp: int
    sid: int


def _process_table() -> list[_ProcInfo]:
    table = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        # The command name may contain spaces/parentheses: split after the last ')'.
        _state, ppid, pgrp, sid = stat.rsplit(")", 1)[1].split()[:4]
        table.append(_ProcInfo(int(entry), int(ppid), int(pgrp), int(sid)))
    return table


def descendants(pid: int) -> list[int]:
    """All descendants of ``pid`` (children, grandchildren, ...; zombies included)."""
    children: dict[int, list[int]] = {}
    for info in _process_table():
        children.setdefault(info.ppid, []).append(info.pid)
    found: list[int] = []
    stack = [pid]
    while stack:
        for child in children.get(stack.pop(), []):
            found.append(child)
            stack.append(child)
    return found


def _signal(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


_subreaper_lock = threading.Lock()
_subreaper_users = 0


def _set_subreaper(on: bool) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0)


@contextlib.contextmanager
def _subreaper() -> Iterator[None]:
    """Adopt descendants orphaned meanwhile (Linux PR_SET_CHILD_SUBREAPER).

    PID 1 of a container may never reap orphans: without this, processes of a
    killed tree would stay zombies for the life of the machine. Reference-counted,
    as threads may overlap.
    """
    global _subreaper_users
    with _subreaper_lock:
        _subreaper_users += 1
        _set_subreaper(True)
    try:
        yield
    finally:
        with _subreaper_lock:
            _subreaper_users -= 1
            if _subreaper_users == 0:
                _set_subreaper(False)


def run_reaped(
    argv: Sequence[str],
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float | None = None,
) -> subprocess.CompletedProcess[str]:
    """subprocess.run(argv, capture_output=True, text=True) that leaves no zombies.

    `git` exits before its remote helper when a connection fails, orphaning it;
    here the orphans are adopted and reaped (and killed if still running).
    """
    with _subreaper():
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=cwd,
            env=None if env is None else dict(env),
            start_new_session=True,  # its whole tree shares its process group
        )
        try:
            out, err = proc.communicate(timeout=timeout)
        finally:
            _kill_and_reap(proc)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _reap_tree(tree: set[int], timeout: float = 5.0) -> None:
    """Reap (killing first if needed) every adopted child that belonged to ``tree``.

    A process orphaned while its tree was being killed is re-parented straight to
    us, so it is recognised by its process group or session, not by its parent.
    """
    me = os.getpid()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        table = _process_table()
        ours = [p.pid for p in table if p.ppid == me and (p.pid in tree or p.pgrp in tree or p.sid in tree)]
        pending = [p.pid for p in table if p.pid in tree and p.ppid != me]
        for pid in ours:
            _signal(pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
        if not ours and not pending:
            return
        time.sleep(0.01)


def kill_process_tree(proc: AnyPopen) -> None:
    """SIGKILL ``proc`` and everything it spawned, and reap them all.

    The root is stopped first so it cannot fork while its tree is being killed;
    the scan repeats until no descendant is left (children that called setsid(),
    as sshd session processes do, are still found through their parent links).
    """
    with _subreaper():
        _kill_and_reap(proc)


def _kill_and_reap(proc: AnyPopen) -> None:
    killed: set[int] = set()
    if proc.poll() is None:
        _signal(proc.pid, signal.SIGSTOP)
        for _ in range(50):
            tree = set(descendants(proc.pid)) - killed
            if not tree:
                break
            for pid in tree:
                _signal(pid, signal.SIGKILL)
            killed |= tree
            time.sleep(0.01)
        _signal(proc.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)  # stragglers that kept our process group
    proc.wait(timeout=10)
    _reap_tree(killed | {proc.pid})


class _LineWatcher:
    """Drains a child's text stream in a thread, keeping lines and waiting for a pattern."""

    def __init__(self, stream: IO[bytes], ready: re.Pattern[str], sink: list[str]) -> None:
        self.lines = sink
        self._ready_pattern = ready
        self.ready = threading.Event()
        self._thread = threading.Thread(target=self._drain, args=(stream,), daemon=True)
        self._thread.start()

    def _drain(self, stream: IO[bytes]) -> None:
        with stream:
            for raw in stream:
                line = raw.decode("utf-8", "replace").rstrip("\r\n")
                self.lines.append(line)
                if self._ready_pattern.search(line):
                    self.ready.set()

    def wait_ready(self, proc: subprocess.Popen[bytes], what: str) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while not self.ready.wait(0.05):
            if proc.poll() is not None or time.monotonic() > deadline:
                log = "\n".join(self.lines)
                raise RuntimeError(f"{what} did not start (rc={proc.poll()}):\n{log}")

    def join(self) -> None:
        self._thread.join(timeout=5)


class _Server:
    """start()/stop()/restart() and context-manager plumbing shared by all servers."""

    port: int

    def start(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def restart(self) -> None:
        """Stop (killing in-flight connections) and start again on the same port."""
        self.stop()
        self.start()

    def __enter__(self: _ServerT) -> _ServerT:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


# Runs a server as its child, as a subreaper: it reaps every process of the server's
# tree (sshd, for one, leaves orphaned git-upload-pack zombies behind), and on
# SIGTERM, or when the server exits, SIGKILLs what is left of the tree, reaps it
# all and exits. PID 1 of a container may reap nothing, so nobody else would.
# It also gets SIGTERM when the thread that started it dies (PR_SET_PDEATHSIG),
# so a test process killed without teardown leaves no server behind.
_REAPER = """
import ctypes, os, signal, sys, time

class Stop(Exception):
    pass

def stop(signum, frame):
    raise Stop

def descendants(root):
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except OSError:
            continue
        children.setdefault(ppid, []).append(int(entry))
    found, stack = [], [root]
    while stack:
        kids = children.get(stack.pop(), [])
        found += kids
        stack += kids
    return found

libc = ctypes.CDLL(None)
libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
signal.signal(signal.SIGTERM, stop)
signal.signal(signal.SIGINT, stop)
libc.prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG: the test process died
if os.getppid() != int(os.environ.pop("MEMSYNC_TEST_REAPER_PARENT")):
    sys.exit(1)  # it died before prctl
server = os.fork()
if server == 0:
    os.execvp(sys.argv[1], sys.argv[1:])
code = 0
try:
    while True:
        pid, status = os.wait()
        if pid == server:
            code = os.waitstatus_to_exitcode(status)
            break
except (Stop, ChildProcessError):
    pass
signal.signal(signal.SIGTERM, signal.SIG_IGN)
while True:
    for pid in descendants(os.getpid()):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    try:
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass
    except ChildProcessError:
        break
    time.sleep(0.01)
sys.exit(code if code >= 0 else 128 - code)
"""


class _ProcessServer(_Server):
    """A server that is one long-running child process (under _REAPER), logging to stderr."""

    def __init__(self) -> None:
        self.port = free_port()
        self._proc: subprocess.Popen[bytes] | None = None
        self._watcher: _LineWatcher | None = None
        self.log: list[str] = []  # stderr lines of every run, kept across restarts

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    def _spawn(self, argv: Sequence[str], env: Mapping[str, str], ready: str, what: str) -> None:
        proc = subprocess.Popen(
            [sys.executable, "-c", _REAPER, *argv],
            env={**env, "MEMSYNC_TEST_REAPER_PARENT": str(os.getpid())},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        self._proc = proc
        assert proc.stderr is not None
        self._watcher = _LineWatcher(proc.stderr, re.compile(ready), self.log)
        try:
            self._watcher.wait_ready(proc, what)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        proc, watcher = self._proc, self._watcher
        self._proc = self._watcher = None
        if proc is not None:
            proc.terminate()  # the reaper kills and reaps the whole server tree
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                kill_process_tree(proc)
        if watcher is not None:
            watcher.join()


# --------------------------------------------------------------------------- hubs


def _git(*args: str, cwd: Path | None = None) -> None:
    subprocess.run(
        ["git", *args],
        cwd=cwd,
        env=isolated_git_env(Path(tempfile.gettempdir()) / "memsync-test-git-home"),
        check=True,
        capture_output=True,
    )


def make_bare_hub(path: Path, initial_branch: str = "main") -> Path:
    """Create an empty bare repository suitable as a push target for every server."""
    path = Path(path)
    _git("init", "--quiet", "--bare", f"--initial-branch={initial_branch}", str(path))
    for key, value in (
        ("receive.fsckObjects", "true"),
        ("transfer.fsckObjects", "true"),
        ("receive.denyDeletes", "false"),
        ("receive.denyNonFastForwards", "false"),
        ("receive.autogc", "false"),
        ("gc.auto", "0"),
        ("core.logAllRefUpdates", "true"),
        ("http.receivepack", "true"),
    ):
        _git("config", "--file", str(path / "config"), key, value)
    (path / "git-daemon-export-ok").touch()
    return path


def install_reject_hook(bare_path: Path, message: str) -> Path:
    """Install a pre-receive hook that prints ``message`` (shown as "remote: ...") and fails."""
    hook = Path(bare_path) / "hooks" / "pre-receive"
    hook.parent.mkdir(parents=True, exist_ok=True)
    hook.write_text(f"#!/bin/sh\ncat >/dev/null\nprintf '%s\\n' {shlex.quote(message)} >&2\nexit 1\n")
    hook.chmod(0o755)
    return hook


# --------------------------------------------------------------------------- git daemon


class GitDaemon(_ProcessServer):
    """`git daemon` serving every repository under ``base_path`` (push enabled)."""

    def __init__(self, base_path: Path, max_connections: int | None = None) -> None:
        super().__init__()
        self.base_path = Path(base_path)
        self.max_connections = max_connections  # None: git daemon's default (32)
        self._home = Path(tempfile.mkdtemp(prefix="git-daemon-home-"))

    def url(self, relpath: str) -> str:
        return f"git://{HOST}:{self.port}/{relpath.lstrip('/')}"

    def start(self) -> None:
        argv = [
            "git",
            "daemon",
            "--reuseaddr",
            f"--listen={HOST}",
            f"--port={self.port}",
            f"--base-path={self.base_path}",
            "--export-all",
            "--enable=receive-pack",
            "--informative-errors",
            "--verbose",
            *([] if self.max_connections is None else [f"--max-connections={self.max_connections}"]),
            str(self.base_path),
        ]
        self._spawn(argv, _server_env(self._home), r"Ready to rumble", "git daemon")

    def cleanup(self) -> None:
        self.stop()
        shutil.rmtree(self._home, ignore_errors=True)


# --------------------------------------------------------------------------- smart HTTP


@dataclass
class RecordedRequest:
    """One request as the HTTP server received it (Authorization header included)."""

    method: str
    path: str
    headers: dict[str, str]
    body_size: int = 0  # after de-chunking and gunzip
    status: int = 0

    def header(self, name: str, default: str = "") -> str:
        """A header's value, looked up case-insensitively (``default`` if absent)."""
        for key, value in self.headers.items():
            if key.lower() == name.lower():
                return value
        return default


@dataclass
class _HttpState:
    project_root: Path
    user: str
    token: str
    home: Path
    requests: list[RecordedRequest] = field(default_factory=list)
    auth_failures: int = 0  # every 401 sent (the first, credential-less probe included)
    wrong_credentials: int = 0  # 401s for requests that did carry (wrong) credentials
    lock: threading.Lock = field(default_factory=threading.Lock)
    errors: list[str] = field(default_factory=list)  # handler exceptions (not printed)
    redirect_to: str | None = None  # base URL requests under redirect_prefix are redirected to (302)
    redirect_prefix: str = "/"
    redirect_authorized_only: bool = False  # redirect only requests that carry the right credential
    cgi_procs: set[subprocess.Popen[bytes]] = field(default_factory=set)
    connections: set[socket.socket] = field(default_factory=set)
    stream: bool = False  # the backend's answer passed on as it comes (chunked), as web servers do


def _read_chunked(stream: io.BufferedIOBase) -> bytes:
    body = bytearray()
    while True:
        size_line = stream.readline()
        if not size_line:
            raise ConnectionError("connection closed inside a chunked body")
        size = int(size_line.split(b";", 1)[0].strip(), 16)
        if size == 0:
            break
        body += stream.read(size)
        stream.readline()  # CRLF after the chunk data
    while stream.readline() not in (b"\r\n", b"\n", b""):
        pass  # trailers
    return bytes(body)


def _decode_body(body: bytes, encoding: str | None) -> bytes:
    if encoding in ("gzip", "x-gzip"):
        return gzip.decompress(body)
    if encoding == "deflate":
        return zlib.decompress(body)
    return body


def _split_cgi_output(output: bytes) -> tuple[int, list[tuple[str, str]], bytes]:
    head, sep, body = output.partition(b"\r\n\r\n")
    if not sep:
        head, _, body = output.partition(b"\n\n")
    status = 200
    headers: list[tuple[str, str]] = []
    for line in head.decode("latin-1").splitlines():
        name, _, value = line.partition(":")
        if name.lower() == "status":
            status = int(value.split()[0])
        elif name:
            headers.append((name.strip(), value.strip()))
    return status, headers, body


class _GitHttpHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # as web servers do (nginx: tcp_nodelay on): no 40 ms stall per reply
    server: _GitHttpServer

    def log_message(self, format: str, *args: object) -> None:
        pass

    def setup(self) -> None:
        super().setup()
        with self.server.state.lock:
            self.server.state.connections.add(self.connection)

    def finish(self) -> None:
        with contextlib.suppress(OSError):
            super().finish()
        with self.server.state.lock:
            self.server.state.connections.discard(self.connection)

    def do_GET(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def _read_body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            raw = _read_chunked(self.rfile)
        else:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        return _decode_body(raw, self.headers.get("Content-Encoding"))

    def _authorized(self) -> bool:
        state = self.server.state
        expected = base64.b64encode(f"{state.user}:{state.token}".encode()).decode()
        return self.headers.get("Authorization", "") == f"Basic {expected}"

    def _serve(self) -> None:
        state = self.server.state
        record = RecordedRequest(self.command, self.path, dict(self.headers.items()))
        with state.lock:
            state.requests.append(record)
        body = self._read_body()
        record.body_size = len(body)
        if (state.redirect_to and self.path.startswith(state.redirect_prefix)
                and (self._authorized() or not state.redirect_authorized_only)):
            record.status = 302
            target = state.redirect_to.rstrip("/") + "/" + self.path[len(state.redirect_prefix):]
            self._respond(302, [("Location", target)], b"")
            return
        if not self._authorized():
            self._deny(record)
            return
        if state.stream:
            self._stream_backend(record, body)
            return
        result = self._run_backend(body)
        if result is None:  # backend killed by stop(): drop the connection, no answer
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)
            return
        record.status = result[0]
        self._respond(*result)

    def _deny(self, record: RecordedRequest) -> None:
        state = self.server.state
        with state.lock:
            state.auth_failures += 1
            if self.headers.get("Authorization"):
                state.wrong_credentials += 1
        record.status = 401
        message = b"authentication required\n"
        headers = [
            ("WWW-Authenticate", 'Basic realm="memsync-test"'),
            ("Content-Type", "text/plain"),
        ]
        self._respond(401, headers, message)

    def _respond(self, status: int, headers: list[tuple[str, str]], payload: bytes) -> None:
        self._head(status, headers, ("Content-Length", str(len(payload))))
        self.wfile.write(payload)

    def _head(self, status: int, headers: list[tuple[str, str]], framing: tuple[str, str]) -> None:
        """The status line and the backend's headers, with this server's own framing of the body."""
        self.send_response(status)
        for name, value in headers:
            if name.lower() not in ("content-length", "transfer-encoding", "connection"):
                self.send_header(name, value)
        self.send_header(*framing)
        self.end_headers()

    def _cgi_env(self, body: bytes) -> dict[str, str]:
        state = self.server.state
        path, _, query = self.path.partition("?")
        env = _server_env(state.home)
        env.update(
            GIT_PROJECT_ROOT=str(state.project_root),
            GIT_HTTP_EXPORT_ALL="1",
            GATEWAY_INTERFACE="CGI/1.1",
            SERVER_PROTOCOL="HTTP/1.1",
            REQUEST_METHOD=self.command,
            PATH_INFO=path,
            QUERY_STRING=query,
            REMOTE_ADDR=self.client_address[0],
            REMOTE_USER=state.user,
            AUTH_TYPE="Basic",
            CONTENT_LENGTH=str(len(body)),
            CONTENT_TYPE=self.headers.get("Content-Type", ""),
        )
        for name, value in self.headers.items():
            key = "HTTP_" + name.upper().replace("-", "_")
            if key not in (
                "HTTP_AUTHORIZATION",
                "HTTP_CONTENT_ENCODING",
                "HTTP_CONTENT_LENGTH",
            ):
                env[key] = value
        return env

    def _drop(self) -> None:
        """No answer (or no end to it): the connection shut, as a server killed mid-way leaves it."""
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    def _stream_backend(self, record: RecordedRequest, body: bytes) -> None:
        """The backend's answer sent on as it is written (chunked), as nginx or Apache pass a
        CGI's output on: a client reads the pack while the server still writes it."""
        state = self.server.state
        proc = self._backend(body)
        stdin, stdout, stderr = proc.stdin, proc.stdout, proc.stderr
        assert isinstance(stdout, io.BufferedReader) and stdin is not None and stderr is not None
        errors = bytearray()

        def feed() -> None:
            with contextlib.suppress(OSError):
                stdin.write(body)
                stdin.close()

        side = [threading.Thread(target=feed, daemon=True),
                threading.Thread(target=lambda: errors.extend(stderr.read()), daemon=True)]
        for thread in side:
            thread.start()
        try:
            head = bytearray()
            while b"\r\n\r\n" not in head and b"\n\n" not in head:
                piece = stdout.read1(65536)
                if not piece:
                    break
                head += piece
            if not head and proc.wait() < 0:  # killed by stop() before it answered
                self._drop()
                return
            if not head:
                record.status = 500
                self._respond(500, [("Content-Type", "text/plain")], bytes(errors))
                return
            status, headers, rest = _split_cgi_output(bytes(head))
            record.status = status
            self._head(status, headers, ("Transfer-Encoding", "chunked"))
            while True:
                if rest:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(rest), rest))
                rest = stdout.read1(65536)
                if not rest:
                    break
            if proc.wait() < 0:  # killed by stop(): the answer has no end
                self._drop()
                return
            self.wfile.write(b"0\r\n\r\n")
        finally:
            if proc.poll() is None:  # the client went away mid-answer: the backend's group goes too
                with contextlib.suppress(OSError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            for thread in side:
                thread.join(timeout=5)
            with state.lock:
                state.cgi_procs.discard(proc)

    def _backend(self, body: bytes) -> subprocess.Popen[bytes]:
        state = self.server.state
        proc = subprocess.Popen(
            ["git", "http-backend"],
            env=self._cgi_env(body),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,  # its tree is one process group, for stop()
        )
        with state.lock:
            state.cgi_procs.add(proc)
        return proc

    def _run_backend(self, body: bytes) -> tuple[int, list[tuple[str, str]], bytes] | None:
        state = self.server.state
        proc = self._backend(body)
        try:
            output, errors = proc.communicate(body, timeout=120)
        finally:
            with state.lock:
                state.cgi_procs.discard(proc)
        if proc.returncode < 0:
            return None
        if proc.returncode != 0 and not output:
            return 500, [("Content-Type", "text/plain")], errors
        return _split_cgi_output(output)


class _GitHttpServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True

    def __init__(self, host: str, port: int, state: _HttpState, tls: ssl.SSLContext | None) -> None:
        self.state = state
        super().__init__((host, port), _GitHttpHandler)
        if tls is not None:
            # Handshake lazily, in the handler thread, so a stalled client blocks nobody.
            self.socket = tls.wrap_socket(self.socket, server_side=True, do_handshake_on_connect=False)

    def handle_error(self, request: object, client_address: object) -> None:
        # Clients refusing our cert, connections cut by stop(): keep them, don't print.
        with self.state.lock:
            self.state.errors.append(traceback.format_exc())


def make_self_signed_cert(directory: Path, host: str = HOST) -> tuple[Path, Path]:
    """Generate (cert.pem, key.pem) for ``host`` with the openssl CLI."""
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
            "-keyout", str(key), "-out", str(cert), "-subj", f"/CN={host}",
            "-addext", f"subjectAltName=IP:{host}",
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return cert, key


class HttpGitServer(_Server):
    """Smart-HTTP git server (git http-backend as CGI) behind HTTP Basic auth.

    ``requests`` records every request (method, path, headers incl. Authorization);
    ``auth_failures`` counts 401 responses, ``wrong_credentials`` the 401s whose
    request did carry an Authorization header. ``stream`` (the default): the backend's answer
    is passed on as it is written, chunked, as nginx or Apache pass a CGI's output on; False:
    held until the backend exits and sent whole with its length, as a buffering proxy does.
    """

    def __init__(self, project_root: Path, user: str, token: str, tls: bool = False, host: str = HOST,
                 stream: bool = True) -> None:
        self.host = host
        self.port = free_port()
        self.project_root = Path(project_root)
        self.tls = tls
        self._tmp = Path(tempfile.mkdtemp(prefix="http-git-"))
        self._state = _HttpState(Path(project_root), user, token, self._tmp / "home", stream=stream)
        self.cert_path: Path | None = None
        self._ssl: ssl.SSLContext | None = None
        if tls:
            self.cert_path, key_path = make_self_signed_cert(self._tmp)
            self._ssl = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            self._ssl.load_cert_chain(self.cert_path, key_path)
        self._httpd: _GitHttpServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def user(self) -> str:
        return self._state.user

    @property
    def token(self) -> str:
        return self._state.token

    @property
    def requests(self) -> list[RecordedRequest]:
        return self._state.requests

    @property
    def errors(self) -> list[str]:
        return self._state.errors

    @property
    def auth_failures(self) -> int:
        return self._state.auth_failures

    @property
    def wrong_credentials(self) -> int:
        return self._state.wrong_credentials

    def redirect(self, base_url: str | None, authorized_only: bool = False, prefix: str = "/") -> None:
        """Answer every request under ``prefix`` (with authorized_only: every authenticated one)
        with a 302 to the rest of its path under ``base_url``; None stops redirecting."""
        self._state.redirect_to = base_url
        self._state.redirect_authorized_only = authorized_only
        self._state.redirect_prefix = prefix

    def url(self, relpath: str) -> str:
        scheme = "https" if self.tls else "http"
        return f"{scheme}://{self.host}:{self.port}/{relpath.lstrip('/')}"

    def start(self) -> None:
        self._httpd = _GitHttpServer(self.host, self.port, self._state, self._ssl)
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()
        wait_for_port(self.port, host=self.host)

    def stop(self) -> None:
        httpd, thread = self._httpd, self._thread
        self._httpd = self._thread = None
        if httpd is None:
            return
        httpd.shutdown()
        httpd.server_close()
        if thread is not None:
            thread.join(timeout=5)
        self._abort_in_flight()

    def _abort_in_flight(self) -> None:
        with self._state.lock:
            procs = list(self._state.cgi_procs)
            conns = list(self._state.connections)
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        for proc in procs:
            kill_process_tree(proc)

    def cleanup(self) -> None:
        self.stop()
        shutil.rmtree(self._tmp, ignore_errors=True)


# --------------------------------------------------------------------------- OpenSSH


def _ssh_keygen(path: Path, passphrase: str = "", comment: str = "memsync-test") -> None:
    subprocess.run(
        [
            "ssh-keygen",
            "-q",
            "-t",
            "ed25519",
            "-N",
            passphrase,
            "-C",
            comment,
            "-f",
            str(path),
        ],
        check=True,
        capture_output=True,
    )


def _find_sshd() -> str | None:
    path = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/usr/local/sbin", "/sbin"])
    found = shutil.which("sshd", path=path)
    # sshd refuses to run (re-exec) unless started by absolute path.
    return None if found is None else os.path.abspath(found)


def sshd_available() -> bool:
    return _find_sshd() is not None and shutil.which("ssh-keygen") is not None


def _git_bin_path() -> str:
    """PATH for ssh sessions: where `git` and the git-*-pack programs live."""
    git = shutil.which("git")
    if git is None:
        raise RuntimeError("git is not on PATH")
    exec_path = subprocess.run(["git", "--exec-path"], check=True, capture_output=True, text=True).stdout.strip()
    dirs = [str(Path(git).resolve().parent), os.path.dirname(git), exec_path]
    dirs += ["/usr/local/bin", "/usr/bin", "/bin"]
    return ":".join(dict.fromkeys(dirs))


class SshGitServer(_ProcessServer):
    """OpenSSH sshd on 127.0.0.1, logging in as the current user with generated keys.

    Keys: ``client_key`` (no passphrase) and ``client_key_encrypted`` (passphrase
    ``SSH_KEY_PASSPHRASE``, i.e. "correct horse"); public halves next to them as
    ``<key>.pub``. ``known_hosts_line`` trusts the generated host key.
    """

    def __init__(self, tmpdir: Path) -> None:
        super().__init__()
        sshd = _find_sshd()
        if sshd is None:
            raise FileNotFoundError("sshd not found (apt-get install openssh-server)")
        self._sshd = sshd
        self.dir = Path(tmpdir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.user = _current_user()
        self.host_key = self.dir / "ssh_host_ed25519_key"
        self.client_key = self.dir / "id_ed25519"
        self.client_key_encrypted = self.dir / "id_ed25519_encrypted"
        self.passphrase = SSH_KEY_PASSPHRASE
        self.authorized_keys = self.dir / "authorized_keys"
        self.config_path = self.dir / "sshd_config"
        self._generate_keys()

    def _generate_keys(self) -> None:
        _ssh_keygen(self.host_key)
        _ssh_keygen(self.client_key)
        _ssh_keygen(self.client_key_encrypted, passphrase=self.passphrase)
        pubs = [Path(f"{key}.pub").read_text() for key in (self.client_key, self.client_key_encrypted)]
        self.authorized_keys.write_text("".join(pubs))
        self.authorized_keys.chmod(0o600)

    @property
    def host_key_pub(self) -> str:
        """The host public key as ``ssh-ed25519 AAAA...`` (no comment)."""
        kind, blob = Path(f"{self.host_key}.pub").read_text().split()[:2]
        return f"{kind} {blob}"

    @property
    def known_hosts_line(self) -> str:
        return f"[{HOST}]:{self.port} {self.host_key_pub}\n"

    def write_known_hosts(self, path: Path) -> Path:
        path.write_text(self.known_hosts_line)
        return path

    def url(self, abs_path: str | Path) -> str:
        return f"ssh://{self.user}@{HOST}:{self.port}/{str(abs_path).lstrip('/')}"

    def ssh_command(
        self,
        key: Path | None = None,
        known_hosts: Path | None = None,
        *,
        agent: bool = False,
    ) -> str:
        """A GIT_SSH_COMMAND value: strict host key check against this server's key.

        Authenticates with ``key`` (default: client_key), or with agent=True only
        with the keys of the agent in SSH_AUTH_SOCK.
        """
        if known_hosts is None:
            known_hosts = self.write_known_hosts(self.dir / "known_hosts")
        options = [
            "ssh", "-F", "/dev/null",
            "-o", "BatchMode=yes",
            "-o", "StrictHostKeyChecking=yes",
            "-o", f"UserKnownHostsFile={known_hosts}",
            "-o", "GlobalKnownHostsFile=/dev/null",
        ]  # fmt: skip
        if agent:
            options += ["-o", "IdentitiesOnly=no", "-o", "IdentityFile=none"]
        else:
            options += ["-o", "IdentitiesOnly=yes", "-i", str(key or self.client_key)]
        return shlex.join(options)

    def _config_text(self) -> str:
        lines = [
            f"Port {self.port}",
            f"ListenAddress {HOST}",
            f"HostKey {self.host_key}",
            f"PidFile {self.dir / 'sshd.pid'}",
            f"AuthorizedKeysFile {self.authorized_keys}",
            "StrictModes no",
            "PermitRootLogin prohibit-password",
            "PubkeyAuthentication yes",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "UsePAM no",
            "UseDNS no",
            "PrintMotd no",
            "PrintLastLog no",
            "X11Forwarding no",
            "AllowTcpForwarding no",
            "PermitUserEnvironment no",
            "LogLevel VERBOSE",
            "MaxStartups 100:30:200",
            # Sessions otherwise get sshd's compiled-in PATH; make git's programs findable
            # and keep the user's/system git config out of the server side.
            f"SetEnv PATH={_git_bin_path()} GIT_CONFIG_NOSYSTEM=1",
            "Subsystem sftp internal-sftp",
        ]
        return "\n".join(lines) + "\n"

    def start(self) -> None:
        Path("/run/sshd").mkdir(mode=0o755, parents=True, exist_ok=True)  # privsep dir
        self.config_path.write_text(self._config_text())
        argv = [self._sshd, "-D", "-e", "-f", str(self.config_path)]
        ready = rf"Server listening on {re.escape(HOST)} port {self.port}"
        self._spawn(argv, isolated_git_env(self.dir / "home"), ready, "sshd")


def _current_user() -> str:
    return pwd.getpwuid(os.getuid()).pw_name


@contextlib.contextmanager
def ssh_agent(keys: Sequence[Path | tuple[Path, str]]) -> Iterator[dict[str, str]]:
    """Run an ssh-agent holding ``keys`` (a path, or (path, passphrase) for encrypted keys).

    Yields {"SSH_AUTH_SOCK": ..., "SSH_AGENT_PID": ...}; the agent is killed afterwards.
    """
    tmp = Path(tempfile.mkdtemp(prefix="ssh-agent-"))
    sock = tmp / "agent.sock"
    proc = subprocess.Popen(
        ["ssh-agent", "-D", "-s", "-a", str(sock)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        _wait_for_path(sock, proc)
        env = {"SSH_AUTH_SOCK": str(sock), "SSH_AGENT_PID": str(proc.pid)}
        for key in keys:
            path, passphrase = key if isinstance(key, tuple) else (key, "")
            _ssh_add(Path(path), passphrase, env, tmp)
        yield env
    finally:
        kill_process_tree(proc)
        shutil.rmtree(tmp, ignore_errors=True)


def _wait_for_path(path: Path, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while not path.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"ssh-agent did not create {path} (rc={proc.poll()})")
        time.sleep(0.02)


def _ssh_add(key: Path, passphrase: str, agent_env: Mapping[str, str], tmp: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SSH_")}
    env.update(agent_env)
    if passphrase:
        askpass = tmp / "askpass.sh"
        askpass.write_text(f"#!/bin/sh\nprintf '%s\\n' {shlex.quote(passphrase)}\n")
        askpass.chmod(0o700)
        env.update(SSH_ASKPASS=str(askpass), SSH_ASKPASS_REQUIRE="force", DISPLAY=":0")
    subprocess.run(
        ["ssh-add", "-q", str(key)],
        env=env,
        stdin=subprocess.DEVNULL,
        check=True,
        capture_output=True,
        start_new_session=True,  # no controlling tty: ssh-add must use SSH_ASKPASS
    )


# --------------------------------------------------------------------------- bad ports


class HangingServer(_Server):
    """Accepts TCP connections on 127.0.0.1 and never sends or reads a byte."""

    def __init__(self) -> None:
        self.port = free_port()
        self._listener: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._held: list[socket.socket] = []
        self.accepted = 0

    def url(self, relpath: str = "repo.git", scheme: str = "http") -> str:
        return f"{scheme}://{HOST}:{self.port}/{relpath.lstrip('/')}"

    def start(self) -> None:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((HOST, self.port))
        listener.listen(64)
        self._listener = listener
        self._thread = threading.Thread(target=self._accept_loop, args=(listener,), daemon=True)
        self._thread.start()

    def _accept_loop(self, listener: socket.socket) -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return  # listener closed by stop()
            self._held.append(conn)
            self.accepted += 1

    def stop(self) -> None:
        listener, thread = self._listener, self._thread
        self._listener = self._thread = None
        if listener is not None:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        if thread is not None:
            thread.join(timeout=5)
        for conn in self._held:
            conn.close()
        self._held.clear()


class RefusingPort(_Server):
    """A 127.0.0.1 port that is bound but not listening: connections get RST at once.

    Holding the bound socket keeps other processes from taking the port.
    """

    def __init__(self) -> None:
        self._sock: socket.socket | None = None
        self.port = 0

    def url(self, relpath: str = "repo.git", scheme: str = "http") -> str:
        return f"{scheme}://{HOST}:{self.port}/{relpath.lstrip('/')}"

    def start(self) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind((HOST, self.port))
        self.port = sock.getsockname()[1]
        self._sock = sock

    def stop(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None


GITOLITE_SHELL = "/usr/share/gitolite3/gitolite-shell"


def gitolite_available() -> bool:
    return shutil.which("gitolite") is not None and Path(GITOLITE_SHELL).exists() and _find_sshd() is not None


class GitoliteServer(SshGitServer):
    """gitolite (Debian's gitolite3) behind sshd on 127.0.0.1: one key per user, access rules in
    gitolite.conf. Users: ``admin`` and those given; ``key(user)`` is a user's private key. The
    instance lives in ``dir/gitolite`` (its own HOME); ``configure(conf)`` installs new rules the
    way a server's owner does (compile, then the POST_COMPILE triggers that write authorized_keys).
    """

    def __init__(self, tmpdir: Path, users: Sequence[str]) -> None:
        self.users = ["admin", *users]
        super().__init__(tmpdir)
        self.home = self.dir / "gitolite"
        self.home.mkdir()
        self._gitolite("setup", "-pk", str(self.dir / "keys" / "admin.pub"))
        for user in users:
            shutil.copy(self.dir / "keys" / f"{user}.pub", self.home / ".gitolite" / "keydir" / f"{user}.pub")

    def key(self, user: str) -> Path:
        return self.dir / "keys" / user

    def _generate_keys(self) -> None:
        _ssh_keygen(self.host_key)
        _ssh_keygen(self.client_key)
        _ssh_keygen(self.client_key_encrypted, passphrase=self.passphrase)
        (self.dir / "keys").mkdir()
        for user in self.users:
            _ssh_keygen(self.dir / "keys" / user)
        self.authorized_keys.write_text("")
        self.authorized_keys.chmod(0o600)

    def _gitolite(self, *args: str) -> str:
        env = isolated_git_env(self.home)
        env["HOME"] = str(self.home)
        done = subprocess.run(["gitolite", *args], cwd=self.home, env=env, capture_output=True, text=True,
                              timeout=60)
        if done.returncode != 0:
            raise RuntimeError(f"gitolite {' '.join(args)} failed: {done.stderr[-2000:]}")
        return done.stdout

    def configure(self, conf: str) -> None:
        """Replace gitolite.conf (the admin repository's rules are kept) and apply it."""
        admin = "repo gitolite-admin\n    RW+     =   admin\n\n"
        (self.home / ".gitolite" / "conf" / "gitolite.conf").write_text(admin + conf)
        self._gitolite("compile")
        self._gitolite("trigger", "POST_COMPILE")
        # gitolite-shell finds its instance through HOME, which sshd sets to the login user's own
        lines = (self.home / ".ssh" / "authorized_keys").read_text()
        lines = lines.replace(f'command="{GITOLITE_SHELL} ', f'command="env HOME={self.home} {GITOLITE_SHELL} ')
        self.authorized_keys.write_text(lines)

    def gitolite_url(self, repo: str) -> str:
        return f"ssh://{self.user}@{HOST}:{self.port}/{repo}"

    def repo_path(self, repo: str) -> Path:
        return self.home / "repositories" / f"{repo}.git"
