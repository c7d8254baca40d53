"""A hostile git:// server against memsync's protocol-v2 fetch (git/fetchv2.py): a pack that lacks
the commit it listed, a commit whose tree is missing, a truncated pack, an oversized pkt-line, an
ERR line or a side-band error, an endless stream: each is one clear error, and the tracking ref
and the pack folder are as they were. A server without v2's `fetch` is left to libgit2."""

from __future__ import annotations

import itertools
import socket
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from memsync.errors import RemoteError
from memsync.git import fetchv2
from memsync.git import hub as hubs
from memsync.git.netlimits import AdvertisementTooLarge, NetLimitExceeded
from memsync.git.repo import GitRepo
from tests.conftest import git, write
from tests.helpers.gitproto import git_server, pkt

pytestmark = [pytest.mark.attack, pytest.mark.server]

REF = "refs/heads/memory/research"
TRACKING = "refs/remotes/origin/memory/research"
CAPS = (pkt("version 2\n") + pkt("agent=git/2.39\n") + pkt("ls-refs=unborn\n") + pkt("fetch=shallow\n")
        + pkt("object-format=sha1\n") + b"0000")


class Hub:
    """A source history (`old`, then `new` on the memory's branch, `other` elsewhere) and a
    memory whose tracking ref is at `old`."""

    def __init__(self, tmp_path: Path) -> None:
        self.src = tmp_path / "src"
        git("init", "-q", "-b", "memory/research", str(self.src), cwd=tmp_path)
        self.old = self._commit("a.md", "a\n")
        self.new = self._commit("b.md", "b\n")
        git("checkout", "-q", "--orphan", "other", cwd=self.src)
        self.other = self._commit("c.md", "c\n")
        self.memory = tmp_path / "memory"
        git("init", "-q", str(self.memory), cwd=tmp_path)
        git("fetch", "-q", str(self.src), f"{self.old}:{TRACKING}", cwd=self.memory)
        self.repo = GitRepo.open(self.memory)
        self.packs_before = self.packs()

    def _commit(self, name: str, text: str) -> str:
        write(self.src, name, text)
        git("add", name, cwd=self.src)
        git("-c", "user.name=a", "-c", "user.email=a@b", "commit", "-qm", name, cwd=self.src)
        return git("rev-parse", "HEAD", cwd=self.src).strip()

    def pack(self, *revs: str) -> bytes:
        import subprocess

        return subprocess.run(["git", "pack-objects", "--stdout", *(["--revs"] if "^" in "".join(revs) else [])],
                              input="\n".join(revs).encode() + b"\n", cwd=self.src, capture_output=True,
                              check=True).stdout

    def packs(self) -> list[str]:
        return sorted(p.name for p in (self.memory / ".git" / "objects" / "pack").iterdir())

    def unchanged(self) -> None:
        assert self.repo.ref_oid(TRACKING) == self.old
        assert self.packs() == self.packs_before
        assert not self.repo.has_object(self.new)


@pytest.fixture
def hub(tmp_path: Path) -> Hub:
    return Hub(tmp_path)


def _sideband(data: bytes, band: int = 1) -> bytes:
    return b"".join(pkt(bytes([band]) + data[i:i + 65000]) for i in range(0, len(data), 65000))


def _read_until(conn: socket.socket, end: bytes) -> None:
    seen = b""
    while not seen.endswith(end):
        chunk = conn.recv(65536)
        if not chunk:
            return
        seen += chunk


def _server(tip: str, answer: Callable[[], Iterator[bytes]]) -> Callable[[socket.socket, bytes], None]:
    """A v2 server listing `tip` for the memory's branch, then answering the fetch with `answer()`."""
    def serve(conn: socket.socket, request: bytes) -> None:
        conn.sendall(CAPS)
        _read_until(conn, b"0000")  # ls-refs
        conn.sendall(pkt(f"{tip} {REF}\n") + b"0000")
        _read_until(conn, b"done\n0000")  # the fetch command
        for chunk in answer():
            conn.sendall(chunk)
    return serve


def _fetch(port: int, hub: Hub) -> fetchv2.Fetched | None:
    return fetchv2.fetch(hub.repo, hubs.parse(f"git://127.0.0.1:{port}/hub.git"), REF, TRACKING)


