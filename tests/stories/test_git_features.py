"""git features a user's git may have turned on, which libgit2 cannot read: refused with the git
command that undoes them, never "unexpected GitError ... this is a bug"; and a plain `git clone`
of a hub memsync wrote checks a memory out."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.conftest import Cli, git, hub_path, write
from tests.helpers.servers import GitDaemon


def test_a_split_index_is_refused_with_the_command_that_undoes_it(cli: Cli, memory: Path) -> None:
    write(memory, "summary.md", "edited while the index was split\n")
    git("update-index", "--split-index", cwd=memory)
    assert cli("log", cwd=memory).code == 0  # reading history needs no index
    for verb in ("status", "push", "pull"):
        r = cli(verb, cwd=memory)
        assert r.code == 7, (verb, r.err)
        assert "split index" in r.err and "bug" not in r.err and "Traceback" not in r.err
        assert len(r.err.strip().splitlines()) == 2
    hint = r.err.strip().splitlines()[1]
    assert "update-index --no-split-index" in hint
    subprocess.run(hint.split("lost): ", 1)[1], shell=True, check=True, cwd=memory)  # what the hint says
    r = cli("push", cwd=memory)
    assert r.code == 0, r.err
    assert git("show", "memory/research:summary.md", cwd=hub_path()) == "edited while the index was split\n"


def test_an_unknown_index_extension_is_named() -> None:
    from memsync.git.indexext import refusal

    found = refusal(Exception("unsupported mandatory extension: 'zzzz'"), Path("/m"))
    assert found is not None and "'zzzz'" in found.message and found.exit_code == 7
    assert refusal(Exception("something else"), Path("/m")) is None


def _sha256_hub(path: Path) -> Path:
    subprocess.run(["git", "init", "-q", "--bare", "--object-format=sha256", str(path)], check=True)
    (path / "git-daemon-export-ok").touch()
    git("config", "daemon.receivepack", "true", cwd=path)
    return path


@pytest.mark.attack
@pytest.mark.parametrize("kind", ["local", pytest.param("daemon", marks=pytest.mark.server)])
def test_a_sha256_hub_is_named_as_such(cli: Cli, tmp_path: Path, kind: str,
                                       request: pytest.FixtureRequest) -> None:
    if kind == "local":
        url = str(_sha256_hub(tmp_path / "hub256.git"))
    else:
        daemon: GitDaemon = request.getfixturevalue("git_daemon")
        _sha256_hub(daemon.base_path / "hub256.git")
        url = daemon.url("hub256.git")
    root = tmp_path / "mem"
    root.mkdir()
    assert cli("init", "--name", "notes", "--remote", url, cwd=root).code == 0
    write(root, "a.md", "a\n")
    verbs: list[tuple[str, ...]] = [("push",)]
    if kind == "local":  # over the network an empty hub's advertisement says nothing of its format
        verbs += [("list", "--remote", url), ("clone", "other", str(tmp_path / "o"), "--remote", url)]
    for args in verbs:
        r = cli(*args, cwd=root)
        assert r.code == 4, (args, r.err)
        assert "sha256" in r.err and "network" not in r.err and "git init --bare" in r.err, (args, r.err)
        # named as the format libgit2 cannot read, never as a missing repository
        assert "the hub uses git's sha256 object format" in r.err, (args, r.err)
        assert "no git repository" not in r.err and "--object-format=sha1" in r.err, (args, r.err)
    assert (root / "a.md").read_text() == "a\n"


def test_a_plain_git_clone_of_the_hub_checks_a_memory_out(memory: Path, tmp_path: Path) -> None:
    out = tmp_path / "plain"
    git("clone", "-q", str(hub_path()), str(out), cwd=tmp_path)
    assert (out / "summary.md").read_text() == "# Summary\n\nfirst line\n"
    assert git("rev-parse", "--abbrev-ref", "HEAD", cwd=out).strip() == "memory/research"


def test_a_hub_head_its_owner_set_is_left_alone(cli: Cli, tmp_path: Path) -> None:
    bare = tmp_path / "team.git"
    git("init", "-q", "--bare", "-b", "main", str(bare), cwd=tmp_path)
    seed = tmp_path / "seed"
    git("init", "-q", "-b", "main", str(seed), cwd=tmp_path)
    write(seed, "README.md", "team\n")
    git("add", "-A", cwd=seed)
    git("-c", "user.name=a", "-c", "user.email=a@b", "commit", "-q", "-m", "readme", cwd=seed)
    git("push", "-q", str(bare), "main", cwd=seed)
    root = tmp_path / "mem"
    root.mkdir()
    assert cli("init", "--name", "notes", "--remote", str(bare), cwd=root).code == 0
    write(root, "a.md", "a\n")
    assert cli("push", cwd=root).code == 0
    assert (bare / "HEAD").read_text() == "ref: refs/heads/main\n"
