"""The tips of a few named refs from a `git://` or smart HTTP(S) hub through git's protocol v2
`ls-refs` with a `ref-prefix` for each: the server sends those refs alone, where libgit2 (protocol v0 only) has it
send every ref it holds, ~70 bytes per memory of a branch hub, before anything else can happen
(docs/PERFORMANCE.md, "Negotiating with the tips a memory holds").

A server that does not speak v2 (an old git daemon answers a v0 advertisement), refuses the
request, redirects, or cannot be reached is left to libgit2: `tips` returns None and the caller reads the
refs as before (and libgit2 reports a failure in its usual words). What the server sends is
untrusted: pkt-lines longer than git allows, anything past MEMSYNC_MAX_ADVERTISEMENT bytes, past
MEMSYNC_NET_DEADLINE, or silent for MEMSYNC_IO_TIMEOUT, and a line that is not `<40 hex> <ref>`
end the read with an error; only the refs asked for are kept (docs/SECURITY.md, "The v2 ref
listing"). Over HTTP(S) the credential is memsync's own (credentials.http_secret, sent only after
the hub asks, only to the hub's host), the certificate checked against the system's CAs and
MEMSYNC_CA_BUNDLE, and no proxy is used.

A `Session` is one conversation with such a server (git:// keeps one connection for several
commands; smart HTTP sends each command as a POST of its own on one kept-alive connection), so
that a fetch (fetchv2.py) asks for the listing and the pack on it.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator
from typing import Protocol
from urllib.parse import unquote, urlsplit

from memsync.errors import RemoteError, RemoteUnreachable
from memsync.git import netlimits
from memsync.git.hub import HubUrl
from memsync.git.pktline import Reader, capabilities, listing, pkt, request, seconds
from memsync.git.sockets import ack_promptly


class Session(Protocol):
    """A protocol-v2 conversation: the server's capabilities, and its answer to each command."""

    capabilities: dict[str, str]

    def command(self, body: bytes) -> Reader | None:
        """Send one command's request; a reader of its answer (None: not an answer of git's)."""
        ...


def tips(hub: HubUrl, refs: list[str]) -> dict[str, str] | None:
    """{ref: tip} for those of `refs` the git:// or HTTP(S) hub has; None when v2 cannot answer
    (another kind of hub, a v0 server, a refusal, no connection): the caller asks libgit2 instead."""
    if hub.kind not in ("git", "http") or not refs or hub.port is None:
        return None
    with netlimits.watch(hub.port, hub.display, "cannot list") as watch:  # the deadline and minimum rate
        try:
            with session(hub, watch.limits, "cannot list") as talk:
                return None if talk is None else ls_refs(talk, refs)
        except (OSError, RemoteError) as exc:
            unanswered(exc, hub, watch, "cannot list")
            return None


def ls_refs(talk: Session, refs: list[str]) -> dict[str, str] | None:
    """The tips of `refs` through the session's ls-refs; None if the server offers none."""
    if "ls-refs" not in talk.capabilities:
        return None
    reader = talk.command(request(refs))
    return None if reader is None else listing(reader, set(refs))


def unanswered(exc: OSError | RemoteError, hub: HubUrl, watch: netlimits.Watch, doing: str) -> None:
    """What a failed v2 exchange means: a limit passed or a silent server (raised), a refusal of
    memsync's (raised), or no v2 to be had (None: libgit2's turn)."""
    if watch.tripped is not None:  # the watch shut the socket down past a limit
        raise watch.tripped from exc
    if isinstance(exc, TimeoutError):
        raise RemoteUnreachable(f"{doing} {hub.display}: the server did not answer in time ({exc})",
                                "check the server; MEMSYNC_CONNECT_TIMEOUT and MEMSYNC_IO_TIMEOUT "
                                "(seconds) set the limits") from exc
    if isinstance(exc, OSError):
        return None  # no connection, or the server hung up (an old daemon may, on a v2 request)
    raise exc


@contextlib.contextmanager
def session(hub: HubUrl, limits: netlimits.Limits, doing: str) -> Iterator[Session | None]:
    """A v2 session with the git:// or HTTP(S) hub; None if it does not speak v2."""
    host = urlsplit(hub.url).hostname
    assert hub.port is not None
    if not host:
        yield None
    elif hub.kind == "http":
        from memsync.git import lsrefs_http  # the same over smart HTTP(S)

        with lsrefs_http.session(hub, host, hub.port, limits, doing) as talk:
            yield talk
    else:
        with _GitSession.open(hub, host, hub.port, limits, doing) as talk:
            yield talk


class _GitSession:
    """git://: one connection, the v2 capabilities, then each command on it."""

    def __init__(self, sock: socket.socket, reader: Reader, offered: dict[str, str]) -> None:
        self.sock, self.reader, self.capabilities = sock, reader, offered

    @classmethod
    @contextlib.contextmanager
    def open(cls, hub: HubUrl, host: str, port: int, limits: netlimits.Limits,
             doing: str) -> Iterator[_GitSession | None]:
        parts = urlsplit(hub.url)
        with socket.create_connection((host, port), timeout=seconds("MEMSYNC_CONNECT_TIMEOUT", 10)) as sock:
            sock.settimeout(seconds("MEMSYNC_IO_TIMEOUT", 60))
            reader = Reader(lambda: _receive(sock), limits, hub.display, doing)
            hello = f"git-upload-pack {unquote(parts.path)}\0host={parts.netloc.rpartition('@')[2]}\0\0version=2\0"
            sock.sendall(pkt(hello.encode("utf-8", "surrogateescape")))
            offered = capabilities(reader)
            yield None if offered is None else cls(sock, reader, offered)

    def command(self, body: bytes) -> Reader:
        self.sock.sendall(body)
        return self.reader


def _receive(sock: socket.socket) -> bytes:
    ack_promptly(sock)
    return sock.recv(65536)
