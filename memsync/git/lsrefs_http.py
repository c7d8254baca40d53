"""lsrefs.py's listing over smart HTTP(S): `GET info/refs?service=git-upload-pack` and `POST
git-upload-pack` with `Git-Protocol: version=2`, as git's own client sends them.

Only what libgit2 would do with the same hub: no proxy, no redirect followed (a 3xx, like any
answer other than git's own, leaves the read to libgit2, which follows the first one as git
does), the certificate verified against the system's CAs plus MEMSYNC_CA_BUNDLE / GIT_SSL_CAINFO /
SSL_CERT_FILE, and the credential memsync would give libgit2 (credentials.http_secret) sent only
when the hub asks for one (401), only to the hub's own host, and never shown.
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import os
import ssl
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

from memsync.errors import AuthFailed
from memsync.git import netlimits
from memsync.git.hub import HubUrl
from memsync.git.pktline import Reader, capabilities, seconds
from memsync.git.sockets import ack_promptly

ADVERTISEMENT = "application/x-git-upload-pack-advertisement"
RESULT = "application/x-git-upload-pack-result"


@contextlib.contextmanager
def session(hub: HubUrl, host: str, port: int, limits: netlimits.Limits,
            doing: str) -> Iterator[HttpSession | None]:
    """A v2 session over HTTP(S): the capabilities (GET), then a POST per command on the same
    connection; None if the hub does not answer as a v2 server. An answer that is not HTTP (a
    server cut off, a trickle the watch shut down) is a ConnectionError, as on git://."""
    parts = urlsplit(hub.url)
    conn: http.client.HTTPConnection
    if parts.scheme.lower() == "https":
        conn = http.client.HTTPSConnection(host, port, timeout=seconds("MEMSYNC_CONNECT_TIMEOUT", 10),
                                           context=_tls())
    else:
        conn = http.client.HTTPConnection(host, port, timeout=seconds("MEMSYNC_CONNECT_TIMEOUT", 10))
    try:
        with contextlib.closing(conn):
            yield HttpSession.open(conn, hub, limits, doing)
    except http.client.HTTPException as exc:
        raise ConnectionResetError(f"not an HTTP answer ({type(exc).__name__})") from exc


class HttpSession:
    """One kept-alive connection to the hub: the capabilities read, then each command a POST
    carrying the credential the capabilities' GET was asked for (if any)."""

    def __init__(self, conn: http.client.HTTPConnection, hub: HubUrl, limits: netlimits.Limits, doing: str,
                 headers: dict[str, str], offered: dict[str, str]) -> None:
        self.conn, self.hub, self.limits, self.doing = conn, hub, limits, doing
        self.headers, self.capabilities = headers, offered
        self.path = urlsplit(hub.url).path.rstrip("/")
        self._answer: http.client.HTTPResponse | None = None

    @classmethod
    def open(cls, conn: http.client.HTTPConnection, hub: HubUrl, limits: netlimits.Limits,
             doing: str) -> HttpSession | None:
        parts = urlsplit(hub.url)
        conn.connect()
        assert conn.sock is not None
        conn.sock.settimeout(seconds("MEMSYNC_IO_TIMEOUT", 60))
        headers = {"Git-Protocol": "version=2", "User-Agent": "git/2 (memsync)", "Pragma": "no-cache"}
        target = f"{parts.path.rstrip('/')}/info/refs?service=git-upload-pack"
        answer = _get(conn, target, headers, limits, hub, parts.username)
        if answer is None:
            return None
        reader = Reader(lambda: answer.read1(65536), limits, hub.display, doing)
        offered = capabilities(reader)
        if offered is None:
            return None
        reader.drain()  # the response's end: the connection carries the next request
        answer.close()
        return cls(conn, hub, limits, doing, headers, offered)

    @property
    def hidden(self) -> tuple[str, ...]:
        """The credential sent (if the hub asked for one) in every form a server could echo."""
        sent = self.headers.get("Authorization", "").removeprefix("Basic ")
        if not sent:
            return ()
        account = base64.b64decode(sent).decode("utf-8", "replace")
        return (sent, account, account.partition(":")[2])

    def command(self, body: bytes) -> Reader | None:
        if self._answer is not None:  # the previous command's answer, read to its end
            Reader(lambda: self._read1(), self.limits, self.hub.display, self.doing).drain()
            self._answer.close()
        self.conn.request("POST", f"{self.path}/git-upload-pack", body=body,
                          headers={**self.headers, "Content-Type": "application/x-git-upload-pack-request",
                                   "Accept": RESULT})
        result = self._answer = self.conn.getresponse()
        if result.status != 200 or result.getheader("Content-Type", "") != RESULT:
            return None
        reader = Reader(self._read1, self.limits, self.hub.display, self.doing)
        reader.hidden = self.hidden
        return reader

    def _read1(self) -> bytes:
        assert self._answer is not None
        if self.conn.sock is not None:
            ack_promptly(self.conn.sock)
        return self._answer.read1(65536)


def _get(conn: http.client.HTTPConnection, target: str, headers: dict[str, str], limits: netlimits.Limits,
         hub: HubUrl, user: str | None) -> http.client.HTTPResponse | None:
    """The capability advertisement's response; the credential added (to `headers`) if the hub
    asks for one. None: an answer that is not git's (libgit2 reads the hub instead)."""
    from memsync.git.credentials import http_secret

    conn.request("GET", target, headers=headers)
    answer = conn.getresponse()
    if answer.status == 401:
        Reader(lambda: answer.read1(65536), limits, hub.display).drain()
        answer.close()
        secret = http_secret(hub, user)
        if secret is None:
            return None  # libgit2 asks the same sources and says none are set
        token = base64.b64encode(f"{secret.user}:{secret.password}".encode()).decode("ascii")
        headers["Authorization"] = f"Basic {token}"
        conn.request("GET", target, headers=headers)
        answer = conn.getresponse()
        if answer.status == 401:
            raise AuthFailed(f"{hub.display} refused the credential from {secret.source}",
                             "check that it is valid, not expired and allowed to read and write the "
                             "repository (and MEMSYNC_USER, if the server needs a user name)")
    if answer.status != 200 or answer.getheader("Content-Type", "") != ADVERTISEMENT:
        return None
    return answer


def _tls() -> ssl.SSLContext:
    """The system's CAs plus the bundle credentials.configure_tls gives libgit2."""
    context = ssl.create_default_context()
    name = next((n for n in ("MEMSYNC_CA_BUNDLE", "GIT_SSL_CAINFO", "SSL_CERT_FILE") if os.environ.get(n)), None)
    if name is not None:
        path = Path(os.environ[name]).expanduser()
        if path.is_dir():
            context.load_verify_locations(capath=str(path))
        elif path.exists():
            context.load_verify_locations(cafile=str(path))
    return context
