"""Hostile git servers on 127.0.0.1 for the network-limit tests (issue 21, part 8).

`HostileServer(protocol, behaviour)` accepts connections and answers as a git server would start
to, then misbehaves:

* ``trickle``: a valid ref advertisement, one byte every `interval` seconds, forever;
* ``flood``: an endless ref advertisement, as fast as the client reads.

Protocols: ``git`` (git://: pkt-lines after the client's request), ``http`` (smart HTTP: a 200
answer to info/refs, then the advertisement as its body, no length), ``ssh`` (the server's SSH
identification line, trickled or followed by an endless stream of lines; an SSH client reads
these before anything else, so the misbehaviour happens before any key exchange).
"""

from __future__ import annotations

import contextlib
import itertools
import socket
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path

from tests.helpers.servers import HOST, _Server, free_port, make_self_signed_cert

ZERO_OID = "0" * 40
SOME_OID = "1d2c3b4a" * 5


def _pkt(payload: bytes) -> bytes:
    return b"%04x" % (len(payload) + 4) + payload


def advertisement(service: bytes = b"git-upload-pack") -> Iterator[bytes]:
    """An endless ref advertisement: one memory branch after another."""
    caps = b"\0multi_ack thin-pack side-band side-band-64k ofs-delta report-status agent=hostile\n"
    yield _pkt(SOME_OID.encode() + b" refs/heads/memory/m000000000" + caps)
    for i in itertools.count(1):
        yield _pkt(SOME_OID.encode() + b" refs/heads/memory/m%09d\n" % i)


class HostileServer(_Server):
    def __init__(self, protocol: str, behaviour: str, interval: float = 0.25, tls_dir: Path | None = None) -> None:
        """`tls_dir`: serve HTTPS ("http" only) with a self-signed certificate made there
        (`self.cert`, for MEMSYNC_CA_BUNDLE)."""
        assert protocol in ("git", "http", "ssh") and behaviour in ("trickle", "flood")
        self.protocol = protocol
        self.tls: ssl.SSLContext | None = None
        self.cert: Path | None = None
        if tls_dir is not None:
            self.cert, key = make_self_signed_cert(tls_dir)
            self.tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            self.tls.load_cert_chain(self.cert, key)
        self.behaviour = behaviour
        self.interval = interval
        self.port = free_port()
        self.sent = 0  # bytes sent on all connections
        self.connections = 0
        self._listener: socket.socket | None = None
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []
        self._conns: list[socket.socket] = []

    def url(self, relpath: str = "hub.git") -> str:
        user = "git@" if self.protocol == "ssh" else ""
        scheme = "https" if self.tls is not None else self.protocol
        return f"{scheme}://{user}{HOST}:{self.port}/{relpath}"

    def start(self) -> None:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((HOST, self.port))
        listener.listen(16)
        self._listener = listener
        self._stopping.clear()
        thread = threading.Thread(target=self._accept_loop, args=(listener,), daemon=True)
        thread.start()
        self._threads.append(thread)

    def stop(self) -> None:
        self._stopping.set()
        listener, self._listener = self._listener, None
        if listener is not None:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        for conn in self._conns:  # a sender blocked on a full socket returns
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        for thread in self._threads:
            thread.join(timeout=5)
        self._threads.clear()
        self._conns.clear()

    def _accept_loop(self, listener: socket.socket) -> None:
        while not self._stopping.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            self.connections += 1
            self._conns.append(conn)
            thread = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            thread.start()
            self._threads.append(thread)

    def _serve(self, conn: socket.socket) -> None:
        with contextlib.suppress(OSError):
            conn.settimeout(2)
            if self.tls is not None:
                conn = self.tls.wrap_socket(conn, server_side=True)
        with conn, contextlib.suppress(OSError):
            conn.settimeout(2)
            stream = self._stream(self._read_request(conn))
            conn.settimeout(10)
            if self.behaviour == "flood":
                while not self._stopping.is_set():
                    chunk = b"".join(itertools.islice(stream, 2000))
                    conn.sendall(chunk)
                    self.sent += len(chunk)
                return
            data = b"".join(itertools.islice(stream, 200))  # plenty for the longest test
            for byte in data:
                if self._stopping.wait(self.interval):
                    return
                conn.sendall(bytes([byte]))
                self.sent += 1

    def _read_request(self, conn: socket.socket) -> bytes:
        """What the client asks first (git: the pkt-line request; HTTP: the request head)."""
        if self.protocol == "ssh":
            return b""  # the server speaks first
        received = b""
        with contextlib.suppress(TimeoutError, OSError):
            while len(received) < 65536:
                more = conn.recv(4096)
                if not more:
                    break
                received += more
                if self.protocol == "http" and b"\r\n\r\n" in received:
                    break
                if self.protocol == "git" and len(received) >= 4 and len(received) >= int(received[:4], 16):
                    break
        return received

    def _stream(self, request: bytes) -> Iterator[bytes]:
        if self.protocol == "ssh":
            yield b"SSH-2.0-OpenSSH_9.6 hostile"
            while True:  # an identification line that never ends
                yield b" x" * 64
        service = b"git-receive-pack" if b"receive-pack" in request else b"git-upload-pack"
        if self.protocol == "http":  # chunked, as git http-backend's answers are
            yield (b"HTTP/1.1 200 OK\r\nContent-Type: application/x-" + service + b"-advertisement\r\n"
                   b"Cache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n\r\n")
            body = itertools.chain([_pkt(b"# service=" + service + b"\n") + b"0000"], advertisement(service))
            yield from (b"%x\r\n%s\r\n" % (len(piece), piece) for piece in body)
            return
        yield from advertisement(service)



