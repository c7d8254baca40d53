"""What the hooks installer may write and what a repository may decide, and the hook events:
a repository's files never choose what is synced (a tracked settings.local.json naming ~/.ssh),
no settings are written through a `.claude` link out of the project, a personal file stays out
of the repository, every SessionStart source and StopFailure are handled, memsync's own
exclusions are not warned about, an Auto Dream rewrite is committed as the dream, and each clone
is reported on its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from memsync.agents.projectdir import project_slug, slug_hash
from tests.conftest import Cli, git, hub_path, hub_tree, write
from tests.helpers.figures import Figures, figures
from tests.stories.test_hook_identity import repo
from tests.stories.test_hooks import claude_home, hook, installed_command

__all__ = ["figures"]


def folder_of(project: Path) -> Path:
    return claude_home() / "projects" / project_slug(project) / "memory"


def project_hook(verb: str, project: Path, event: str, memory: str, *extra: str,
                 env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The project-scope command (`--project`), as Claude Code runs it in `project`."""
    args = [sys.executable, "-m", "memsync", "hooks", "run", verb, "--agent", "claude-code", "--memory", memory,
            "--project", *extra]
    return subprocess.run(args, input=json.dumps({"session_id": "s9", "hook_event_name": event, "cwd": str(project)}),
                          capture_output=True, text=True, timeout=60, cwd=project, env=env or dict(os.environ))


