"""Coding-agent memories are keyed by repository identity, not by a folder's name; settings files
are edited where the user keeps them (symlinks, settings.local.json); a failing hook is seen."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from memsync.agents.projectdir import project_slug
from tests.conftest import Cli, git, hub_path, write
from tests.stories.test_hooks import claude_home, hook, installed_command


def repo(path: Path, remote: str | None = None) -> Path:
    path.mkdir(parents=True)
    git("init", "-q", "-b", "main", cwd=path)
    if remote:
        git("remote", "add", "origin", remote, cwd=path)
    return path


def install(cli: Cli, project: Path, *extra: str) -> tuple[str, Path]:
    """(the memory's name, the folder the hooks keep on this machine)."""
    r = cli("hooks", "install", "claude-code", "--scope", "project", *extra, cwd=project)
    assert r.code == 0, r.err
    settings = project / ".claude" / ("settings.local.json" if "local" in extra else "settings.json")
    words = installed_command(settings, "Stop").split()
    assert "--project" in words and "--dir" not in words
    where = next(line for line in r.out.splitlines() if line.startswith("Memory: "))
    return words[words.index("--memory") + 1], Path(where.split(" at ", 1)[1].split(" (")[0])


def _hub_memories() -> set[str]:
    out = git("for-each-ref", "--format=%(refname:short)", "refs/heads/", cwd=hub_path())
    return set(out.split())


@pytest.mark.slow
def test_two_repositories_called_api_never_share_a_memory(cli: Cli, tmp_path: Path) -> None:
    first = repo(tmp_path / "work" / "api", "git@example.com:acme/api.git")
    second = repo(tmp_path / "play" / "api", "https://example.org/someone/api.git")
    name1, dir1 = install(cli, first)
    name2, dir2 = install(cli, second)
    assert name1 != name2 and name1.startswith("claude-api-") and name2.startswith("claude-api-")
    assert dir1 != dir2
    # both already have notes, and both Stop hooks sync every turn
    write(dir1, "MEMORY.md", "- work api: postgres\n")
    write(dir2, "MEMORY.md", "- play api: sqlite\n")
    for name, directory in ((name1, dir1), (name2, dir2)):
        for verb in ("session-start", "stop"):
            r = hook(verb, {"session_id": "s", "hook_event_name": verb}, memory=name, directory=directory)
            assert r.returncode == 0 and "hook:" not in r.stderr, r.stderr
            assert r.stdout == ""
    assert {f"memory/{name1}", f"memory/{name2}"} <= _hub_memories()
    assert (dir1 / "MEMORY.md").read_text() == "- work api: postgres\n"
    assert (dir2 / "MEMORY.md").read_text() == "- play api: sqlite\n"


def test_two_clones_of_one_repository_share_one(cli: Cli, tmp_path: Path) -> None:
    laptop = repo(tmp_path / "laptop" / "src" / "api", "git@github.com:Acme/API.git")
    desktop = repo(tmp_path / "desktop" / "code" / "acme-api", "https://github.com/acme/api")
    assert install(cli, laptop)[0] == install(cli, desktop)[0]


@pytest.mark.slow
def test_without_a_remote_a_stable_id_in_the_repository_is_shared_by_its_worktrees(cli: Cli, tmp_path: Path) -> None:
    main = repo(tmp_path / "proj")
    assert "No memsync hooks" in cli("hooks", "status", cwd=main).out
    assert subprocess.run(["git", "config", "memsync.projectId"], cwd=main).returncode == 1  # status wrote nothing
    write(main, "README", "x\n")
    git("add", "README", cwd=main)
    git("-c", "user.name=a", "-c", "user.email=a@b", "commit", "-q", "-m", "first", cwd=main)
    git("worktree", "add", "-q", str(tmp_path / "proj-feature"), "-b", "feature", cwd=main)
    name, directory = install(cli, main)
    stable = git("config", "memsync.projectId", cwd=main).strip()
    assert len(stable) == 32
    # a linked worktree is the same repository: its own settings file, the same memory and directory
    assert install(cli, tmp_path / "proj-feature") == (name, directory)
    sub = tmp_path / "proj-feature" / "sub"
    sub.mkdir()
    assert cli("hooks", "install", "claude-code", "--scope", "project", cwd=sub).code == 0
    assert not (sub / ".claude").exists()  # a subdirectory's settings are its worktree's
    assert directory == claude_home() / "projects" / project_slug(main) / "memory"
    other = repo(tmp_path / "elsewhere" / "proj")
    assert install(cli, other)[0] != name  # same folder name, another repository


def test_auto_memory_directory_from_local_or_user_settings(cli: Cli, tmp_path: Path) -> None:
    project = repo(tmp_path / "app", "git@example.com:a/app.git")
    write(project, ".claude/settings.json", json.dumps({"autoMemoryDirectory": "/tmp/not-from-a-shared-file"}))
    assert install(cli, project)[1] == claude_home() / "projects" / project_slug(project) / "memory"
    mine = claude_home() / "notes" / "app"
    write(project, ".claude/settings.local.json", json.dumps({"autoMemoryDirectory": str(mine)}))
    assert install(cli, project, "--scope", "local")[1] == mine


def test_local_scope_writes_settings_local_json(cli: Cli, tmp_path: Path) -> None:
    project = repo(tmp_path / "shared", "git@example.com:team/shared.git")
    write(project, ".claude/settings.json", '{\n  "model": "opus"\n}\n')
    r = cli("hooks", "install", "claude-code", "--scope", "local", cwd=project)
    assert r.code == 0, r.err
    assert (project / ".claude" / "settings.json").read_text() == '{\n  "model": "opus"\n}\n'  # the team's file
    assert "hooks run stop" in installed_command(project / ".claude" / "settings.local.json", "Stop")
    r = cli("hooks", "status", cwd=project)
    assert "claude-code (local)" in r.out
    r = cli("hooks", "install", "codex", "--scope", "local", cwd=project)
    assert r.code == 2 and "no local settings" in r.err


def test_a_symlinked_settings_file_stays_a_link(cli: Cli, tmp_path: Path) -> None:
    dotfiles = tmp_path / "dotfiles" / "claude-settings.json"
    write(dotfiles.parent, dotfiles.name, '{\n    "theme": "dark"\n}\n')
    claude_home().mkdir(parents=True, exist_ok=True)
    link = claude_home() / "settings.json"
    os.symlink(dotfiles, link)
    r = cli("hooks", "install", "claude-code")
    assert r.code == 0, r.err
    assert link.is_symlink() and link.resolve() == dotfiles
    data = json.loads(dotfiles.read_text())
    assert data["theme"] == "dark" and "Stop" in data["hooks"]
    assert cli("hooks", "uninstall", "claude-code").code == 0
    assert link.is_symlink() and not json.loads(dotfiles.read_text())["hooks"]


def test_a_project_settings_link_out_of_the_project_is_refused(cli: Cli, tmp_path: Path) -> None:
    project = repo(tmp_path / "cloned", "git@example.com:x/cloned.git")
    victim = tmp_path / "elsewhere.json"
    victim.write_text("{}\n")
    (project / ".claude").mkdir()
    os.symlink(victim, project / ".claude" / "settings.json")
    r = cli("hooks", "install", "claude-code", "--scope", "project", cwd=project)
    assert r.code == 3 and "outside the project" in r.err and "Traceback" not in r.err
    assert victim.read_text() == "{}\n"


@pytest.mark.parametrize("verb", ["stop"])
@pytest.mark.slow
def test_a_failing_hook_is_shown_and_listed_by_status(cli: Cli, tmp_path: Path, verb: str) -> None:
    project = repo(tmp_path / "p", "git@example.com:x/p.git")
    name, directory = install(cli, project)
    bad = tmp_path / "gone.git"
    r = hook(verb, {"session_id": "s", "hook_event_name": "Stop"}, "--remote", str(bad), memory=name,
             directory=directory)
    assert r.returncode == 0
    assert "failed" in json.loads(r.stdout)["systemMessage"]
    shown = cli("hooks", "status", cwd=project)
    assert "FAILING" in shown.out and "does not exist" in shown.out
    r = hook(verb, {"session_id": "s", "hook_event_name": "Stop"}, memory=name, directory=directory)
    assert r.returncode == 0 and r.stdout == "", r.stderr
    assert "FAILING" not in cli("hooks", "status", cwd=project).out
