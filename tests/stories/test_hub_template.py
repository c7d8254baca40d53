"""A remote holding `{name}`: one repository per memory (issue 24).

The name fills the template before anything reads the URL; a template that would let a name
reach the scheme, host or account, any other brace, and a command that names no memory are
refused with an error and a hint. The memory records the repository it was filled to.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from memsync.git import hub as hubmod
from tests.conftest import Cli, git, write
from tests.helpers.servers import GitDaemon, make_bare_hub


def test_file_template_gives_each_memory_its_repository(tmp_path: Path, cli: Cli,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    repos = tmp_path / "repos"
    for name in ("alpha", "beta"):
        make_bare_hub(repos / f"{name}.git")
    monkeypatch.setenv("MEMSYNC_REMOTE", f"{repos}/{{name}}.git")
    for name in ("alpha", "beta"):
        root = tmp_path / name
        root.mkdir()
        assert cli("init", cwd=root).code == 0
        write(root, "notes.md", f"{name}\n")
        r = cli("push", cwd=root)
        assert r.code == 0, r.err
        assert git("show", f"memory/{name}:notes.md", cwd=repos / f"{name}.git") == f"{name}\n"
        assert f"remote: {repos}/{name}.git" in (root / ".vm0" / "storage.yaml").read_text()
    assert "memory/beta" not in git("for-each-ref", cwd=repos / "alpha.git")
    r = cli("clone", "beta", str(tmp_path / "beta-copy"))
    assert r.code == 0, r.err
    assert (tmp_path / "beta-copy" / "notes.md").read_text() == "beta\n"
    r = cli("list")  # no single hub to list
    assert r.code == 2 and "template" in r.err and "\nhint: " in r.err
    r = cli("list", "--remote", str(repos / "alpha.git"))
    assert r.code == 0 and "alpha" in r.out


@pytest.mark.server
def test_git_daemon_template(git_daemon: GitDaemon, tmp_path: Path, cli: Cli,
                             monkeypatch: pytest.MonkeyPatch) -> None:
    make_bare_hub(git_daemon.base_path / "m-research.git")
    template = git_daemon.url("m-{name}.git")
    root = tmp_path / "research"
    root.mkdir()
    assert cli("init", "--remote", template, cwd=root).code == 0
    assert f"remote: {git_daemon.url('m-research.git')}" in (root / ".vm0" / "storage.yaml").read_text()
    write(root, "a.md", "a\n")
    r = cli("push", cwd=root)
    assert r.code == 0, r.err
    assert git("show", "memory/research:a.md", cwd=git_daemon.base_path / "m-research.git") == "a\n"
    monkeypatch.setenv("MEMSYNC_REMOTE", template)  # the same repository, spelled as the template
    r = cli("status", cwd=root)
    assert r.code == 0, r.err


@pytest.mark.parametrize("template", [
    "https://{name}.example.com/repo.git",  # the host
    "https://{name}@example.com/x/repo.git",  # the account
    "{name}.example.com:memories/x.git",  # scp-like host
    "https://example.com/{name}/{other}.git",  # another field
    "/srv/memories/{name.git",  # an unclosed brace
])
def test_bad_templates_are_refused(tmp_path: Path, cli: Cli, template: str) -> None:
    root = tmp_path / "research"
    root.mkdir()
    r = cli("init", "--remote", template, cwd=root)
    assert r.code == 2, (r.code, r.err)
    assert r.err.startswith("error: ") and "\nhint: " in r.err and "Traceback" not in r.err
    assert not (root / ".vm0").exists()


def test_a_credential_in_a_template_flag_is_refused(tmp_path: Path, cli: Cli) -> None:
    root = tmp_path / "research"
    root.mkdir()
    r = cli("init", "--remote", "https://bob:s3cret@example.com/m/{name}.git", cwd=root)
    assert r.code == 2
    assert "s3cret" not in r.err and "credential" in r.err


def test_names_cannot_leave_the_template(tmp_path: Path) -> None:
    assert hubmod.expand("/srv/m/{name}.git", "team-a") == "/srv/m/team-a.git"
    assert hubmod.expand("/srv/m/plain.git", None) == "/srv/m/plain.git"
    for bad in ("..", "../x", "a/b", "UP", "x"):
        with pytest.raises(Exception) as info:
            hubmod.expand("/srv/m/{name}.git", bad)
        assert getattr(info.value, "exit_code", None) == 2


def test_a_fleet_of_standalone_repositories(tmp_path: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    """The fleet fixture's repositories are what a server holds (and bench/fleet.py measures):
    standalone, fsck-clean, each with its memory's branch as HEAD, reached through the template."""
    import subprocess

    from tests.helpers.fleet import add_repo_fleet

    repos = add_repo_fleet(tmp_path / "repos", 40)
    assert [r.name for r in repos[:2]] == ["fleet-000000.git", "fleet-000001.git"]
    assert not any((r / "objects" / "info" / "alternates").exists() for r in repos)
    one = repos[23]
    done = subprocess.run(["git", "fsck", "--strict", "--no-dangling"], cwd=one, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert git("for-each-ref", "--format=%(refname)", cwd=one).split() == ["refs/heads/memory/fleet-000023"]
    monkeypatch.setenv("MEMSYNC_REMOTE", f"{tmp_path}/repos/{{name}}.git")
    copy = tmp_path / "copy"
    r = cli("clone", "fleet-000023", str(copy))
    assert r.code == 0, r.err
    assert (copy / "notes.md").read_text() == "notes of fleet memory 23\n"
    write(copy, "more.md", "more\n")
    r = cli("push", cwd=copy)
    assert r.code == 0, r.err
    assert git("show", "memory/fleet-000023:more.md", cwd=one) == "more\n"
    assert git("rev-parse", "memory/fleet-000024", cwd=repos[24]).strip() == \
        git("rev-parse", "HEAD", cwd=repos[24]).strip()