@pytest.mark.attack
def test_a_repository_cannot_move_the_synced_folder_to_the_users_keys(cli: Cli, tmp_path: Path,
                                                                      figures: Figures) -> None:
    """A repository that tracks .claude/settings.local.json with `autoMemoryDirectory: ~/.ssh`:
    before, `hooks install --scope project` then a Stop pushed the private key to the hub."""
    figures.add("security attacks", 2)
    ssh = Path(os.environ["HOME"]) / ".ssh"
    write(ssh, "id_ed25519", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n")
    project = repo(tmp_path / "evil", "git@example.com:evil/app.git")
    write(project, ".claude/settings.local.json", json.dumps({"autoMemoryDirectory": "~/.ssh"}))
    git("add", ".claude/settings.local.json", cwd=project)  # tracked: the repository's, not the user's
    r = cli("hooks", "install", "claude-code", "--scope", "project", cwd=project)
    assert r.code == 0, r.err
    assert f"at {folder_of(project)}" in r.out and str(ssh) not in r.out
    name = installed_command(project / ".claude" / "settings.json", "Stop").split("--memory ")[1].split()[0]
    assert project_hook("stop", project, "Stop", name).returncode == 0
    assert not (ssh / ".git").exists() and all("id_ed25519" not in p for p in hub_tree(f"memory/{name}"))
    refused = cli("hooks", "install", "claude-code", "--scope", "local", cwd=project)
    assert refused.code == 2 and "tracked by the repository" in refused.err  # a shared file is not personal
    # the user's own (untracked) settings naming ~/.ssh: refused loudly, never synced
    git("rm", "-q", "--cached", ".claude/settings.local.json", cwd=project)
    done = project_hook("stop", project, "Stop", name)
    assert done.returncode == 0
    assert "outside Claude Code's memory locations" in json.loads(done.stdout)["systemMessage"]
    assert not (ssh / ".git").exists()
    figures.add("security attacks refused", 2)


@pytest.mark.attack
def test_no_settings_through_a_claude_folder_linked_out_of_the_project(cli: Cli, tmp_path: Path,
                                                                       figures: Figures) -> None:
    figures.add("security attacks")
    project = repo(tmp_path / "cloned", "git@example.com:x/cloned.git")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.symlink(elsewhere, project / ".claude", target_is_directory=True)
    for scope in ("project", "local"):
        r = cli("hooks", "install", "claude-code", "--scope", scope, cwd=project)
        assert r.code == 3 and "outside the project" in r.err, r.err
    assert list(elsewhere.iterdir()) == []
    figures.add("security attacks refused")


@pytest.mark.slow
def test_project_settings_refuse_this_machines_paths_and_run_from_path(cli: Cli, tmp_path: Path) -> None:
    project = repo(tmp_path / "team", "git@example.com:team/team.git")
    r = cli("hooks", "install", "claude-code", "--scope", "project", "--remote", str(tmp_path / "hub.git"),
            cwd=project)
    assert r.code == 2 and "hub on this machine" in r.err
    r = cli("hooks", "install", "claude-code", "--scope", "project", "--dir", str(tmp_path / "x"), cwd=project)
    assert r.code == 2 and "--scope local" in r.err
    assert not (project / ".claude").exists()
    assert cli("hooks", "install", "claude-code", "--scope", "project", cwd=project).code == 0
    # on a teammate's machine: another HOME, `memsync` from PATH, the shared file as it is
    mate = tmp_path / "mate"
    mate.mkdir()
    env = {**os.environ, "HOME": str(mate), "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    command = installed_command(project / ".claude" / "settings.json", "SessionStart")
    done = subprocess.run(command, shell=True, cwd=project, env=env, capture_output=True, text=True, timeout=60,
                          input=json.dumps({"session_id": "m1", "hook_event_name": "SessionStart", "source": "clear",
                                            "cwd": str(project)}))
    assert done.returncode == 0 and done.stdout == "", done.stderr
    assert (mate / ".claude" / "projects" / project_slug(project) / "memory" / ".vm0").is_dir()


def test_local_scope_is_kept_out_of_the_repository(cli: Cli, tmp_path: Path) -> None:
    project = repo(tmp_path / "shared", "git@example.com:team/shared.git")
    r = cli("hooks", "install", "claude-code", "--scope", "local", cwd=project)
    assert r.code == 0, r.err
    exclude = (project / ".git" / "info" / "exclude").read_text()
    assert "/.claude/settings.local.json" in exclude.splitlines()
    assert git("status", "--porcelain", "--untracked-files=all", cwd=project) == ""  # `git add -A` adds nothing
    assert cli("hooks", "install", "claude-code", "--scope", "local", cwd=project).code == 0
    assert (project / ".git" / "info" / "exclude").read_text() == exclude  # once


@pytest.mark.slow  # several hooks, each a process
def test_stop_failure_and_every_session_start_source(cli: Cli, tmp_path: Path) -> None:
    home = claude_home()
    write(home, "settings.json", "{}\n")
    write(home, ".credentials.json", '{"token": "abc"}\n')
    assert cli("hooks", "install", "claude-code").code == 0
    write(home, "CLAUDE.md", "# kept when the turn failed\n")
    r = hook("stop", {"session_id": "f1", "hook_event_name": "StopFailure", "error": "rate_limit"})
    assert r.returncode == 0 and "pushed" in r.stderr, r.stderr
    assert "warning" not in r.stderr  # memsync's own exclusions (settings, credentials) are not news
    assert hub_tree("memory/claude-code")["CLAUDE.md"] == b"# kept when the turn failed\n"
    log = git("log", "-1", "--format=%(trailers)", "memory/claude-code", cwd=hub_path())
    assert "Memsync-Hook: StopFailure" in log
    data = json.loads((home / "settings.json").read_text())
    assert all("matcher" not in g for g in data["hooks"]["SessionStart"])  # clear, compact, fork, resume...
    for source in ("clear", "compact", "fork", "resume"):
        r = hook("session-start", {"session_id": "f1", "hook_event_name": "SessionStart", "source": source})
        assert r.returncode == 0 and r.stdout == "" and "warning" not in r.stderr, r.stderr


@pytest.mark.slow  # several hooks, each a process
def test_an_auto_dream_rewrite_is_committed_as_the_dream(cli: Cli, tmp_path: Path) -> None:
    project = repo(tmp_path / "app", "git@example.com:a/app.git")
    assert cli("hooks", "install", "claude-code", "--scope", "project", cwd=project).code == 0
    name = installed_command(project / ".claude" / "settings.json", "Stop").split("--memory ")[1].split()[0]
    folder = folder_of(project)
    write(folder, "MEMORY.md", "- one\n- two\n- one again\n")
    assert project_hook("stop", project, "Stop", name).returncode == 0
    # between sessions Auto Dream takes its lock and consolidates
    (folder / ".consolidate-lock").write_text("4242")  # its time: when the dream ran
    write(folder, "MEMORY.md", "- one\n- two\n")
    r = project_hook("session-start", project, "SessionStart", name)
    assert r.returncode == 0 and "Auto Dream" in r.stderr and "warning" not in r.stderr, r.stderr
    log = git("log", "-1", "--format=%an%n%(trailers)", f"memory/{name}", cwd=hub_path())
    assert "Memsync-Actor: dream" in log and "Claude Code Auto Dream" in log
    assert ".consolidate-lock" not in hub_tree(f"memory/{name}")
    write(folder, "MEMORY.md", "- one\n- two\n- three\n")  # the next session's own edit: the run's, not the dream's
    assert project_hook("stop", project, "Stop", name).returncode == 0
    assert "Memsync-Actor: run" in git("log", "-1", "--format=%(trailers)", f"memory/{name}", cwd=hub_path())


@pytest.mark.slow  # several hooks, each a process
def test_status_reports_each_clone_on_its_own(cli: Cli, tmp_path: Path) -> None:
    first = repo(tmp_path / "one" / "api", "git@example.com:acme/api.git")
    second = repo(tmp_path / "two" / "api", "git@example.com:acme/api.git")
    for project in (first, second):
        assert cli("hooks", "install", "claude-code", "--scope", "project", cwd=project).code == 0
    name = installed_command(first / ".claude" / "settings.json", "Stop").split("--memory ")[1].split()[0]
    bad = project_hook("stop", first, "Stop", name, "--remote", str(tmp_path / "gone.git"))
    assert "failed" in json.loads(bad.stdout)["systemMessage"]
    good = project_hook("stop", second, "Stop", name)
    assert good.returncode == 0 and good.stdout == ""
    here = cli("hooks", "status", cwd=first).out
    there = cli("hooks", "status", cwd=second).out
    one, two = str(folder_of(first)), str(folder_of(second))
    assert f"at {one}: FAILING" in here and f"at {two}: version" in here  # the other clone, listed too
    assert f"at {two}: version" in there and f"at {one}: FAILING" in there  # the good hook cleared nothing else


def test_claude_codes_slug_past_200_characters() -> None:
    assert slug_hash("hello") == "1n1e4y" and slug_hash("/a/b") == "w1id"  # Node's result for these
    short = Path("/home/ana/src/my_app")
    assert project_slug(short) == "-home-ana-src-my-app"
    long = Path("/" + "/".join(["projects-of-the-team"] * 12))
    slug = project_slug(long)
    assert len(slug) > 200 and slug[:200] == ("-" + "-".join(["projects-of-the-team"] * 12))[:200]
    assert slug == slug[:200] + "-" + slug_hash(str(long))


@pytest.mark.slow
def test_codex_project_settings_name_no_folder_of_this_machine(cli: Cli, tmp_path: Path) -> None:
    project = repo(tmp_path / "tool", "git@example.com:team/tool.git")
    assert cli("hooks", "install", "codex", "--scope", "project", cwd=project).code == 0
    shared = (project / ".codex" / "hooks.json").read_text()
    assert os.environ["HOME"] not in shared and sys.executable not in shared
    command = installed_command(project / ".codex" / "hooks.json", "Stop")
    assert command.startswith("memsync hooks run stop --agent codex") and command.endswith("--agent-home")
    write(Path(os.environ["HOME"]) / ".codex", "AGENTS.md", "# codex notes\n")
    done = subprocess.run([sys.executable, "-m", "memsync", *command.split()[1:]], cwd=project, capture_output=True,
                          text=True, timeout=60, input=json.dumps({"session_id": "c1", "hook_event_name": "Stop"}))
    assert done.returncode == 0 and done.stdout == "", done.stderr
    assert hub_tree("memory/codex")["AGENTS.md"] == b"# codex notes\n"
    assert f"at {Path(os.environ['HOME']) / '.codex'}" in cli("hooks", "status", cwd=project).out


@pytest.mark.slow  # several hooks, each a process
def test_an_auto_dream_rewrite_can_wait_as_a_proposal(cli: Cli, tmp_path: Path) -> None:
    """`--dream propose`: the rewrite lands on proposals/<name>/<dream id>; the memory and the
    folder stay as the last session left them."""
    project = repo(tmp_path / "app", "git@example.com:a/app.git")
    assert cli("hooks", "install", "claude-code", "--scope", "project", "--dream", "propose", cwd=project).code == 0
    command = installed_command(project / ".claude" / "settings.json", "SessionStart")
    assert command.endswith("--dream propose"), command
    name = command.split("--memory ")[1].split()[0]
    folder = folder_of(project)
    write(folder, "MEMORY.md", "- one\n- two\n- one again\n")
    assert project_hook("stop", project, "Stop", name, "--dream", "propose").returncode == 0
    before = git("rev-parse", f"memory/{name}", cwd=hub_path())
    (folder / ".consolidate-lock").write_text("4242")
    write(folder, "MEMORY.md", "- one\n- two\n")
    r = project_hook("session-start", project, "SessionStart", name, "--dream", "propose")
    assert r.returncode == 0 and "waits for review as proposal claude-code-dream-" in r.stderr, r.stderr
    assert git("rev-parse", f"memory/{name}", cwd=hub_path()) == before, "the memory did not move"
    assert (folder / "MEMORY.md").read_text() == "- one\n- two\n- one again\n", "back on the memory's version"
    branches = git("for-each-ref", "--format=%(refname:short)", f"refs/heads/proposals/{name}/", cwd=hub_path()).split()
    assert len(branches) == 1 and branches[0].startswith(f"proposals/{name}/claude-code-dream-"), branches
    assert hub_tree(branches[0])["MEMORY.md"] == b"- one\n- two\n"
    log = git("log", "-1", "--format=%an%n%(trailers)", branches[0], cwd=hub_path())
    assert "Memsync-Actor: dream" in log and "Claude Code Auto Dream" in log
    assert git("rev-parse", f"{branches[0]}~1", cwd=hub_path()) == before, "based on the memory's version"
    again = project_hook("stop", project, "Stop", name, "--dream", "propose")  # the dream is handled once
    assert again.returncode == 0 and "dream" not in again.stderr
    assert git("rev-parse", f"memory/{name}", cwd=hub_path()) == before
    assert cli("hooks", "install", "codex", "--dream", "propose").code == 2