def test_a_sound_pack_moves_the_tracking_ref(hub: Hub) -> None:
    """The same scripted server with an honest pack: the baseline the refusals below differ from."""
    pack = hub.pack(hub.new, f"^{hub.old}")
    with git_server(_server(hub.new, lambda: iter([pkt("packfile\n"), _sideband(b"counting\r", 2),
                                                   _sideband(pack), b"0000"]))) as port:
        assert _fetch(port, hub) == fetchv2.Fetched(hub.new)
    assert hub.repo.ref_oid(TRACKING) == hub.new and hub.repo.has_object(hub.new)


@pytest.mark.parametrize(("case", "said"), [
    ("another commit", "does not hold the commit it listed"),
    ("a commit without its tree", "refused the hub's pack (packfile is missing"),
    ("truncated, then a flush", "refused the hub's pack"),
    ("truncated, then hung up", "the connection ended before the pack's end"),
    ("oversized pkt-line", "malformed pkt-line"),
    ("ERR line", "the server said: upload-pack: not our ref"),
    ("side-band error", "the server said: fatal: disk on fire"),
    ("no pack", "answered the fetch without a pack"),
    ("unknown band", "pack stream is malformed (band 7)"),
])
def test_a_hostile_answer_is_one_clear_error(case: str, said: str, hub: Hub) -> None:
    good = hub.pack(hub.new, f"^{hub.old}")
    answers: dict[str, list[bytes]] = {
        "another commit": [pkt("packfile\n"), _sideband(hub.pack(hub.other, f"^{hub.old}")), b"0000"],
        "a commit without its tree": [pkt("packfile\n"), _sideband(hub.pack(hub.new)), b"0000"],
        "truncated, then a flush": [pkt("packfile\n"), _sideband(good[:-30]), b"0000"],
        "truncated, then hung up": [pkt("packfile\n"), _sideband(good[:-30])],
        "oversized pkt-line": [pkt("packfile\n"), b"ffff" + b"\x01" * 70000],
        "ERR line": [pkt("ERR upload-pack: not our ref " + hub.new + "\n")],
        "side-band error": [pkt("packfile\n"), _sideband(good[:20]), _sideband(b"fatal: disk\n on fire", 3)],
        "no pack": [pkt("acknowledgments\n"), pkt("NAK\n"), b"0000"],
        "unknown band": [pkt("packfile\n"), _sideband(good, 7), b"0000"],
    }
    with git_server(_server(hub.new, lambda: iter(answers[case]))) as port, \
            pytest.raises(RemoteError) as caught:
        _fetch(port, hub)
    assert said in str(caught.value) and "\n" not in str(caught.value), str(caught.value)
    hub.unchanged()


