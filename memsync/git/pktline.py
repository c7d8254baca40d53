"""git's pkt-lines and protocol v2's `ls-refs` exchange, shared by the listing over git://
(lsrefs.py) and over smart HTTP(S) (lsrefs_http.py): a reader bounded by the operation's limits,
and the checks on what a server lists."""

from __future__ import annotations

import contextlib
import math
import os
import re
import time
from collections.abc import Callable

from memsync.errors import RemoteError
from memsync.git import netlimits

MAX_PKT = 65520  # git's largest pkt-line, its 4 length digits included
_FLUSH, _DELIM = b"0000", b"0001"
_REF_LINE = re.compile(rb"([0-9a-f]{40}) (refs/[^ \x00-\x1f\x7f]+)(?: [^\n]*)?\n?")

class _Malformed(RemoteError):
    pass


def pkt(data: bytes) -> bytes:
    return b"%04x" % (len(data) + 4) + data

def request(refs: list[str]) -> bytes:
    """The ls-refs command, one ref-prefix per ref."""
    return b"".join([pkt(b"command=ls-refs\n"), _DELIM, *(pkt(b"ref-prefix %s\n" % r.encode()) for r in refs),
                     _FLUSH])


def seconds(name: str, default: float) -> float:
    try:
        value = float(os.environ.get(name, "") or default)
    except ValueError:
        return default
    return max(1.0, value) if math.isfinite(value) else default


def speaks_v2(reader: Reader) -> bool:
    """Read the server's first answer: a v2 capability list offering ls-refs, or anything else
    (smart HTTP may put its `# service=` line and a flush first)."""
    offered = capabilities(reader)
    return offered is not None and "ls-refs" in offered


def capabilities(reader: Reader) -> dict[str, str] | None:
    """The server's v2 capabilities ({name: value, "" if none}) from its first answer; None for
    anything else: a v0/v1 advertisement or an ERR line, libgit2's to read."""
    first = reader.line()
    if first is not None and first.startswith(b"# service="):
        while reader.line() is not None:
            pass
        first = reader.line()
    if first != b"version 2":
        return None
    offered: dict[str, str] = {}
    while (line := reader.line()) is not None:
        name, _, value = line.decode("utf-8", "replace").partition("=")
        offered.setdefault(name, value)
    return offered


def listing(reader: Reader, wanted: set[str]) -> dict[str, str]:
    found: dict[str, str] = {}
    while (line := reader.line()) is not None:
        match = _REF_LINE.fullmatch(line)
        if match is None:
            raise _Malformed(f"{reader.doing} {reader.where}: the hub's ref listing is malformed "
                             f"({reader.shown(line)[:80]!r})",
                             "the server is not a git server, or a broken one; nothing was changed")
        name = match.group(2).decode("utf-8", "surrogateescape")
        if name in wanted and name not in found:  # a ref-prefix also matches longer names
            found[name] = match.group(1).decode()
    return found


class Reader:
    """pkt-lines from a connection (`receive`: its next bytes, b"" at its end), under the
    operation's deadline and byte cap."""

    def __init__(self, receive: Callable[[], bytes], limits: netlimits.Limits, where: str,
                 doing: str = "cannot list") -> None:
        self.receive, self.limits, self.where, self.doing = receive, limits, where, doing
        self.deadline = time.monotonic() + limits.deadline if limits.deadline else math.inf
        self.buffer = bytearray()
        self.at = 0  # where the next pkt-line starts in buffer
        self.read = 0
        self.cap: float = limits.max_advertisement  # bytes read in all (a fetch's pack: counted by its reader)
        self.ended = False  # the last packet read was a flush (not a delim)
        self.hidden: tuple[str, ...] = ()  # the credential sent on this connection, never shown

    def shown(self, said: bytes) -> str:
        """What the server said, as an error may quote it: the credential sent to it masked (a
        hostile server may echo it), then folded to one short line (netlimits.server_text)."""
        text = said.decode("utf-8", "replace")
        for secret in self.hidden:
            if secret:
                text = text.replace(secret, "***")
        return netlimits.server_text(text)

    def line(self) -> bytes | None:
        """The next pkt-line's payload without its newline; None for a flush or delim packet."""
        payload = self.payload()
        return None if payload is None else payload.removesuffix(b"\n")

    def payload(self) -> bytes | None:
        """The next pkt-line's payload as it is; None for a flush or delim packet (`ended` says which)."""
        head = self._take(4)
        if head in (_FLUSH, _DELIM):
            self.ended = head == _FLUSH
            return None
        size = int(head, 16) if _is_hex(head) else -1
        if not 4 <= size <= MAX_PKT:
            raise _Malformed(f"{self.doing} {self.where}: the hub sent a malformed pkt-line "
                             f"(length {head.decode('ascii', 'replace')!r})",
                             "the server is not a git server, or a broken one; nothing was changed")
        return self._take(size - 4)

    def _take(self, n: int) -> bytes:
        while len(self.buffer) - self.at < n:
            self._receive()
        taken = bytes(self.buffer[self.at:self.at + n])
        self.at += n
        if self.at > 65536:  # drop what was read, now and then (not on every line)
            del self.buffer[:self.at]
            self.at = 0
        return taken

    def drain(self) -> None:
        """Read to the connection's end (a response before the next request), under the cap."""
        with contextlib.suppress(ConnectionResetError):
            while True:
                self._receive()

    def _receive(self) -> None:
        if time.monotonic() > self.deadline:
            raise netlimits.NetLimitExceeded(
                f"{self.doing} {self.where}: stopped after {self.limits.deadline:g} s, the limit for one "
                f"network operation (MEMSYNC_NET_DEADLINE={self.limits.deadline:g})",
                "check the server; raise MEMSYNC_NET_DEADLINE for a slow but sound one")
        chunk = self.receive()
        if not chunk:
            raise ConnectionResetError("the server closed the connection")
        self.read += len(chunk)
        if self.read > self.cap:
            raise netlimits.AdvertisementTooLarge(
                f"{self.doing} {self.where}: the server sent more than {self.limits.max_advertisement:,} "
                "bytes of ref listing (MEMSYNC_MAX_ADVERTISEMENT)",
                "the server is broken or hostile; raise MEMSYNC_MAX_ADVERTISEMENT only for a trusted one")
        self.buffer += chunk


def _is_hex(data: bytes) -> bool:
    return len(data) == 4 and all(c in b"0123456789abcdef" for c in data)
