"""The memory's own .git/config is not trusted blindly.

An agent inside a run, a careless command or another local user can write a memory's
.git/config; none of that may run a program, move the work tree, or point memsync (and its
credential) at another server. git's own refusals are the floor: a repository owned by another
user is refused as git refuses it (CVE-2022-24765).
"""

from __future__ import annotations

import os
import pwd
import shlex
import subprocess
from pathlib import Path

import pygit2
import pytest

from tests.conftest import Cli, git, hub_path, hub_tree, write
from tests.helpers.figures import Figures, figures
from tests.helpers.server_fixtures import HTTP_USER
from tests.helpers.servers import HttpGitServer, SshGitServer, make_bare_hub

__all__ = ["figures"]

pytestmark = pytest.mark.attack

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")


def _marker_helper(tmp_path: Path, name: str) -> tuple[str, Path]:
    """A shell command for git config that leaves a marker file when it runs."""
    marker = tmp_path / f"{name}-ran"
    script = tmp_path / f"{name}.sh"
    script.write_text(f"#!/bin/sh\ntouch {shlex.quote(str(marker))}\ncat >/dev/null\n")
    script.chmod(0o755)
    return str(script), marker


# -- ownership (CVE-2022-24765) --------------------------------------------------------------------


@needs_root
def test_memory_owned_by_another_user_is_refused_like_git_does(memory: Path, cli: Cli, figures: Figures) -> None:
    figures.add("security attacks")
    import memsync.git.transport  # noqa: F401  (everything memsync imports for a command)

    assert pygit2.settings.owner_validation  # nothing memsync imports turns git's check off
    nobody = pwd.getpwnam("nobody")
    subprocess.run(["chown", "-R", f"{nobody.pw_uid}:{nobody.pw_gid}", str(memory)], check=True)
    write(memory, "summary.md", "changed\n")  # root can still write; memsync must not act on it
    before = hub_tree()
    for command in ("status", "push", "pull"):
        r = cli(command, cwd=memory)
        assert r.code == 7, (command, r.err)
        assert f"error: detected dubious ownership in repository at '{memory}'" in r.err
        assert f"hint: if you trust the repository and its .git/config, add an exception: git config --global " \
               f"--add safe.directory {memory}" in r.err
        assert "Traceback" not in r.err
    assert hub_tree() == before
    figures.add("security attacks refused")
    # git's own remedy works for memsync too.
    git("config", "--global", "--add", "safe.directory", str(memory), cwd=memory)
    assert cli("status", cwd=memory).code == 0


@needs_root
def test_hub_owned_by_another_user_is_refused(memory: Path, cli: Cli) -> None:
    nobody = pwd.getpwnam("nobody")
    subprocess.run(["chown", "-R", f"{nobody.pw_uid}:{nobody.pw_gid}", str(hub_path())], check=True)
    r = cli("pull", cwd=memory)
    assert r.code == 4, r.err
    assert "detected dubious ownership" in r.err and f"safe.directory {hub_path()}" in r.err


# -- core.worktree, core.bare ----------------------------------------------------------------------


def test_core_worktree_pointing_elsewhere_is_refused(memory: Path, cli: Cli, tmp_path: Path,
                                                     figures: Figures) -> None:
    figures.add("security attacks")
    other = tmp_path / "other"
    assert cli("clone", "research", str(other)).code == 0
    write(other, "new.md", "from the hub\n")
    assert cli("push", cwd=other).code == 0
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    git("config", "core.worktree", str(elsewhere), cwd=memory)
    for command in ("pull", "status", "push"):
        r = cli(command, cwd=memory)
        assert r.code == 7, (command, r.out, r.err)
        assert f"puts its work tree at {elsewhere} (core.worktree); refusing to use it" in r.err
        assert f"hint: if that is a mistake: git -C {memory} config --unset core.worktree" in r.err
    assert list(elsewhere.iterdir()) == []
    assert not (memory / "new.md").exists()
    figures.add("security attacks refused")
    git("config", "--unset", "core.worktree", cwd=memory)
    assert cli("pull", cwd=memory).code == 0
    assert (memory / "new.md").read_text() == "from the hub\n"


@pytest.mark.parametrize("value", ["..", "../", "."])
def test_core_worktree_is_judged_by_where_it_resolves(memory: Path, cli: Cli, value: str) -> None:
    """Relative to .git: `..` is the memory itself (fine), `.` is .git (refused)."""
    expected = memory if value.startswith("..") else memory / ".git"
    git("config", "core.worktree", value, cwd=memory)
    r = cli("status", cwd=memory)
    assert (r.code == 0) == (expected == memory), r.err


def test_core_bare_is_refused(memory: Path, cli: Cli) -> None:
    git("config", "core.bare", "true", cwd=memory)
    r = cli("status", cwd=memory)
    assert r.code == 7 and "no work tree (core.bare)" in r.err and "config core.bare false" in r.err


