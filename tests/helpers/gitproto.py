"""A git:// server on 127.0.0.1 whose answer a test writes: a scripted reply (a hostile server),
or `git upload-pack` / `receive-pack` in protocol v0 whatever the client asks (a server older than protocol v2)."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

HOST = "127.0.0.1"


def pkt(text: str | bytes) -> bytes:
    data = text.encode() if isinstance(text, str) else text
    return b"%04x" % (len(data) + 4) + data


def _read_request(conn: socket.socket) -> bytes:
    """The client's first pkt-line (`git-upload-pack /path\\0host=...\\0...`)."""
    head = b""
    while len(head) < 4:
        chunk = conn.recv(4 - len(head))
        if not chunk:
            return b""
        head += chunk
    body = b""
    while len(body) < int(head, 16) - 4:
        chunk = conn.recv(int(head, 16) - 4 - len(body))
        if not chunk:
            break
        body += chunk
    return body


@contextlib.contextmanager
def git_server(answer: Callable[[socket.socket, bytes], None]) -> Iterator[int]:
    """Serve each connection with `answer(conn, first request line)`; yields the port."""
    listener = socket.socket()
    listener.bind((HOST, 0))
    listener.listen(16)

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=_handle, args=(conn,), daemon=True).start()

    def _handle(conn: socket.socket) -> None:
        with conn, contextlib.suppress(OSError):
            answer(conn, _read_request(conn))

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        with contextlib.suppress(OSError):
            listener.shutdown(socket.SHUT_RDWR)  # wakes the accept() (close alone does not)
        listener.close()
        thread.join(timeout=5)


def v0_upload_pack(base: Path) -> Callable[[socket.socket, bytes], None]:
    """An answer that runs `git upload-pack` (or receive-pack, for a push) on `base`/<path> in
    protocol v0 (GIT_PROTOCOL unset)."""
    def answer(conn: socket.socket, request: bytes) -> None:
        service, path = request.split(b"\0", 1)[0].decode().split(" ", 1)
        if service not in ("git-upload-pack", "git-receive-pack"):
            return
        subprocess.run(["git", service.removeprefix("git-"), str(base / path.lstrip("/"))], stdin=conn.fileno(),
                       stdout=conn.fileno(), stderr=subprocess.DEVNULL, check=False, timeout=120)
    return answer
