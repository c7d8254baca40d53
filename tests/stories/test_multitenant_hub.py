"""A multi-tenant hub on a real self-hosted server (docs/REMOTES.md, "One hub, many sandboxes"):
gitolite over SSH on 127.0.0.1, one key per sandbox. Each sandbox writes only its own memories
and reads the shared one; nobody force-pushes or deletes. memsync's refusals name the memory and
the server's rule (exit 5), and `list` shows what the key may read."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import git, write
from tests.helpers.gitolite import memsync_as, started
from tests.helpers.servers import GitoliteServer

pytestmark = pytest.mark.server

RULES = """\
repo hub
    RW      refs/heads/memory/a-                =   sandbox-a
    RW      refs/heads/memory/b-                =   sandbox-b
    RW+     refs/memsync/queue/memory/a-        =   sandbox-a
    RW+     refs/memsync/queue/memory/b-        =   sandbox-b
    R                                           =   sandbox-a sandbox-b
    RW      refs/heads/memory/                  =   admin
"""


@pytest.fixture
def gitolite(tmp_path: Path) -> Iterator[GitoliteServer]:
    yield from started(tmp_path, RULES)


def _as(server: GitoliteServer, user: str, tmp_path: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return memsync_as(server, user, tmp_path, *args, cwd=cwd)


def _memory(server: GitoliteServer, user: str, tmp_path: Path, name: str, files: dict[str, str]) -> Path:
    root = tmp_path / f"{user}-{name}"
    root.mkdir()
    for rel, text in files.items():
        write(root, rel, text)
    done = _as(server, user, tmp_path, "init", "--name", name, "--remote", server.gitolite_url("hub"), cwd=root)
    assert done.returncode == 0, done.stderr
    return root


def test_each_sandbox_writes_its_own_memories_and_reads_the_shared_one(gitolite: GitoliteServer,
                                                                       tmp_path: Path) -> None:
    url = gitolite.gitolite_url("hub")
    shared = _memory(gitolite, "admin", tmp_path, "shared", {"reference.md": "the team's facts\n"})
    assert _as(gitolite, "admin", tmp_path, "push", cwd=shared).returncode == 0
    mine = _memory(gitolite, "sandbox-a", tmp_path, "a-notes", {"notes.md": "a's notes\n"})
    pushed = _as(gitolite, "sandbox-a", tmp_path, "push", cwd=mine)
    assert pushed.returncode == 0, pushed.stderr

    # a run of sandbox-a: its own memory writable, the shared one read-only
    work = tmp_path / "run-a"
    work.mkdir()
    agent = "import os, pathlib; pathlib.Path(os.environ['MEMSYNC_MEMORY_A_NOTES_DIR'], 'run.md').write_text('ran\\n')"
    ran = _as(gitolite, "sandbox-a", tmp_path, "run", "--remote", url, "--memory", "a-notes:mem",
              "--memory", "shared:ref:ro", "--", sys.executable, "-c", agent, cwd=work)
    assert ran.returncode == 0, ran.stderr
    assert (work / "ref" / "reference.md").read_text() == "the team's facts\n"
    hub = gitolite.repo_path("hub")
    assert git("show", "memory/a-notes:run.md", cwd=hub) == "ran\n"

    # `list` with sandbox-b's key: everything in the hub repository is readable to it
    listed = _as(gitolite, "sandbox-b", tmp_path, "list", "--remote", url, cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    names = {line.split()[0] for line in listed.stdout.splitlines()[1:] if line.strip()}
    assert names == {"a-notes", "shared"}


def test_a_sandbox_cannot_write_another_sandboxs_memory(gitolite: GitoliteServer, tmp_path: Path) -> None:
    theirs = _memory(gitolite, "sandbox-a", tmp_path, "b-notes", {"planted.md": "a writes b's memory\n"})
    refused = _as(gitolite, "sandbox-a", tmp_path, "push", cwd=theirs)
    assert refused.returncode == 5, refused.stderr
    err = refused.stderr
    assert err.startswith("error: ") and "b-notes" in err
    assert "DENIED" in err and "sandbox-a" in err  # the server's rule, in its words
    assert "hint: " in err
    assert git("for-each-ref", "refs/heads/", cwd=gitolite.repo_path("hub")) == ""
    # nothing was lost: the version stays in the sandbox
    assert git("log", "--format=%s", "-1", cwd=theirs).strip() != ""


def test_a_run_that_changes_the_shared_memory_writably_is_refused_by_the_server(gitolite: GitoliteServer,
                                                                                 tmp_path: Path) -> None:
    url = gitolite.gitolite_url("hub")
    shared = _memory(gitolite, "admin", tmp_path, "shared", {"reference.md": "facts\n"})
    assert _as(gitolite, "admin", tmp_path, "push", cwd=shared).returncode == 0
    work = tmp_path / "run-b"
    work.mkdir()
    agent = "import os, pathlib; pathlib.Path(os.environ['MEMSYNC_MEMORY_DIR'], 'reference.md').write_text('lies\\n')"
    ran = _as(gitolite, "sandbox-b", tmp_path, "run", "--remote", url, "--memory", "shared:ref",
              "--", sys.executable, "-c", agent, cwd=work)
    assert ran.returncode == 5, ran.stderr
    assert "shared" in ran.stderr and "DENIED" in ran.stderr
    assert git("show", "memory/shared:reference.md", cwd=gitolite.repo_path("hub")) == "facts\n"


def test_the_server_refuses_force_pushes_and_deletions_from_a_sandbox(gitolite: GitoliteServer,
                                                                       tmp_path: Path) -> None:
    """What memsync never does, a sandbox's own git cannot do either: the rule is on the server."""
    mine = _memory(gitolite, "sandbox-a", tmp_path, "a-notes", {"notes.md": "v1\n"})
    assert _as(gitolite, "sandbox-a", tmp_path, "push", cwd=mine).returncode == 0
    known = tmp_path / "known_hosts"
    gitolite.write_known_hosts(known)
    env = dict(os.environ, GIT_SSH_COMMAND=gitolite.ssh_command(gitolite.key("sandbox-a"), known),
               GIT_AUTHOR_NAME="a", GIT_AUTHOR_EMAIL="a@example.invalid", GIT_COMMITTER_NAME="a",
               GIT_COMMITTER_EMAIL="a@example.invalid")
    url = gitolite.gitolite_url("hub")

    def plain_git(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["git", *args], cwd=mine, env=env, capture_output=True, text=True, timeout=60)

    assert plain_git("commit", "-q", "--amend", "-m", "rewritten").returncode == 0
    forced = plain_git("push", "--force", url, "HEAD:refs/heads/memory/a-notes")
    assert forced.returncode != 0 and "DENIED" in forced.stderr
    deleted = plain_git("push", url, ":refs/heads/memory/a-notes")
    assert deleted.returncode != 0 and "DENIED" in deleted.stderr
    assert git("show", "memory/a-notes:notes.md", cwd=gitolite.repo_path("hub")) == "v1\n"