# -- credential.helper ------------------------------------------------------------------------------


@pytest.fixture
def http_memory(http_server: HttpGitServer, tmp_path: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Memory `research` on an authenticated HTTP hub, pushed with MEMSYNC_TOKEN (then unset)."""
    make_bare_hub(http_server.project_root / "hub.git")
    monkeypatch.setenv("MEMSYNC_REMOTE", http_server.url("hub.git"))
    monkeypatch.setenv("MEMSYNC_TOKEN", http_server.token)
    monkeypatch.setenv("MEMSYNC_USER", HTTP_USER)
    root = tmp_path / "research"
    root.mkdir()
    assert cli("init", cwd=root).code == 0
    write(root, "a.md", "a\n")
    assert cli("push", cwd=root).code == 0
    monkeypatch.delenv("MEMSYNC_TOKEN")
    return root


def test_credential_helper_from_the_memory_config_never_runs(http_memory: Path, http_server: HttpGitServer,
                                                             cli: Cli, tmp_path: Path, figures: Figures) -> None:
    figures.add("security attacks")
    helper, marker = _marker_helper(tmp_path, "planted-helper")
    git("config", "credential.helper", f"!{helper}", cwd=http_memory)
    r = cli("pull", cwd=http_memory)
    assert r.code == 4, r.err
    assert not marker.exists(), "the memory's credential.helper ran"
    figures.add("security attacks refused")


def test_credential_helper_of_the_operator_still_runs(http_memory: Path, http_server: HttpGitServer,
                                                      cli: Cli, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    store = tmp_path / "git-credentials"
    store.write_text(f"http://{http_server.user}:{http_server.token}@127.0.0.1%3a{http_server.port}\n")
    git("config", "--global", "credential.helper", f"store --file={store}", cwd=tmp_path)
    monkeypatch.setenv("GIT_DIR", str(http_memory / ".git"))  # a repository named by the environment: ignored too
    helper, marker = _marker_helper(tmp_path, "planted-helper")
    git("config", "--file", str(http_memory / ".git" / "config"), "credential.helper", f"!{helper}", cwd=tmp_path)
    r = cli("pull", cwd=http_memory)
    assert r.code == 0, r.err
    assert not marker.exists()


# -- the hub URL: insteadOf, proxies, ssh commands ---------------------------------------------------


@pytest.mark.parametrize("key", ["insteadOf", "pushInsteadOf"])
def test_url_rewrite_in_the_memory_config_is_refused(memory: Path, cli: Cli, tmp_path: Path, key: str,
                                                     figures: Figures) -> None:
    figures.add("security attacks")
    evil = make_bare_hub(tmp_path / "evil.git")
    git("config", f"url.{evil}.{key}", str(hub_path()), cwd=memory)
    write(memory, "summary.md", "secret notes\n")
    before = hub_tree()
    r = cli("push", cwd=memory)
    assert r.code == 7, r.err
    assert f"rewrites the hub URL {hub_path()} (url.{evil}.{key.lower()})" in r.err
    assert "hint: remove the rule" in r.err
    assert git("for-each-ref", cwd=evil) == ""  # nothing reached the other repository
    assert hub_tree() == before
    assert git("log", "-1", "--format=%s", cwd=memory)  # the commit is kept locally
    figures.add("security attacks refused")


def test_origin_in_the_memory_config_does_not_choose_the_hub(memory: Path, cli: Cli, tmp_path: Path,
                                                             figures: Figures) -> None:
    figures.add("security attacks")
    evil = make_bare_hub(tmp_path / "evil.git")
    git("config", "remote.origin.url", str(evil), cwd=memory)
    git("config", "remote.origin.pushurl", str(evil), cwd=memory)
    write(memory, "summary.md", "to the hub only\n")
    assert cli("push", cwd=memory).code == 0
    assert hub_tree()["summary.md"] == b"to the hub only\n"
    assert git("for-each-ref", cwd=evil) == ""
    figures.add("security attacks refused")


def test_url_rewrite_of_the_operator_is_followed(memory: Path, cli: Cli, tmp_path: Path) -> None:
    """A global insteadOf is the operator's own choice (e.g. https -> ssh for GitHub)."""
    mirror = tmp_path / "mirror.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(hub_path()), str(mirror)], check=True)
    git("config", "--global", f"url.{mirror}.insteadOf", str(hub_path()), cwd=tmp_path)
    write(memory, "summary.md", "to the mirror\n")
    assert cli("push", cwd=memory).code == 0
    assert hub_tree(hub=mirror)["summary.md"] == b"to the mirror\n"


def test_http_proxy_from_the_memory_config_is_not_used(http_memory: Path, http_server: HttpGitServer,
                                                       cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       figures: Figures) -> None:
    figures.add("security attacks")
    proxy = HttpGitServer(tmp_path, user="x", token="y", host="127.0.0.2")
    with proxy:
        git("config", "http.proxy", f"http://127.0.0.2:{proxy.port}", cwd=http_memory)
        monkeypatch.setenv("MEMSYNC_TOKEN", http_server.token)
        r = cli("pull", cwd=http_memory)
        seen = list(proxy.requests)
    proxy.cleanup()
    assert r.code == 0, r.err
    assert seen == []
    figures.add("security attacks refused")


def test_ssh_command_from_the_memory_config_never_runs(ssh_server: SshGitServer, tmp_path: Path, cli: Cli,
                                                       monkeypatch: pytest.MonkeyPatch, figures: Figures) -> None:
    figures.add("security attacks")
    bare = make_bare_hub(tmp_path / "hub.git")
    monkeypatch.setenv("MEMSYNC_REMOTE", ssh_server.url(bare))
    monkeypatch.setenv("MEMSYNC_KNOWN_HOSTS", str(ssh_server.write_known_hosts(tmp_path / "known_hosts")))
    monkeypatch.setenv("MEMSYNC_SSH_KEY", str(ssh_server.client_key))
    root = tmp_path / "research"
    root.mkdir()
    assert cli("init", cwd=root).code == 0
    helper, marker = _marker_helper(tmp_path, "ssh-command")
    git("config", "core.sshCommand", helper, cwd=root)
    write(root, "a.md", "a\n")
    assert cli("push", cwd=root).code == 0
    assert not marker.exists()
    figures.add("security attacks refused")


def test_extra_header_from_the_memory_config_is_not_sent(http_memory: Path, http_server: HttpGitServer,
                                                         cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    git("config", "http.extraHeader", "X-Planted: from-the-memory", cwd=http_memory)
    monkeypatch.setenv("MEMSYNC_TOKEN", http_server.token)
    before = len(http_server.requests)
    assert cli("pull", cwd=http_memory).code == 0
    assert len(http_server.requests) > before
    assert not any(r.header("X-Planted") for r in http_server.requests[before:])


@pytest.mark.parametrize("key", ["http.sslVerify", "http.sslCAInfo"])
def test_tls_settings_from_the_memory_config_do_not_lower_the_check(https_server: HttpGitServer, tmp_path: Path,
                                                                   cli: Cli, monkeypatch: pytest.MonkeyPatch,
                                                                   key: str, figures: Figures) -> None:
    """An agent cannot trust its own certificate for the operator: the CA comes from the
    environment (MEMSYNC_CA_BUNDLE ...), never from the memory's config."""
    figures.add("security attacks")
    make_bare_hub(https_server.project_root / "hub.git")
    for name in ("SSL_CERT_FILE", "SSL_CERT_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MEMSYNC_REMOTE", https_server.url("hub.git"))
    monkeypatch.setenv("MEMSYNC_TOKEN", https_server.token)
    monkeypatch.setenv("MEMSYNC_USER", https_server.user)
    root = tmp_path / "research"
    root.mkdir()
    assert cli("init", cwd=root).code == 0
    git("config", key, "false" if key == "http.sslVerify" else str(https_server.cert_path), cwd=root)
    write(root, "a.md", "a\n")
    r = cli("push", cwd=root)
    assert r.code == 4 and "TLS certificate of 127.0.0.1 is not trusted" in r.err, r.err
    assert not any(q.header("Authorization") for q in https_server.requests)
    figures.add("security attacks refused")


def test_programs_named_in_the_memory_config_never_run(memory: Path, cli: Cli, tmp_path: Path,
                                                       figures: Figures) -> None:
    """Hooks, fsmonitor and filter drivers are how git runs a repository's programs; memsync
    (libgit2) runs none of them, whatever the memory's config says."""
    figures.add("security attacks")
    program, marker = _marker_helper(tmp_path, "planted")
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    for hook in ("pre-commit", "commit-msg", "post-commit", "pre-push", "post-merge", "post-checkout",
                 "reference-transaction"):
        (hooks / hook).symlink_to(program)
    for key, value in (("core.hooksPath", str(hooks)), ("core.fsmonitor", program),
                       ("filter.planted.clean", program), ("filter.planted.smudge", program),
                       ("filter.planted.process", program), ("diff.planted.textconv", program)):
        git("config", key, value, cwd=memory)
    (memory / ".git" / "info" / "attributes").write_text("* filter=planted diff=planted\n")
    other = tmp_path / "other"
    assert cli("clone", "research", str(other)).code == 0
    write(other, "from-hub.md", "new\n")
    assert cli("push", cwd=other).code == 0
    write(memory, "summary.md", "edited\n")
    for command in ("push", "pull", "status", "log", "diff"):
        assert cli(command, cwd=memory).code == 0, command
    assert (memory / "from-hub.md").read_text() == "new\n"
    assert not marker.exists()
    figures.add("security attacks refused")
