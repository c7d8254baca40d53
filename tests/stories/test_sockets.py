"""Nagle's algorithm is off on a push's connection to the hub (memsync/git/sockets.py), and only
there: libgit2's own descriptor is left open and otherwise untouched."""

from __future__ import annotations

import os
import socket
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from memsync.git import sockets
from memsync.git.transport import Callbacks
from tests.conftest import Cli, write
from tests.helpers.servers import GitDaemon, make_bare_hub


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    with server:
        yield server


def nodelay(sock: socket.socket) -> int:
    return sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)


def test_only_connections_to_the_port_are_set(listener: socket.socket) -> None:
    port = listener.getsockname()[1]
    other = socket.socket()
    other.bind(("127.0.0.1", 0))
    other.listen(1)
    with other, socket.create_connection(("127.0.0.1", port)) as hub, \
            socket.create_connection(("127.0.0.1", other.getsockname()[1])) as elsewhere:
        assert nodelay(hub) == 0 and nodelay(elsewhere) == 0
        fds = len(os.listdir("/dev/fd"))
        assert sockets.send_promptly(port) == 1
        assert nodelay(hub) == 1 and nodelay(elsewhere) == 0
        assert len(os.listdir("/dev/fd")) == fds  # every duplicate closed
        hub.sendall(b"still open")  # the original descriptor works as before
        assert nodelay(listener) == 0  # a listening socket has no peer


def test_without_a_descriptor_listing_nothing_changes(listener: socket.socket) -> None:
    with socket.create_connection(listener.getsockname()) as hub:
        assert sockets.send_promptly(listener.getsockname()[1], fd_dir="/nonexistent-fd-dir") == 0
        assert nodelay(hub) == 0


def test_a_push_over_git_daemon_sends_without_delay(git_daemon: GitDaemon, cli: Cli, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    make_bare_hub(git_daemon.base_path / "hub.git")
    root = tmp_path / "research"
    root.mkdir()
    assert cli("init", "--remote", git_daemon.url("hub.git"), cwd=root).code == 0
    write(root, "a.md", "a\n")
    seen: list[int] = []
    verdict = Callbacks.push_update_reference

    def look(self: Callbacks, refname: str, message: str | None) -> None:
        # the server's verdict arrives on the push's connection, still open here
        for name in os.listdir("/dev/fd"):
            try:
                if not stat.S_ISSOCK(os.fstat(int(name)).st_mode):
                    continue
                sock = socket.socket(fileno=os.dup(int(name)))
            except OSError:
                continue
            with sock:
                try:
                    if sock.family == socket.AF_INET and sock.getpeername()[1] == git_daemon.port:
                        seen.append(nodelay(sock))
                except OSError:
                    pass
        verdict(self, refname, message)

    monkeypatch.setattr(Callbacks, "push_update_reference", look)
    r = cli("push", cwd=root)
    assert r.code == 0, r.err
    assert seen and all(seen), seen


@pytest.mark.parametrize(("url", "port"), [
    ("git://hub.example/x.git", 9418), ("git://hub.example:1234/x.git", 1234), ("http://hub.example/x", 80),
    ("https://hub.example/x", 443), ("https://user@hub.example:8443/x", 8443), ("ssh://git@hub.example/x", 22),
    ("ssh://git@hub.example:2222/x", 2222), ("git@hub.example:x.git", 22), ("/srv/hub.git", None),
])
def test_the_port_a_hub_is_reached_on(url: str, port: int | None) -> None:
    from memsync.git.hub import parse

    assert parse(url).port == port