def test_an_endless_progress_stream_stops_at_the_cap(hub: Hub, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMSYNC_MAX_ADVERTISEMENT", "65536")

    def endless() -> Iterator[bytes]:
        yield pkt("packfile\n")
        while True:
            yield _sideband(b"Counting objects: 99%\r" * 100, 2)

    with git_server(_server(hub.new, endless)) as port, pytest.raises(AdvertisementTooLarge, match="besides the pack"):
        _fetch(port, hub)
    hub.unchanged()


@pytest.mark.slow
def test_an_endless_pack_stops_at_the_deadline(hub: Hub, monkeypatch: pytest.MonkeyPatch) -> None:
    """A pack that states 2**31 objects and streams small blobs for ever: MEMSYNC_NET_DEADLINE."""
    monkeypatch.setenv("MEMSYNC_NET_DEADLINE", "2")
    def endless() -> Iterator[bytes]:
        yield pkt("packfile\n")
        yield _sideband(b"PACK" + (2).to_bytes(4, "big") + (2**31).to_bytes(4, "big"))
        for n in itertools.count():  # blobs of 8 bytes, each its own
            yield _sideband(b"".join(b"\x38" + zlib.compress(b"%08d" % (n * 1000 + i)) for i in range(1000)))

    with git_server(_server(hub.new, endless)) as port, pytest.raises(NetLimitExceeded, match="MEMSYNC_NET_DEADLINE"):
        _fetch(port, hub)
    hub.unchanged()


@pytest.mark.slow
def test_a_trickling_pack_stops_at_the_minimum_rate(hub: Hub, monkeypatch: pytest.MonkeyPatch) -> None:
    """netlimits' watch measures the v2 fetch's own socket as it measures libgit2's."""
    monkeypatch.setenv("MEMSYNC_LOW_SPEED_LIMIT", "100000")
    monkeypatch.setenv("MEMSYNC_LOW_SPEED_TIME", "1")
    pack = hub.pack(hub.new, f"^{hub.old}")

    def trickle() -> Iterator[bytes]:
        yield pkt("packfile\n")
        for i in itertools.count():
            time.sleep(0.05)
            yield _sideband(pack[i % 8:i % 8 + 1], 2)  # a progress byte at a time

    with git_server(_server(hub.new, trickle)) as port, pytest.raises(NetLimitExceeded, match="minimum rate"):
        _fetch(port, hub)
    hub.unchanged()


@pytest.mark.parametrize("caps", [
    pkt("version 2\n") + pkt("ls-refs\n") + b"0000",  # no fetch command
    pkt("version 2\n") + pkt("ls-refs\n") + pkt("fetch\n") + pkt("object-format=sha256\n") + b"0000",
    pkt("0000000000000000000000000000000000000000 capabilities^{}\0multi_ack\n") + b"0000",  # v0
])
def test_a_server_without_a_v2_fetch_is_left_to_libgit2(caps: bytes, hub: Hub) -> None:
    def serve(conn: socket.socket, request: bytes) -> None:
        conn.sendall(caps)
        _read_until(conn, b"0000")
    with git_server(serve) as port:
        assert _fetch(port, hub) is None
    hub.unchanged()


# -- the same fetch over smart HTTP ------------------------------------------------------------------

def _http_hub(hub: Hub, fetch_answer: bytes) -> tuple[ThreadingHTTPServer, list[tuple[str, str | None]]]:
    """A smart HTTP server that asks for a credential, lists the memory's branch at `hub.new`, and
    answers the fetch with `fetch_answer`; the requests it saw (path, Authorization)."""
    seen: list[tuple[str, str | None]] = []

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _answer(self, body: bytes, content_type: str, status: int = 200) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            if status == 401:
                self.send_header("WWW-Authenticate", 'Basic realm="hub"')
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            seen.append((self.path, self.headers.get("Authorization")))
            if self.headers.get("Authorization") is None:
                self._answer(b"", "text/plain", 401)
                return
            self._answer(pkt("# service=git-upload-pack\n") + b"0000" + CAPS,
                         "application/x-git-upload-pack-advertisement")

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            seen.append((self.path, self.headers.get("Authorization")))
            listing = body.startswith(pkt("command=ls-refs\n"))
            self._answer(pkt(f"{hub.new} {REF}\n") + b"0000" if listing else fetch_answer,
                         "application/x-git-upload-pack-result")

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, seen


@pytest.mark.parametrize("case", ["sound", "truncated", "ERR line"])
def test_a_hostile_http_fetch_never_shows_the_credential(case: str, hub: Hub,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    token = "s3cret-token-never-shown"
    monkeypatch.setenv("MEMSYNC_TOKEN", token)
    pack = hub.pack(hub.new, f"^{hub.old}")
    answers = {"sound": pkt("packfile\n") + _sideband(pack) + b"0000",
               "truncated": pkt("packfile\n") + _sideband(pack[:-30]) + b"0000",
               "ERR line": pkt(f"ERR upload-pack: not our ref {hub.new} (token {token}?)\n")}
    server, seen = _http_hub(hub, answers[case])
    url = f"http://127.0.0.1:{server.server_address[1]}/hub.git"
    try:
        if case == "sound":
            assert fetchv2.fetch(hub.repo, hubs.parse(url), REF, TRACKING) == fetchv2.Fetched(hub.new)
            assert hub.repo.ref_oid(TRACKING) == hub.new
        else:
            with pytest.raises(RemoteError) as caught:
                fetchv2.fetch(hub.repo, hubs.parse(url), REF, TRACKING)
            said = str(caught.value) + (caught.value.hint or "")
            assert "\n" not in str(caught.value) and token not in said, said  # even when the server echoes it
            hub.unchanged()
    finally:
        server.shutdown()
        server.server_close()
    assert [path for path, _ in seen] == ["/hub.git/info/refs?service=git-upload-pack"] * 2 + \
        ["/hub.git/git-upload-pack"] * 2  # asked once without, then the GET, the listing, the fetch
    assert seen[0][1] is None and all(auth and auth.startswith("Basic ") for _, auth in seen[1:])


# -- a clone's fetch of the tip alone (`deepen 1`) ---------------------------------------------------

class Fresh:
    """A clone's repository before its first fetch (no commit, no ref), beside `hub`'s source."""

    def __init__(self, hub: Hub, tmp_path: Path) -> None:
        self.hub = hub
        self.root = tmp_path / "fresh"
        git("init", "-q", str(self.root), cwd=tmp_path)
        self.repo = GitRepo.open(self.root)

    def tip_pack(self, without: str | None = None) -> bytes:
        """A pack of `hub.new` alone: the commit, its tree and blobs, not its parent's objects
        (`without`: one path of the tree left out as well)."""
        import subprocess

        listed = git("rev-list", "--objects", "--no-walk", self.hub.new, cwd=self.hub.src).splitlines()
        ids = [line.split()[0] for line in listed if without is None or line.split()[1:] != [without]]
        return subprocess.run(["git", "pack-objects", "--stdout"], input="\n".join(ids).encode() + b"\n",
                              cwd=self.hub.src, capture_output=True, check=True).stdout

    def fetch(self, port: int) -> fetchv2.Fetched | None:
        return fetchv2.fetch(self.repo, hubs.parse(f"git://127.0.0.1:{port}/hub.git"), REF, TRACKING, depth=1)

    def untouched(self) -> None:
        git_dir = self.root / ".git"
        assert not (git_dir / "shallow").exists()
        assert list((git_dir / "objects" / "pack").iterdir()) == []
        assert self.repo.ref_oid(TRACKING) is None


def _deepened(shallow_info: list[str], pack: bytes) -> Callable[[], Iterator[bytes]]:
    section = [pkt("shallow-info\n"), *(pkt(line + "\n") for line in shallow_info), b"0001"] if shallow_info else []
    return lambda: iter([*section, pkt("packfile\n"), _sideband(pack), b"0000"])


def test_a_clone_fetches_the_tip_alone_and_says_where_its_history_stops(hub: Hub, tmp_path: Path) -> None:
    fresh = Fresh(hub, tmp_path)
    with git_server(_server(hub.new, _deepened([f"shallow {hub.new}"], fresh.tip_pack()))) as port:
        assert fresh.fetch(port) == fetchv2.Fetched(hub.new)
    assert (fresh.root / ".git" / "shallow").read_text() == hub.new + "\n"
    assert fresh.repo.ref_oid(TRACKING) == hub.new
    assert git("rev-list", "--count", TRACKING, cwd=fresh.root).strip() == "1"  # its parent is not asked for
    git("fsck", "--no-dangling", cwd=fresh.root)


@pytest.mark.parametrize(("case", "said"), [
    ("another commit named shallow", "shallow-info names a commit other than the one it listed"),
    ("an unshallow line", "shallow-info is malformed"),
    ("a malformed shallow line", "shallow-info is malformed"),
    ("no shallow-info", "does not say where its history stops"),
    ("a blob left out", "lacks objects of the version it listed (at 'b.md')"),
])
def test_a_hostile_answer_to_a_clone_leaves_nothing(case: str, said: str, hub: Hub, tmp_path: Path) -> None:
    """The indexer does not check a pack of the tip alone (it names the parent it leaves out):
    memsync checks the shallow-info and the tip's tree itself, and refuses before any ref moves."""
    fresh = Fresh(hub, tmp_path)
    pack = fresh.tip_pack()
    answers = {
        "another commit named shallow": _deepened([f"shallow {hub.old}"], pack),
        "an unshallow line": _deepened([f"unshallow {hub.new}"], pack),
        "a malformed shallow line": _deepened(["shallow ../../etc/passwd"], pack),
        "no shallow-info": _deepened([], pack),
        "a blob left out": _deepened([f"shallow {hub.new}"], fresh.tip_pack(without="b.md")),
    }
    with git_server(_server(hub.new, answers[case])) as port, pytest.raises(RemoteError) as caught:
        fresh.fetch(port)
    assert said in str(caught.value) and "\n" not in str(caught.value), str(caught.value)
    fresh.untouched()


def test_a_server_without_shallow_fetches_leaves_the_clone_to_libgit2(hub: Hub, tmp_path: Path) -> None:
    fresh = Fresh(hub, tmp_path)
    caps = CAPS.replace(pkt("fetch=shallow\n"), pkt("fetch\n"))

    def serve(conn: socket.socket, request: bytes) -> None:
        conn.sendall(caps)
        _read_until(conn, b"0000")
    with git_server(serve) as port:
        assert fresh.fetch(port) is None
    fresh.untouched()
