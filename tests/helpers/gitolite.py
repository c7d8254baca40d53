"""A gitolite server for one test, and memsync run as the sandbox holding one of its users' keys
(tests/stories/test_multitenant_hub.py, test_gitolite_wild.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.servers import GitoliteServer, gitolite_available

USERS = ["sandbox-a", "sandbox-b"]


def started(tmp_path: Path, rules: str) -> Iterator[GitoliteServer]:
    """A fixture's body: gitolite with `rules` for USERS, stopped after the test (skipped where
    gitolite or sshd is missing; on CI that is a failure)."""
    if not gitolite_available():
        message = "gitolite or sshd not installed (apt-get install -y gitolite3 openssh-server)"
        if os.environ.get("CI"):
            pytest.fail(f"{message}: CI must provide it", pytrace=False)
        pytest.skip(message)
    server = GitoliteServer(tmp_path / "gitolite-sshd", USERS)
    server.configure(rules)
    with server:
        yield server


def memsync_as(server: GitoliteServer, user: str, tmp_path: Path, *args: str, cwd: Path,
               **env: str) -> subprocess.CompletedProcess[str]:
    """memsync as the sandbox holding `user`'s key (credentials from the environment only)."""
    known = tmp_path / "known_hosts"
    server.write_known_hosts(known)
    full = dict(os.environ, MEMSYNC_SSH_KEY=str(server.key(user)), MEMSYNC_KNOWN_HOSTS=str(known),
                MEMSYNC_HOME=str(tmp_path / f"home-{user}"), **env)
    return subprocess.run([sys.executable, "-m", "memsync", *args], cwd=cwd, env=full, capture_output=True,
                          text=True, timeout=120)
