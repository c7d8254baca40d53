"""The protocol-v2 ref listing on a git:// hub (git/lsrefs.py): a pull, status or run whose hub
has nothing new asks for the memory's branch alone and fetches nothing; a hub with something new
is fetched as before; a server older than v2 is read through libgit2 as before."""

from __future__ import annotations

from pathlib import Path

import pytest

from memsync.git import hub as hubs
from memsync.git import lsrefs
from tests.conftest import Cli, git, write
from tests.helpers.gitproto import git_server, v0_upload_pack
from tests.helpers.servers import GitDaemon, HttpGitServer, make_bare_hub

pytestmark = pytest.mark.server


def _memory(cli: Cli, tmp_path: Path, url: str, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("MEMSYNC_REMOTE", url)
    root = tmp_path / "research"
    root.mkdir()
    assert cli("init", cwd=root).code == 0
    write(root, "a.md", "a\n")
    done = cli("push", cwd=root)
    assert done.code == 0, done.err
    return root


def _another_writer(cli: Cli, tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    assert cli("clone", "research", str(copy)).code == 0
    write(copy, "b.md", "b\n")
    assert cli("push", cwd=copy).code == 0


def _hub(kind: str, request: pytest.FixtureRequest,
         monkeypatch: pytest.MonkeyPatch) -> tuple[str, HttpGitServer | None]:
    """A bare hub served over `kind` (git, http, https): its URL, and the HTTP server."""
    if kind == "git":
        daemon: GitDaemon = request.getfixturevalue("git_daemon")
        make_bare_hub(daemon.base_path / "hub.git")
        return daemon.url("hub.git"), None
    server: HttpGitServer = request.getfixturevalue(f"{kind}_server")
    make_bare_hub(server.project_root / "hub.git")
    monkeypatch.setenv("MEMSYNC_TOKEN", server.token)
    monkeypatch.setenv("MEMSYNC_USER", server.user)
    if server.cert_path is not None:
        monkeypatch.setenv("MEMSYNC_CA_BUNDLE", str(server.cert_path))
    return server.url("hub.git"), server


@pytest.mark.parametrize("kind", ["git", "http", "https"])
def test_nothing_new_is_not_fetched(kind: str, cli: Cli, tmp_path: Path, request: pytest.FixtureRequest,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMSYNC_V2_FETCH", "0")  # the listing before libgit2's fetch (test_v2_fetch.py: v2's)
    url, server = _hub(kind, request, monkeypatch)
    root = _memory(cli, tmp_path, url, monkeypatch)
    fetch_head = root / ".git" / "FETCH_HEAD"  # written by every libgit2 fetch
    fetch_head.unlink(missing_ok=True)
    for verb in ("pull", "status"):
        done = cli(verb, cwd=root)
        assert done.code == 0, done.err
    assert not fetch_head.exists()
    if server is not None:  # protocol v2, its ls-refs asked for the memory's branch alone
        posts = [r for r in server.requests if r.method == "POST" and r.path.endswith("/git-upload-pack")]
        assert posts and all(r.header("Git-Protocol") == "version=2" for r in posts[-2:])
    _another_writer(cli, tmp_path)
    done = cli("pull", cwd=root)
    assert done.code == 0, done.err
    assert (root / "b.md").read_text() == "b\n" and fetch_head.exists()
    fetch_head.unlink()
    monkeypatch.setenv("MEMSYNC_V2_LISTING", "0")  # the switch: libgit2's fetch every time
    assert cli("pull", cwd=root).code == 0
    assert fetch_head.exists()


def test_an_untrusted_certificate_gets_no_credential(https_server: HttpGitServer, cli: Cli, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The listing checks the certificate as libgit2 does: a self-signed one is refused, no
    token is sent, and the error is libgit2's (the listing leaves an unverified server to it)."""
    make_bare_hub(https_server.project_root / "hub.git")
    monkeypatch.setenv("MEMSYNC_TOKEN", https_server.token)
    for name in ("SSL_CERT_FILE", "SSL_CERT_DIR", "MEMSYNC_CA_BUNDLE", "GIT_SSL_CAINFO"):
        monkeypatch.delenv(name, raising=False)
    url = https_server.url("hub.git")
    assert lsrefs.tips(hubs.parse(url), ["refs/heads/memory/research"]) is None
    done = cli("clone", "research", str(tmp_path / "copy"), "--remote", url)
    assert done.code == 4 and "TLS certificate of 127.0.0.1 is not trusted" in done.err, done.err
    assert not any(r.header("Authorization") for r in https_server.requests)


def test_a_redirect_is_left_to_libgit2(http_server: HttpGitServer, monkeypatch: pytest.MonkeyPatch) -> None:
    make_bare_hub(http_server.project_root / "hub.git")
    monkeypatch.setenv("MEMSYNC_TOKEN", http_server.token)
    http_server.redirect("http://127.0.0.1:9/elsewhere/", prefix="/moved/")
    assert lsrefs.tips(hubs.parse(http_server.url("moved/hub.git")), ["refs/heads/memory/research"]) is None
    assert all(r.path.startswith("/moved/") for r in http_server.requests)


def test_a_refused_credential_is_one_clear_error(http_server: HttpGitServer, cli: Cli, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    make_bare_hub(http_server.project_root / "hub.git")
    monkeypatch.setenv("MEMSYNC_TOKEN", "not-the-token")
    done = cli("clone", "research", str(tmp_path / "copy"), "--remote", http_server.url("hub.git"))
    assert done.code == 4 and "refused the credential from MEMSYNC_TOKEN" in done.err, done.err
    assert "not-the-token" not in done.err + done.out
    assert http_server.wrong_credentials == 1  # asked once, not once by memsync and again by libgit2


def test_a_v0_server_is_read_through_libgit2(cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    base = tmp_path / "served"
    make_bare_hub(base / "hub.git")
    with git_server(v0_upload_pack(base)) as port:
        url = f"git://127.0.0.1:{port}/hub.git"
        assert lsrefs.tips(hubs.parse(url), ["refs/heads/memory/research"]) is None
        root = _memory(cli, tmp_path, url, monkeypatch)
        _another_writer(cli, tmp_path)
        done = cli("status", cwd=root)
        assert done.code == 0, done.err
        theirs = git("rev-parse", "refs/heads/memory/research", cwd=base / "hub.git").strip()
        assert theirs[:8] in done.out
        assert cli("pull", cwd=root).code == 0
    assert (root / "b.md").read_text() == "b\n"
