"""Credentials go only to the host they belong to: a hub that redirects to another host gets
none of them there (git's rule: a credential is tied to the URL's host).

The hub (127.0.0.1) answers 302 to a second server on 127.0.0.2 that records every request; it
would accept the same token, so a leak would also show up as a successful command.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import Cli, git, memsync_cmd
from tests.helpers.figures import Figures, figures
from tests.helpers.server_fixtures import HTTP_USER
from tests.helpers.servers import HttpGitServer, make_bare_hub

__all__ = ["figures"]

pytestmark = [pytest.mark.attack, pytest.mark.server]

OTHER_HOST = "127.0.0.2"


@pytest.fixture
def pair(http_server: HttpGitServer, tmp_path: Path) -> Iterator[tuple[HttpGitServer, HttpGitServer]]:
    """(the hub, the host it redirects to), sharing one user, token and repository."""
    make_bare_hub(http_server.project_root / "hub.git")
    other = HttpGitServer(http_server.project_root, user=HTTP_USER, token=http_server.token, host=OTHER_HOST)
    with other:
        yield http_server, other
    other.cleanup()


def _leaked(server: HttpGitServer, secret: str) -> list[str]:
    """Authorization headers the server received (decoded), and whether they hold the secret."""
    seen = []
    for request in server.requests:
        value = request.header("Authorization")
        if value:
            decoded = base64.b64decode(value.split()[-1]).decode(errors="replace") if value.startswith("Basic ") \
                else value
            seen.append(decoded)
    return [s for s in seen if secret in s] or seen


def _list(url: str, cwd: Path, **env: str) -> tuple[int, str]:
    import os

    # MEMSYNC_REMOTE: a credential in --remote is refused before anything is sent
    proc = memsync_cmd("list", cwd=cwd, env=dict(os.environ, MEMSYNC_REMOTE=url, **env), timeout=60)
    return proc.returncode, proc.stderr


@pytest.mark.parametrize("source", ["MEMSYNC_TOKEN", "url", "netrc", "helper"])
@pytest.mark.parametrize("when", ["first request", "after authenticating"])
def test_redirect_to_another_host_gets_no_credential(pair: tuple[HttpGitServer, HttpGitServer], tmp_path: Path,
                                                      source: str, when: str, figures: Figures) -> None:
    hub, other = pair
    figures.add("security attacks")
    hub.redirect(other.url(""), authorized_only=(when == "after authenticating"))
    url, env = hub.url("hub.git"), {}
    if source == "MEMSYNC_TOKEN":
        env = {"MEMSYNC_TOKEN": hub.token, "MEMSYNC_USER": hub.user}
    elif source == "url":
        url = url.replace("://", f"://{hub.user}:{hub.token}@")
    elif source == "netrc":
        netrc = Path.home() / ".netrc"
        netrc.write_text(f"machine 127.0.0.1\n  login {hub.user}\n  password {hub.token}\n")
        netrc.chmod(0o600)
    else:
        store = tmp_path / "git-credentials"
        store.write_text(f"http://{hub.user}:{hub.token}@127.0.0.1%3a{hub.port}\n")
        git("config", "--global", "credential.helper", f"store --file={store}", cwd=tmp_path)
    code, err = _list(url, tmp_path, **env)
    assert not _leaked(other, hub.token), f"{source} sent to {OTHER_HOST} ({when})"
    assert code == 4, err
    assert hub.token not in err
    assert f"redirected to http://{OTHER_HOST}:{other.port}" in err and "hint: " in err
    figures.add("security attacks refused")


def test_redirect_within_the_same_host_still_authenticates(http_server: HttpGitServer, tmp_path: Path) -> None:
    """A hub that moved to another path on the same host keeps working (GitHub renames do this)."""
    make_bare_hub(http_server.project_root / "new.git")
    http_server.redirect(http_server.url("new.git"), prefix="/old.git/")
    code, err = _list(http_server.url("old.git"), tmp_path, MEMSYNC_TOKEN=http_server.token,
                      MEMSYNC_USER=http_server.user)
    assert code == 0, err
    assert any(r.path.startswith("/new.git/") and r.header("Authorization") for r in http_server.requests)


def test_later_redirect_is_not_followed_whatever_the_memory_config_says(
        pair: tuple[HttpGitServer, HttpGitServer], tmp_path: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch,
        figures: Figures) -> None:
    """The memory's .git/config may ask libgit2 to follow every redirect (http.followRedirects);
    a hub that authenticates the first request and redirects the next (the pack request) to
    another host still sends nothing there: only the initial request's redirect is followed."""
    hub, other = pair
    figures.add("security attacks")
    monkeypatch.setenv("MEMSYNC_REMOTE", hub.url("hub.git"))
    monkeypatch.setenv("MEMSYNC_TOKEN", hub.token)
    monkeypatch.setenv("MEMSYNC_USER", hub.user)
    root = tmp_path / "research"
    root.mkdir()
    assert cli("init", cwd=root).code == 0
    (root / "a.md").write_text("a\n")
    assert cli("push", cwd=root).code == 0
    other_copy = tmp_path / "other-copy"
    assert cli("clone", "research", str(other_copy), "--remote", str(hub.project_root / "hub.git")).code == 0
    (other_copy / "b.md").write_text("b\n")
    monkeypatch.delenv("MEMSYNC_REMOTE")  # the copy belongs to the hub's directory, as it was cloned
    assert cli("push", cwd=other_copy).code == 0  # so the pull below has a pack to ask for
    monkeypatch.setenv("MEMSYNC_REMOTE", hub.url("hub.git"))
    git("config", "http.followRedirects", "true", cwd=root)
    hub.redirect(other.url("hub.git"), authorized_only=True, prefix="/hub.git/git-")
    r = cli("pull", cwd=root)
    assert other.requests == []
    assert r.code == 4 and "redirected a request memsync does not follow" in r.err
    assert not (root / "b.md").exists()
    figures.add("security attacks refused")