def test_a_sandbox_queues_in_its_own_memories_only(gitolite: GitoliteServer, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The push queue (sync/turns.py) under the recipe's queue rules: a sandbox takes and deletes
    tickets in its own memories' queues; in another's, the server refuses the ticket and the
    exchange goes on without a queue, as on a hub whose rules know nothing of it."""
    import time

    from memsync.core.memory import open_memory
    from memsync.sync.turns import Turn

    mine = _memory(gitolite, "sandbox-a", tmp_path, "a-notes", {"notes.md": "v1\n"})
    assert _as(gitolite, "sandbox-a", tmp_path, "push", cwd=mine).returncode == 0
    hub = gitolite.repo_path("hub")
    known = tmp_path / "known_hosts"
    gitolite.write_known_hosts(known)
    monkeypatch.setenv("MEMSYNC_KNOWN_HOSTS", str(known))
    monkeypatch.setenv("MEMSYNC_HOME", str(tmp_path / "home-sandbox-a"))

    monkeypatch.setenv("MEMSYNC_SSH_KEY", str(gitolite.key("sandbox-a")))
    turn = Turn(open_memory(mine), time.monotonic() + 60)
    assert turn.after_loss() is True  # its ticket taken, and first in line
    assert git("for-each-ref", "--format=%(refname)", "refs/memsync/", cwd=hub).split() == [
        "refs/memsync/queue/memory/a-notes/000000000001"]
    turn.release()
    assert git("for-each-ref", "refs/memsync/", cwd=hub) == ""

    monkeypatch.setenv("MEMSYNC_SSH_KEY", str(gitolite.key("sandbox-b")))
    intruder = Turn(open_memory(mine), time.monotonic() + 60)
    assert intruder.after_loss() is False and intruder.off  # DENIED: no queue, the backoff instead
    assert git("for-each-ref", "refs/memsync/", cwd=hub) == ""
