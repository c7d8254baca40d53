"""Nagle's algorithm off on the connection libgit2 opened to a hub, before a push is written.

libgit2 writes a push in several writes on one socket (the ref updates, then the pack in pieces)
and leaves Nagle's algorithm on: a small write that follows data the server has not yet
acknowledged waits for that acknowledgement, which the server's TCP delays (delayed ACK), a
large share of a small push (docs/PERFORMANCE.md, "Figures behind the code's speed mechanisms").
libgit2 has no option for it and does not hand out its socket, so once it is
connected (push negotiation) the socket is found among this process's descriptors by the hub's
port, and TCP_NODELAY set on it through a duplicate. Best effort: where descriptors cannot be
listed, or a socket cannot be looked at, nothing changes.
"""

from __future__ import annotations

import contextlib
import os
import socket
import stat

__all__ = ["ack_promptly", "peer_socket", "send_promptly"]

_QUICKACK = getattr(socket, "TCP_QUICKACK", None)  # Linux only

_FD_DIR = "/dev/fd"  # Linux (-> /proc/self/fd) and macOS


def send_promptly(port: int, fd_dir: str = _FD_DIR) -> int:
    """Set TCP_NODELAY on this process's TCP sockets connected to `port`; how many were set.
    `fd_dir`: where this process's descriptors are listed (none listed there: nothing is set)."""
    try:
        names = os.listdir(fd_dir)
    except OSError:
        return 0
    done = 0
    for name in names:
        if name.isdigit() and _set_if_peer(int(name), port):
            done += 1
    return done


def _set_if_peer(fd: int, port: int) -> bool:
    try:
        if not stat.S_ISSOCK(os.fstat(fd).st_mode):
            return False
    except OSError:  # closed meanwhile, or the listing's own descriptor
        return False
    sock = peer_socket(fd, port)
    if sock is None:
        return False
    with sock, contextlib.suppress(OSError):  # closes the duplicate only: libgit2's descriptor stays
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return True
    return False


def peer_socket(fd: int, port: int) -> socket.socket | None:
    """A duplicate of descriptor `fd` as a socket, if it is a TCP connection to `port` (the
    caller closes it; libgit2's own descriptor stays as it is); else None."""
    try:
        copy = os.dup(fd)
    except OSError:
        return None
    try:
        sock = socket.socket(fileno=copy)
    except OSError:
        os.close(copy)
        return None
    try:
        if (sock.family in (socket.AF_INET, socket.AF_INET6) and sock.type == socket.SOCK_STREAM
                and sock.getpeername()[1] == port):
            return sock
    except OSError:
        pass
    sock.close()
    return None


def ack_promptly(sock: socket.socket) -> None:
    """Acknowledge what arrives on `sock` at once, before the next read (Linux's TCP_QUICKACK,
    which the kernel clears again by itself: so before every read). The reverse case of
    send_promptly: git's upload-pack writes a v2 fetch's answer in small pieces with Nagle's
    algorithm on, so each piece after the first waits for the client's acknowledgement, which
    delayed ACK holds (figures: docs/PERFORMANCE.md, "A pull over protocol v2"). Best effort:
    elsewhere, nothing changes."""
    if _QUICKACK is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, _QUICKACK, 1)
