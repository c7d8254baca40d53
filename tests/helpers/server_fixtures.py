"""pytest fixtures that run real git servers (see tests/helpers/servers.py).

Loaded by tests/conftest.py (``pytest_plugins = ["tests.helpers.server_fixtures"]``).
Every fixture is function-scoped: each server starts in well under a second and a
test gets its own port, repositories and request log.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.servers import (
    GitDaemon,
    HangingServer,
    HttpGitServer,
    RefusingPort,
    SshGitServer,
    make_bare_hub,
    sshd_available,
)

HTTP_USER = "memsync"


@pytest.fixture
def git_daemon(tmp_path: Path) -> Iterator[GitDaemon]:
    """`git daemon` (push enabled) serving ``git_daemon.base_path``; url(rel) -> git://."""
    base = tmp_path / "git-daemon-root"
    base.mkdir()
    server = GitDaemon(base)
    with server:
        yield server
    server.cleanup()


@pytest.fixture
def daemon_hub(git_daemon: GitDaemon, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A bare hub served by `git_daemon` (hub.git, accepting any update: make_bare_hub), made the
    hub of every memsync command through MEMSYNC_REMOTE."""
    bare = make_bare_hub(git_daemon.base_path / "hub.git")
    monkeypatch.setenv("MEMSYNC_REMOTE", git_daemon.url("hub.git"))
    return bare


@pytest.fixture
def daemon_memory(daemon_hub: Path, cli: Any, tmp_path: Path) -> Path:
    """A memory `research` (one file, summary.md) pushed to `daemon_hub`; its directory."""
    root = tmp_path / "research"
    root.mkdir()
    assert cli("init", cwd=root).code == 0
    (root / "summary.md").write_text("# Summary\n")
    done = cli("push", cwd=root)
    assert done.code == 0, done.err
    return root


def _http(tmp_path: Path, name: str, tls: bool) -> Iterator[HttpGitServer]:
    root = tmp_path / name
    root.mkdir()
    server = HttpGitServer(root, user=HTTP_USER, token=secrets.token_hex(16), tls=tls)
    with server:
        yield server
    server.cleanup()


@pytest.fixture
def http_server(tmp_path: Path) -> Iterator[HttpGitServer]:
    """Smart-HTTP server on ``project_root``; Basic auth ``.user``/``.token`` required."""
    yield from _http(tmp_path, "http-root", tls=False)


@pytest.fixture
def https_server(tmp_path: Path) -> Iterator[HttpGitServer]:
    """Like http_server, over TLS with a self-signed cert (``.cert_path``)."""
    yield from _http(tmp_path, "https-root", tls=True)


@pytest.fixture
def ssh_server(tmp_path: Path) -> Iterator[SshGitServer]:
    """OpenSSH sshd; repos are addressed by absolute path: ``ssh_server.url(path)``.

    Skipped when sshd is not installed, except under CI (env CI set), where it fails.
    """
    if not sshd_available():
        message = "sshd not installed (apt-get install -y openssh-server)"
        if os.environ.get("CI"):
            pytest.fail(f"{message}: CI must provide it", pytrace=False)
        pytest.skip(message)
    server = SshGitServer(tmp_path / "sshd")
    with server:
        yield server


@pytest.fixture
def hanging_server() -> Iterator[HangingServer]:
    """Accepts connections and never answers: url(rel, scheme) for timeout tests."""
    with HangingServer() as server:
        yield server


@pytest.fixture
def refusing_port() -> Iterator[RefusingPort]:
    """A reserved 127.0.0.1 port where connections are refused at once."""
    with RefusingPort() as port:
        yield port