class ThrottlingProxy(_Server):
    """A TCP proxy on 127.0.0.1 in front of a real server (`git daemon`) that passes everything
    at once until the client has spoken twice (git://: its request, then its wants: the server's
    advertisement is over), then passes the server's bytes one every `interval` seconds: a
    server that trickles its pack."""

    def __init__(self, target_port: int, interval: float = 0.25) -> None:
        self.target_port = target_port
        self.interval = interval
        self.port = free_port()
        self.trickled = 0
        self._stopping = threading.Event()
        self._listener: socket.socket | None = None
        self._threads: list[threading.Thread] = []
        self._conns: list[socket.socket] = []

    def url(self, relpath: str = "hub.git") -> str:
        return f"git://{HOST}:{self.port}/{relpath}"

    def start(self) -> None:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((HOST, self.port))
        listener.listen(16)
        self._listener = listener
        self._stopping.clear()
        self._spawn(self._accept_loop, listener)

    def stop(self) -> None:
        self._stopping.set()
        listener, self._listener = self._listener, None
        if listener is not None:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        for conn in self._conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        for thread in self._threads:
            thread.join(timeout=5)
        for conn in self._conns:
            conn.close()
        self._threads.clear()
        self._conns.clear()

    def _spawn(self, target: object, *args: object) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)  # type: ignore[arg-type]
        thread.start()
        self._threads.append(thread)

    def _accept_loop(self, listener: socket.socket) -> None:
        while not self._stopping.is_set():
            try:
                client, _ = listener.accept()
            except OSError:
                return
            server = socket.create_connection((HOST, self.target_port))
            self._conns += [client, server]
            spoken = threading.Event()
            self._spawn(self._upstream, client, server, spoken)
            self._spawn(self._downstream, server, client, spoken)

    def _upstream(self, client: socket.socket, server: socket.socket, spoken: threading.Event) -> None:
        chunks = 0
        with contextlib.suppress(OSError):
            while data := client.recv(65536):
                chunks += 1
                if chunks >= 2:
                    spoken.set()
                server.sendall(data)

    def _downstream(self, server: socket.socket, client: socket.socket, spoken: threading.Event) -> None:
        with contextlib.suppress(OSError):
            while data := server.recv(65536):
                if not spoken.is_set():
                    client.sendall(data)
                    continue
                for byte in data:
                    if self._stopping.wait(self.interval):
                        return
                    client.sendall(bytes([byte]))
                    self.trickled += 1
