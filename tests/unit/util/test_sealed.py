"""util/sealed: during a run the credentials leave memsync's environment (memsync still reads
them through get()), the command's environment never holds them, and a token inside
MEMSYNC_REMOTE is stripped from what the command sees."""

from __future__ import annotations

import os

import pytest

from memsync.util import sealed


@pytest.mark.parametrize(("url", "shown"), [
    ("https://alice:tok3n@example.com/hub.git", "https://alice@example.com/hub.git"),
    ("https://tok3n@example.com/hub.git", "https://example.com/hub.git"),
    ("https://example.com/hub.git", "https://example.com/hub.git"),
    ("ssh://git@example.com/hub.git", "ssh://git@example.com/hub.git"),  # a user name, not a secret
    ("/srv/hub.git", "/srv/hub.git"),
])
def test_userinfo_is_stripped_from_http_urls_only(url: str, shown: str) -> None:
    assert sealed.strip_userinfo(url) == shown


def test_sealed_credentials_are_read_by_memsync_and_never_given_to_the_command(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMSYNC_TOKEN", "tok3n-value")
    monkeypatch.setenv("MEMSYNC_REMOTE", "https://alice:tok3n-value@example.com/hub.git")
    monkeypatch.setenv("SSH_AUTH_SOCK", "/tmp/agent.sock")
    with sealed.seal():
        assert "MEMSYNC_TOKEN" not in os.environ and "MEMSYNC_REMOTE" not in os.environ
        assert sealed.get("MEMSYNC_TOKEN") == "tok3n-value"
        env = sealed.child_environment()
        assert "MEMSYNC_TOKEN" not in env and "SSH_AUTH_SOCK" not in env
        assert env["MEMSYNC_REMOTE"] == "https://alice@example.com/hub.git"
        assert "tok3n-value" not in "".join(env.values())
        assert sealed.child_environment(keep_ssh_agent=True)["SSH_AUTH_SOCK"] == "/tmp/agent.sock"
    assert os.environ["MEMSYNC_TOKEN"] == "tok3n-value"  # put back afterwards
    assert os.environ["MEMSYNC_REMOTE"].startswith("https://alice:tok3n-value@")


def test_a_remote_without_a_credential_stays_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMSYNC_REMOTE", "git://127.0.0.1/hub.git")
    with sealed.seal():
        assert os.environ["MEMSYNC_REMOTE"] == "git://127.0.0.1/hub.git"
