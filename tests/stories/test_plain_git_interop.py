"""A hub is plain git: people push and fetch with the git CLI between memsync's commands.

git's CLI leaves the objects of a small push loose on the hub while memsync's own pushes arrive
as packs; every memsync verb must work across that mix, and `git fsck --strict` must find the
hub and every memory sound after each step.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.conftest import Cli, git, write
from tests.helpers.servers import GitDaemon, make_bare_hub


def fsck(repo: Path) -> None:
    proc = subprocess.run(["git", "fsck", "--strict", "--no-progress"], cwd=repo,
                          capture_output=True, text=True)
    assert proc.returncode == 0, f"git fsck --strict in {repo}:\n{proc.stdout}{proc.stderr}"
    assert "broken link" not in proc.stdout + proc.stderr
    assert "missing" not in proc.stdout + proc.stderr


def git_user_push(clone: Path, rel: str, text: str) -> None:
    git("pull", "-q", "--no-rebase", cwd=clone)
    write(clone, rel, text)
    git("add", "-A", cwd=clone)
    git("commit", "-q", "-m", f"edit {rel} by hand", cwd=clone)
    git("push", "-q", "origin", "HEAD", cwd=clone)


def _loose_objects(hub: Path) -> int:
    return sum(1 for fan in (hub / "objects").iterdir() if len(fan.name) == 2 for _ in fan.iterdir())


@pytest.fixture(params=["local", pytest.param("daemon", marks=pytest.mark.server)])
def hub(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Path, str]:
    """A bare hub on this machine (a path) or behind `git daemon` (git://): (its path, its URL)."""
    if request.param == "local":
        bare = make_bare_hub(tmp_path / "hub.git")
        return bare, str(bare)
    daemon: GitDaemon = request.getfixturevalue("git_daemon")
    bare = make_bare_hub(daemon.base_path / "hub.git")
    return bare, daemon.url("hub.git")


@pytest.mark.server
def test_git_cli_pushes_interleaved_with_every_memsync_verb(cli: Cli, tmp_path: Path, hub: tuple[Path, str]) -> None:
    bare, url = hub
    git("config", "--global", "user.name", "A Person", cwd=tmp_path)
    git("config", "--global", "user.email", "person@example.com", cwd=tmp_path)

    first = tmp_path / "first"
    first.mkdir()
    assert cli("init", "--name", "first", "--remote", url, cwd=first).code == 0
    write(first, "notes.md", "from memsync\n")
    assert cli("push", cwd=first).code == 0
    fsck(bare)

    # a person clones with git, edits and pushes: the hub now has loose objects over packed ones
    person = tmp_path / "person"
    git("clone", "-q", "-b", "memory/first", url, str(person), cwd=tmp_path)
    git_user_push(person, "notes.md", "from memsync\nand from git\n")
    assert _loose_objects(bare) > 0
    fsck(bare)

    # a new memory pushed to that hub (the reported failure: exit 4, "no git repository there")
    second = tmp_path / "second"
    second.mkdir()
    assert cli("init", "--name", "second", "--remote", url, cwd=second).code == 0
    write(second, "a.md", "a\n")
    r = cli("push", cwd=second)
    assert r.code == 0, r.err
    fsck(bare)
    fsck(second)

    # the first memory pulls the person's edit, edits, pushes; the person fetches it with git
    r = cli("pull", cwd=first)
    assert r.code == 0, r.err
    assert (first / "notes.md").read_text() == "from memsync\nand from git\n"
    fsck(first)
    write(first, "more.md", "more\n")
    assert cli("push", cwd=first).code == 0
    git("fetch", "-q", cwd=person)
    assert git("show", "origin/memory/first:more.md", cwd=person) == "more\n"
    git_user_push(person, "by-hand.md", "typed in an editor\n")
    fsck(bare)

    # clone, list, run and gc after yet another plain push
    third = tmp_path / "third"
    r = cli("clone", "first", str(third), "--remote", url, cwd=tmp_path)
    assert r.code == 0, r.err
    assert (third / "by-hand.md").read_text() == "typed in an editor\n"
    fsck(third)
    r = cli("list", "--remote", url, cwd=tmp_path)
    assert r.code == 0 and "first" in r.out and "second" in r.out, r.err
    git_user_push(person, "again.md", "again\n")
    r = cli("run", "--", "sh", "-c", "echo ran > ran.md", cwd=third)
    assert r.code == 0, r.err
    fsck(third)
    fsck(bare)
    git("pull", "-q", "--no-rebase", cwd=person)
    assert (person / "ran.md").read_text() == "ran\n"
    assert (third / "again.md").read_text() == "again\n"
    r = cli("gc", cwd=third)
    assert r.code == 0, r.err
    fsck(third)
    fsck(bare)
    r = cli("push", cwd=second)
    assert r.code == 0, r.err
    fsck(second)


def test_missing_object_is_not_called_a_missing_repository() -> None:
    from memsync.git.hub import parse
    from memsync.git.transport import translate

    exc = Exception("object not found - no match for id (639139d127597f36edb3ef6cd516f1618fff7043)")
    err = translate(exc, parse("/srv/hub.git"), "cannot push to")
    assert "no git repository" not in err.message
    assert "git init --bare" not in (err.hint or "")
    assert "639139d1" in err.message
