"""The line between a `memsync serve` worker and its server's change trackers (memsync/serve/tracker.py).

Each worker gets one end of a socket pair when it is forked. Its scans ask the server `since`
(the tracker flushes its events, then the server answers) and `hand_back` their result as the
new baseline, as length-prefixed JSON. The worker's end is not inheritable, so an agent a `run` starts cannot
speak on it. Any failure on the line (no answer within WAIT, a closed socket, a reply that does
not parse) means no hint: the scan is a full one.
"""

from __future__ import annotations

import json
import socket
import struct
from typing import Any

from memsync.git import hints
from memsync.serve.tracker import Trackers

__all__ = ["WAIT", "Lines", "Link", "Local", "since_from"]

_LEN = struct.Struct("!I")
_MAX = 4 << 20
# seconds a scan waits for the server's answer: more than a tracker's start and its flush
# (tracker.Limits.flush_wait), which come first when the server is loaded
WAIT = 5.0


def _frame(message: dict[str, Any]) -> bytes:
    body = json.dumps(message, separators=(",", ":")).encode("utf-8", "surrogateescape")
    return _LEN.pack(len(body)) + body


def since_from(reply: dict[str, Any]) -> hints.Since:
    """A tracker's answer (Tracker.since) as the scan takes it."""
    token = int(reply["token"])
    if "paths" not in reply:
        return hints.Since(token)
    return hints.Since(token, str(reply["tree"]), str(reply["fingerprint"]), frozenset(str(p) for p in reply["paths"]))


class Local:
    """A `hints.Source` straight onto Trackers in this process, without a line: what a served
    worker gets, for bench/warm.py and the tests."""

    def __init__(self, trackers: Trackers) -> None:
        self.trackers = trackers

    def since(self, root: str) -> hints.Since | None:
        reply = self.trackers.since(root)
        return None if reply is None else since_from(reply)

    def hand_back(self, root: str, token: int, tree: str, fingerprint: str, paths: list[str], full: bool) -> None:
        self.trackers.hand_back(root, token, tree, fingerprint, paths, full)


class Link:
    """The worker's end: a `hints.Source`."""

    def __init__(self, sock: socket.socket, wait: float = WAIT) -> None:
        self.sock = sock
        self.wait = wait
        self.broken = False

    def since(self, root: str) -> hints.Since | None:
        if self.broken:
            return None
        try:
            self.sock.settimeout(self.wait)
            self.sock.sendall(_frame({"op": "since", "root": root}))
            head = self._exact(_LEN.size)
            (n,) = _LEN.unpack(head)
            if n > _MAX:
                raise ValueError("reply too large")
            reply = json.loads(self._exact(n).decode("utf-8", "surrogateescape"))
            return None if reply.get("none") else since_from(reply)  # "none": not tracked
        except (OSError, EOFError, ValueError, KeyError, TypeError):
            self.broken = True
            return None

    def hand_back(self, root: str, token: int, tree: str, fingerprint: str, paths: list[str], full: bool) -> None:
        if self.broken:
            return
        try:
            self.sock.settimeout(self.wait)
            self.sock.sendall(_frame({"op": "hand_back", "root": root, "token": token, "tree": tree,
                                      "fingerprint": fingerprint, "paths": paths, "full": full}))
        except OSError:
            self.broken = True

    def _exact(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise EOFError
            data += chunk
        return data


class Lines:
    """The server's ends, one per live worker, and what arrives on them."""

    def __init__(self, trackers: Trackers) -> None:
        self.trackers = trackers
        self.buffers: dict[socket.socket, bytearray] = {}

    def open(self) -> socket.socket:
        """A new line; the worker's end is returned, the server keeps its own."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        ours.setblocking(False)
        self.buffers[ours] = bytearray()
        return theirs

    def readable(self, sock: socket.socket) -> bool:
        """Take in what `sock` sent and answer it. False: the line is done (the caller closes it)."""
        try:
            data = sock.recv(1 << 16)
        except BlockingIOError:
            return True
        except OSError:
            data = b""
        buffer = self.buffers.get(sock)
        if not data or buffer is None:
            return False
        buffer += data
        while len(buffer) >= _LEN.size:
            (n,) = _LEN.unpack_from(buffer)
            if n > _MAX:
                return False
            if len(buffer) < _LEN.size + n:
                break
            body = bytes(buffer[_LEN.size:_LEN.size + n])
            del buffer[:_LEN.size + n]
            try:
                self._answer(sock, json.loads(body.decode("utf-8", "surrogateescape")))
            except (OSError, ValueError, KeyError, TypeError):
                return False
        return True

    def _answer(self, sock: socket.socket, message: dict[str, Any]) -> None:
        op, root = message["op"], str(message["root"])
        if op == "since":
            reply = self.trackers.since(root)
            sock.setblocking(True)
            try:
                sock.sendall(_frame(reply if reply is not None else {"token": -1, "none": True}))
            finally:
                sock.setblocking(False)
        elif op == "hand_back":
            paths = message["paths"]
            if not isinstance(paths, list) or len(paths) > hints.MAX_PATHS:
                return
            self.trackers.hand_back(root, int(message["token"]), str(message["tree"]),
                                  str(message["fingerprint"]), [str(p) for p in paths], message["full"] is True)

    def close(self, sock: socket.socket) -> None:
        self.buffers.pop(sock, None)
        sock.close()

    def close_all(self) -> None:
        for sock in list(self.buffers):
            self.close(sock)
