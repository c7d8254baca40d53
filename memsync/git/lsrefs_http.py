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
from pathlib import Path
from urllib.parse import urlsplit

from memsync.errors import AuthFailed
from memsync.git import netlimits
from memsync.git.hub import HubUrl
from memsync.git.pktline import Reader, listing, request, seconds, speaks_v2

ADVERTISEMENT = "application/x-git-upload-pack-advertisement"
RESULT = "application/x-git-upload-pack-result"


def ask(hub: HubUrl, host: str, port: int, refs: list[str], limits: netlimits.Limits) -> dict[str, str] | None:
    """The listing over HTTP(S); an answer that is not HTTP (a server cut off, a trickle the
    watch shut down) is a ConnectionError, as on git://."""
    try:
        return _ask(hub, host, port, refs, limits)
    except http.client.HTTPException as exc:
        raise ConnectionResetError(f"not an HTTP answer ({type(exc).__name__})") from exc


def _ask(hub: HubUrl, host: str, port: int, refs: list[str], limits: netlimits.Limits) -> dict[str, str] | None:
    parts = urlsplit(hub.url)
    path = parts.path.rstrip("/")
    conn: http.client.HTTPConnection
    if parts.scheme.lower() == "https":
        conn = http.client.HTTPSConnection(host, port, timeout=seconds("MEMSYNC_CONNECT_TIMEOUT", 10),
                                           context=_tls())
    else:
        conn = http.client.HTTPConnection(host, port, timeout=seconds("MEMSYNC_CONNECT_TIMEOUT", 10))
    with contextlib.closing(conn):
        conn.connect()
        assert conn.sock is not None
        conn.sock.settimeout(seconds("MEMSYNC_IO_TIMEOUT", 60))
        headers = {"Git-Protocol": "version=2", "User-Agent": "git/2 (memsync)", "Pragma": "no-cache"}
        answer = _get(conn, f"{path}/info/refs?service=git-upload-pack", headers, limits, hub, parts.username)
        if answer is None:
            return None
        reader = Reader(lambda: answer.read1(65536), limits, hub.display)
        if not speaks_v2(reader):
            return None
        reader.drain()  # the response's end: the connection carries the next request
        answer.close()
        conn.request("POST", f"{path}/git-upload-pack", body=request(refs),
                     headers={**headers, "Content-Type": "application/x-git-upload-pack-request", "Accept": RESULT})
        result = conn.getresponse()
        if result.status != 200 or result.getheader("Content-Type", "") != RESULT:
            return None
        reader = Reader(lambda: result.read1(65536), limits, hub.display)
        return listing(reader, set(refs))


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
