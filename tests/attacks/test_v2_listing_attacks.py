"""A hostile git:// or HTTP server against memsync's protocol-v2 ref listing (git/lsrefs.py): what it
sends is bounded (pkt-line size, MEMSYNC_MAX_ADVERTISEMENT, MEMSYNC_IO_TIMEOUT), checked (a ref
line is `<40 hex> <ref>`), and only the refs asked for are believed; a server that answers in
protocol v0 or refuses is left to libgit2."""

from __future__ import annotations

import contextlib
import itertools
import socket
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from memsync.errors import RemoteError, RemoteUnreachable
from memsync.git import hub as hubs
from memsync.git import lsrefs
from memsync.git.netlimits import AdvertisementTooLarge
from tests.conftest import Cli
from tests.helpers.gitproto import git_server, pkt

pytestmark = [pytest.mark.attack, pytest.mark.server]

REF = "refs/heads/memory/research"
OID = "1" * 40
CAPS = pkt("version 2\n") + pkt("agent=git/2.39\n") + pkt("ls-refs=unborn\n") + b"0000"


def _v2(*listing: bytes) -> Callable[[socket.socket, bytes], None]:
    """A v2 server that answers ls-refs with `listing` (raw bytes, sent as they are)."""
    def answer(conn: socket.socket, request: bytes) -> None:
        conn.sendall(CAPS)
        conn.recv(65536)  # the ls-refs command
        for chunk in listing:
            conn.sendall(chunk)
    return answer


def _tips(port: int) -> dict[str, str] | None:
    return lsrefs.tips(hubs.parse(f"git://127.0.0.1:{port}/hub.git"), [REF])


def test_an_oversized_pkt_line_is_refused() -> None:
    with git_server(_v2(b"ffff" + b"x" * 70000)) as port, pytest.raises(RemoteError, match="malformed pkt-line"):
        _tips(port)


def test_a_bogus_id_is_refused() -> None:
    with git_server(_v2(pkt(f"{'z' * 40} {REF}\n"), b"0000")) as port, \
            pytest.raises(RemoteError, match="ref listing is malformed"):
        _tips(port)


def test_an_endless_listing_stops_at_the_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMSYNC_MAX_ADVERTISEMENT", "65536")
    endless = (pkt(f"{OID} {REF}-{i:08d}\n") for i in range(10**8))

    def answer(conn: socket.socket, request: bytes) -> None:
        conn.sendall(CAPS)
        conn.recv(65536)
        for line in endless:
            conn.sendall(line)

    with git_server(answer) as port, pytest.raises(AdvertisementTooLarge, match="MEMSYNC_MAX_ADVERTISEMENT"):
        _tips(port)


def test_only_the_refs_asked_for_are_believed() -> None:
    """A ref-prefix also matches longer names: the server's `research-evil` is not `research`."""
    listing = pkt(f"{OID} {REF}-evil\n") + pkt(f"{OID} {REF}/evil\n") + b"0000"
    with git_server(_v2(listing)) as port:
        assert _tips(port) == {}
    with git_server(_v2(pkt(f"{OID} {REF}\n") + pkt(f"{'2' * 40} {REF}\n") + b"0000")) as port:
        assert _tips(port) == {REF: OID}  # the first of two claims, as libgit2 reads them


@pytest.mark.parametrize("reply", [
    pkt(f"{OID} HEAD\0multi_ack side-band-64k\n") + pkt(f"{OID} {REF}\n") + b"0000",  # a v0 server
    pkt("version 1\n") + pkt(f"{OID} {REF}\0side-band-64k\n") + b"0000",  # a v1 server
    pkt("ERR access denied or repository not exported: /hub.git\n"),  # a refusal
    pkt("version 2\n") + pkt("agent=other\n") + b"0000",  # v2 without ls-refs
    b"",  # a server that hangs up
])
def test_a_server_without_a_v2_listing_is_left_to_libgit2(reply: bytes) -> None:
    def answer(conn: socket.socket, request: bytes) -> None:
        conn.sendall(reply)
    with git_server(answer) as port:
        assert _tips(port) is None


@pytest.mark.slow
def test_a_silent_server_times_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMSYNC_IO_TIMEOUT", "1")

    def answer(conn: socket.socket, request: bytes) -> None:
        conn.recv(1)  # until the client gives up

    with git_server(answer) as port, pytest.raises(RemoteUnreachable, match="did not answer in time"):
        _tips(port)


def test_a_clone_from_a_malformed_listing_is_one_clear_error(cli: Cli, tmp_path: Path) -> None:
    with git_server(_v2(pkt(f"{OID[:39]}  {REF}\n"), b"0000")) as port:
        done = cli("clone", "research", str(tmp_path / "copy"), "--remote", f"git://127.0.0.1:{port}/hub.git")
    assert done.code == 4, (done.out, done.err)
    # a clone's first contact is its fetch (no listing before it): the fetch's reading of the reply
    errors = [line for line in done.err.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, done.err
    assert errors[0].startswith(f"error: cannot fetch from git://127.0.0.1:{port}/hub.git: "), done.err
    assert "\nhint: " in done.err and "Traceback" not in done.err
    assert not (tmp_path / "copy").exists()


# -- the same listing over smart HTTP ---------------------------------------------------------------

def _http_server(body: Callable[[], Iterator[bytes]], content_type: str) -> ThreadingHTTPServer:
    """An HTTP server answering every GET with `body()` (chunks) under `content_type`."""
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            self.end_headers()
            with contextlib.suppress(OSError):
                for chunk in body():
                    self.wfile.write(chunk)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.mark.parametrize("case", ["endless", "oversized", "v0"])
def test_a_hostile_http_listing(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMSYNC_MAX_ADVERTISEMENT", "65536")
    service = pkt("# service=git-upload-pack\n") + b"0000"
    bodies: dict[str, Callable[[], Iterator[bytes]]] = {
        "endless": lambda: itertools.chain([service, pkt("version 2\n")],
                                           (pkt(f"agent=x{i}\n") for i in itertools.count())),
        "oversized": lambda: iter([pkt("version 2\n") + b"ffff" + b"x" * 100]),
        "v0": lambda: iter([service + pkt(f"{OID} HEAD\0multi_ack\n") + pkt(f"{OID} {REF}\n") + b"0000"]),
    }
    server = _http_server(bodies[case], "application/x-git-upload-pack-advertisement")
    hub = hubs.parse(f"http://127.0.0.1:{server.server_address[1]}/hub.git")
    try:
        if case == "endless":
            with pytest.raises(AdvertisementTooLarge, match="MEMSYNC_MAX_ADVERTISEMENT"):
                lsrefs.tips(hub, [REF])
        elif case == "oversized":
            with pytest.raises(RemoteError, match="malformed pkt-line"):
                lsrefs.tips(hub, [REF])
        else:
            assert lsrefs.tips(hub, [REF]) is None  # a v0 server: libgit2's to read
    finally:
        server.shutdown()
        server.server_close()
