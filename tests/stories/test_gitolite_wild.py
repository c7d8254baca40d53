"""One repository per memory on gitolite (docs/REMOTES.md, "gitolite: a sandbox's first push
creates its memory's repository"): the wild rule `repo memories/..*` with `C` lets a sandbox's
first `memsync push` to `ssh://.../memories/{name}` create the memory's repository, owned by that
sandbox's key; another key cannot read it."""

from __future__ import annotations

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
repo memories/..*
    C                               =   sandbox-a sandbox-b
    RW+     refs/memsync/queue/     =   CREATOR
    RW                              =   CREATOR
    R                               =   READERS
"""


@pytest.fixture
def gitolite(tmp_path: Path) -> Iterator[GitoliteServer]:
    yield from started(tmp_path, RULES)


def _as(server: GitoliteServer, user: str, tmp_path: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return memsync_as(server, user, tmp_path, *args, cwd=cwd, MEMSYNC_REMOTE=server.gitolite_url("memories/{name}"))


def test_a_first_push_creates_the_memorys_repository(gitolite: GitoliteServer, tmp_path: Path) -> None:
    repo = gitolite.repo_path("memories/a-notes")
    assert not repo.exists()
    root = tmp_path / "a-notes"
    root.mkdir()
    write(root, "notes.md", "a's notes\n")
    assert _as(gitolite, "sandbox-a", tmp_path, "init", cwd=root).returncode == 0
    pushed = _as(gitolite, "sandbox-a", tmp_path, "push", cwd=root)
    assert pushed.returncode == 0, pushed.stderr
    assert git("show", "memory/a-notes:notes.md", cwd=repo) == "a's notes\n"
    assert (repo / "gl-creator").read_text().strip() == "sandbox-a"
    assert not gitolite.repo_path("memories/b-notes").exists()

    # the creator's next sandbox: a run on the same memory, through the same template
    work = tmp_path / "run-a"
    work.mkdir()
    agent = "import os, pathlib; pathlib.Path(os.environ['MEMSYNC_MEMORY_DIR'], 'run.md').write_text('ran\\n')"
    ran = _as(gitolite, "sandbox-a", tmp_path, "run", "--memory", "a-notes:mem", "--", sys.executable, "-c",
              agent, cwd=work)
    assert ran.returncode == 0, ran.stderr
    assert (work / "mem" / "notes.md").read_text() == "a's notes\n"
    assert git("show", "memory/a-notes:run.md", cwd=repo) == "ran\n"

    # another key: the repository is not its to read (not a READER) nor to write
    other = tmp_path / "b-copy"
    cloned = _as(gitolite, "sandbox-b", tmp_path, "clone", "a-notes", str(other), cwd=tmp_path)
    assert cloned.returncode != 0 and "Traceback" not in cloned.stderr
    assert cloned.stderr.startswith("error: ") and "hint: " in cloned.stderr
    assert git("log", "--format=%s", "memory/a-notes", cwd=repo).count("\n") == 2
