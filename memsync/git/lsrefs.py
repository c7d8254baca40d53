"""The tips of a few named refs from a `git://` hub through git's protocol v2 `ls-refs` with a
`ref-prefix` for each: the server sends those refs alone, where libgit2 (protocol v0 only) has it
send every ref it holds, ~70 bytes per memory of a branch hub, before anything else can happen
(docs/PERFORMANCE.md, "Negotiating with the tips a memory holds").

A server that does not speak v2 (an old git daemon answers a v0 advertisement), refuses the
request, or cannot be reached is left to libgit2: `tips` returns None and the caller reads the
refs as before (and libgit2 reports a failure in its usual words). What the server sends is
untrusted: pkt-lines longer than git allows, anything past MEMSYNC_MAX_ADVERTISEMENT bytes, past
MEMSYNC_NET_DEADLINE, or silent for MEMSYNC_IO_TIMEOUT, and a line that is not `<40 hex> <ref>`
end the read with an error; only the refs asked for are kept (docs/SECURITY.md, "The v2 ref
listing").
"""

from __future__ import annotations

import math
import os
import re
import socket
import time
from urllib.parse import unquote, urlsplit

from memsync.errors import RemoteError, RemoteUnreachable
from memsync.git import netlimits
from memsync.git.hub import HubUrl

MAX_PKT = 65520  # git's largest pkt-line, its 4 length digits included
_FLUSH, _DELIM = b"0000", b"0001"
_REF_LINE = re.compile(rb"([0-9a-f]{40}) (refs/[^ \x00-\x1f\x7f]+)(?: [^\n]*)?\n?")


class _Malformed(RemoteError):
    pass


def pkt(data: bytes) -> bytes:
    return b"%04x" % (len(data) + 4) + data


def tips(hub: HubUrl, refs: list[str]) -> dict[str, str] | None:
    """{ref: tip} for those of `refs` the `git://` hub has; None when v2 cannot answer (not a
    git:// hub, a v0 server, a refusal, no connection): the caller asks libgit2 instead."""
    if hub.kind != "git" or not refs:
        return None
    parts = urlsplit(hub.url)
    host, port = parts.hostname, hub.port
    if not host or port is None:
        return None
    with netlimits.watch(port, hub.display, "cannot list") as guard:  # the deadline and minimum rate
        try:
            return _ask(hub, host, port, refs, guard.limits)
        except (OSError, RemoteError) as exc:
            if guard.tripped is not None:  # the watch shut the socket down past a limit
                raise guard.tripped from exc
            if isinstance(exc, TimeoutError):
                raise RemoteUnreachable(f"cannot list {hub.display}: the server did not answer in time ({exc})",
                                        "check the server; MEMSYNC_CONNECT_TIMEOUT and MEMSYNC_IO_TIMEOUT "
                                        "(seconds) set the limits") from exc
            if isinstance(exc, OSError):
                return None  # no connection, or the server hung up (an old daemon may, on a v2 request)
            raise


def _ask(hub: HubUrl, host: str, port: int, refs: list[str], limits: netlimits.Limits) -> dict[str, str] | None:
    parts = urlsplit(hub.url)
    with socket.create_connection((host, port), timeout=_seconds("MEMSYNC_CONNECT_TIMEOUT", 10)) as sock:
        sock.settimeout(_seconds("MEMSYNC_IO_TIMEOUT", 60))
        reader = _Reader(sock, limits, hub.display)
        hello = f"git-upload-pack {unquote(parts.path)}\0host={parts.netloc.rpartition('@')[2]}\0\0version=2\0"
        sock.sendall(pkt(hello.encode("utf-8", "surrogateescape")))
        if not _speaks_v2(reader):
            return None
        request = [pkt(b"command=ls-refs\n"), _DELIM, *(pkt(b"ref-prefix %s\n" % r.encode()) for r in refs), _FLUSH]
        sock.sendall(b"".join(request))
        return _listing(reader, set(refs))


def _seconds(name: str, default: float) -> float:
    try:
        value = float(os.environ.get(name, "") or default)
    except ValueError:
        return default
    return max(1.0, value) if math.isfinite(value) else default


def _speaks_v2(reader: _Reader) -> bool:
    """Read the server's first answer: a v2 capability list offering ls-refs, or anything else."""
    first = reader.line()
    if first != b"version 2":
        return False  # a v0/v1 advertisement (or an ERR line): libgit2's to read
    offered = False
    while (line := reader.line()) is not None:
        offered = offered or line == b"ls-refs" or line.startswith(b"ls-refs=")
    return offered


def _listing(reader: _Reader, wanted: set[str]) -> dict[str, str]:
    found: dict[str, str] = {}
    while (line := reader.line()) is not None:
        match = _REF_LINE.fullmatch(line)
        if match is None:
            raise _Malformed(f"cannot list {reader.where}: the hub's ref listing is malformed "
                             f"({netlimits.server_text(line[:80].decode('utf-8', 'replace'))!r})",
                             "the server is not a git server, or a broken one; nothing was changed")
        name = match.group(2).decode("utf-8", "surrogateescape")
        if name in wanted and name not in found:  # a ref-prefix also matches longer names
            found[name] = match.group(1).decode()
    return found


class _Reader:
    """pkt-lines from a socket, under the operation's deadline and byte cap."""

    def __init__(self, sock: socket.socket, limits: netlimits.Limits, where: str) -> None:
        self.sock, self.limits, self.where = sock, limits, where
        self.deadline = time.monotonic() + limits.deadline if limits.deadline else math.inf
        self.buffer = bytearray()
        self.at = 0  # where the next pkt-line starts in buffer
        self.read = 0

    def line(self) -> bytes | None:
        """The next pkt-line's payload without its newline; None for a flush or delim packet."""
        head = self._take(4)
        if head in (_FLUSH, _DELIM):
            return None
        size = int(head, 16) if _is_hex(head) else -1
        if not 4 <= size <= MAX_PKT:
            raise _Malformed(f"cannot list {self.where}: the hub sent a malformed pkt-line "
                             f"(length {head.decode('ascii', 'replace')!r})",
                             "the server is not a git server, or a broken one; nothing was changed")
        return self._take(size - 4).removesuffix(b"\n")

    def _take(self, n: int) -> bytes:
        while len(self.buffer) - self.at < n:
            self._receive()
        taken = bytes(self.buffer[self.at:self.at + n])
        self.at += n
        if self.at > 65536:  # drop what was read, now and then (not on every line)
            del self.buffer[:self.at]
            self.at = 0
        return taken

    def _receive(self) -> None:
        if time.monotonic() > self.deadline:
            raise netlimits.NetLimitExceeded(
                f"cannot list {self.where}: stopped after {self.limits.deadline:g} s, the limit for one "
                f"network operation (MEMSYNC_NET_DEADLINE={self.limits.deadline:g})",
                "check the server; raise MEMSYNC_NET_DEADLINE for a slow but sound one")
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionResetError("the server closed the connection")
        self.read += len(chunk)
        if self.read > self.limits.max_advertisement:
            raise netlimits.AdvertisementTooLarge(
                f"cannot list {self.where}: the server sent more than {self.limits.max_advertisement:,} "
                "bytes of ref listing (MEMSYNC_MAX_ADVERTISEMENT)",
                "the server is broken or hostile; raise MEMSYNC_MAX_ADVERTISEMENT only for a trusted one")
        self.buffer += chunk


def _is_hex(data: bytes) -> bool:
    return len(data) == 4 and all(c in b"0123456789abcdef" for c in data)
