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
"""

from __future__ import annotations

import socket
from urllib.parse import unquote, urlsplit

from memsync.errors import RemoteError, RemoteUnreachable
from memsync.git import netlimits
from memsync.git.hub import HubUrl
from memsync.git.pktline import Reader, listing, pkt, request, seconds, speaks_v2


def tips(hub: HubUrl, refs: list[str]) -> dict[str, str] | None:
    """{ref: tip} for those of `refs` the git:// or HTTP(S) hub has; None when v2 cannot answer
    (another kind of hub, a v0 server, a refusal, no connection): the caller asks libgit2 instead."""
    if hub.kind not in ("git", "http") or not refs:
        return None
    parts = urlsplit(hub.url)
    host, port = parts.hostname, hub.port
    if not host or port is None:
        return None
    ask = _ask
    if hub.kind == "http":
        from memsync.git import lsrefs_http  # the same listing over smart HTTP(S)

        ask = lsrefs_http.ask
    with netlimits.watch(port, hub.display, "cannot list") as guard:  # the deadline and minimum rate
        try:
            return ask(hub, host, port, refs, guard.limits)
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


def _ask(hub: HubUrl, host: str, port: int, refs: list[str],
         limits: netlimits.Limits) -> dict[str, str] | None:
    """git://: one connection, the v2 capabilities, then the ls-refs command on it."""
    parts = urlsplit(hub.url)
    with socket.create_connection((host, port), timeout=seconds("MEMSYNC_CONNECT_TIMEOUT", 10)) as sock:
        sock.settimeout(seconds("MEMSYNC_IO_TIMEOUT", 60))
        reader = Reader(lambda: sock.recv(65536), limits, hub.display)
        hello = f"git-upload-pack {unquote(parts.path)}\0host={parts.netloc.rpartition('@')[2]}\0\0version=2\0"
        sock.sendall(pkt(hello.encode("utf-8", "surrogateescape")))
        if not speaks_v2(reader):
            return None
        sock.sendall(request(refs))
        return listing(reader, set(refs))
