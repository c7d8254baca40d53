"""The test git servers work with the git CLI and with pygit2 over every transport."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pygit2
import pytest
from pygit2.enums import ConfigLevel, CredentialType

from tests.helpers.servers import (
    GitDaemon,
    HangingServer,
    HttpGitServer,
    RefusingPort,
    SshGitServer,
    descendants,
    install_reject_hook,
    isolated_git_env,
    kill_process_tree,
    make_bare_hub,
    run_reaped,
    ssh_agent,
)

pytestmark = pytest.mark.server

Env = dict[str, str]
Credential = pygit2.UserPass | pygit2.Keypair
SERVER_PROGRAMS = {"sshd", "git", "git-daemon", "git-http-backend", "git-upload-pack"}


# --------------------------------------------------------------------------- helpers


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Env]:
    """Isolated git CLI environment; also isolates pygit2 (HOME, config search path)."""
    home = tmp_path / "home"
    git_env = isolated_git_env(home)
    for key in [k for k in os.environ if k.startswith(("GIT_", "SSH_"))]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    levels = (ConfigLevel.SYSTEM, ConfigLevel.XDG, ConfigLevel.GLOBAL)
    saved = {level: pygit2.settings.search_path[level] for level in levels}
    for level in levels:
        pygit2.settings.search_path[level] = str(home)
    yield git_env
    for level, value in saved.items():
        pygit2.settings.search_path[level] = value


def git(env: Env, *args: str, cwd: Path | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = run_reaped(["git", *args], cwd=cwd, env=env, timeout=60)
    if check and result.returncode != 0:
        pytest.fail(f"git {' '.join(args)} failed:\n{result.stderr}")
    return result


def commit_file(env: Env, repo: Path, name: str, content: bytes | str) -> str:
    path = repo / name
    if isinstance(content, str):
        path.write_text(content)
    else:
        path.write_bytes(content)
    git(env, "add", name, cwd=repo)
    git(env, "commit", "-q", "-m", f"add {name}", cwd=repo)
    return git(env, "rev-parse", "HEAD", cwd=repo).stdout.strip()


def new_work_repo(env: Env, path: Path) -> Path:
    git(env, "init", "-q", "-b", "main", str(path))
    return path


def hub_ref(hub: Path, ref: str = "refs/heads/main") -> str | None:
    reference = pygit2.Repository(str(hub)).references.get(ref)
    return None if reference is None else str(reference.target)


def cli_roundtrip(env: Env, url: str, hub: Path, tmp_path: Path) -> None:
    """push from A, clone into B, push from B, fetch into A: all through ``url``."""
    a = new_work_repo(env, tmp_path / "a")
    first = commit_file(env, a, "one.txt", "one\n")
    git(env, "push", "-q", url, "main", cwd=a)
    assert hub_ref(hub) == first
    b = tmp_path / "b"
    git(env, "clone", "-q", url, str(b))
    second = commit_file(env, b, "two.txt", "two\n")
    git(env, "push", "-q", "origin", "main", cwd=b)
    assert hub_ref(hub) == second
    git(env, "fetch", "-q", url, "main", cwd=a)
    assert git(env, "rev-parse", "FETCH_HEAD", cwd=a).stdout.strip() == second


def with_userinfo(url: str, user: str, token: str) -> str:
    scheme, rest = url.split("://", 1)
    return f"{scheme}://{user}:{token}@{rest}"


class Callbacks(pygit2.RemoteCallbacks):
    """Records what libgit2 asks for; gives up after a few credential requests.

    libgit2 calls ``credentials`` again after every rejected attempt, with no limit.
    """

    def __init__(self, make: Callable[[str | None], Credential]) -> None:
        super().__init__()
        self.make = make
        self.asked: list[tuple[str, str | None, CredentialType]] = []
        self.updates: list[tuple[str, str | None]] = []
        self.remote_messages: list[str] = []

    def credentials(self, url: str, username_from_url: str | None, allowed_types: CredentialType) -> Credential:
        self.asked.append((url, username_from_url, allowed_types))
        if len(self.asked) > 3:
            raise PermissionError("credentials rejected 3 times")
        return self.make(username_from_url)

    def push_update_reference(self, refname: str, message: str | None) -> None:
        self.updates.append((refname, message))

    def sideband_progress(self, string: str) -> None:
        self.remote_messages.append(string)


def pygit2_roundtrip(url: str, hub: Path, tmp_path: Path, callbacks: Callbacks) -> None:
    """pygit2 clones ``url``, commits and pushes; the hub gets the commit."""
    repo = pygit2.clone_repository(url, str(tmp_path / "pyclone"), callbacks=callbacks)
    (tmp_path / "pyclone" / "py.txt").write_text("from pygit2\n")
    repo.index.add("py.txt")
    repo.index.write()
    sig = pygit2.Signature("Py Git", "py@example.invalid")
    parent = repo.head.target
    oid = repo.create_commit("HEAD", sig, sig, "pygit2 commit", repo.index.write_tree(), [parent])
    repo.remotes["origin"].push(["refs/heads/main:refs/heads/main"], callbacks=callbacks)
    assert callbacks.updates == [("refs/heads/main", None)]
    assert hub_ref(hub) == str(oid)


def seed(env: Env, hub: Path, tmp_path: Path) -> str:
    """Put one commit on the hub's main (via the local path)."""
    work = new_work_repo(env, tmp_path / "seed")
    head = commit_file(env, work, "seed.txt", "seed\n")
    git(env, "push", "-q", str(hub), "main", cwd=work)
    return head


# --------------------------------------------------------------------------- git daemon


def test_git_daemon_cli_roundtrip(git_daemon: GitDaemon, env: Env, tmp_path: Path) -> None:
    hub = make_bare_hub(git_daemon.base_path / "hub.git")
    assert git_daemon.url("hub.git") == f"git://127.0.0.1:{git_daemon.port}/hub.git"
    cli_roundtrip(env, git_daemon.url("hub.git"), hub, tmp_path)


def test_reject_hook_refuses_push(git_daemon: GitDaemon, env: Env, tmp_path: Path) -> None:
    hub = make_bare_hub(git_daemon.base_path / "hub.git")
    install_reject_hook(hub, "memsync: pushes are frozen")
    work = new_work_repo(env, tmp_path / "work")
    commit_file(env, work, "a.txt", "a\n")
    result = git(env, "push", git_daemon.url("hub.git"), "main", cwd=work, check=False)
    assert result.returncode != 0
    assert "remote: memsync: pushes are frozen" in result.stderr
    assert "pre-receive hook declined" in result.stderr
    assert hub_ref(hub) is None


def test_pygit2_git_daemon_roundtrip(git_daemon: GitDaemon, env: Env, tmp_path: Path) -> None:
    hub = make_bare_hub(git_daemon.base_path / "hub.git")
    seed(env, hub, tmp_path)
    callbacks = Callbacks(lambda user: pygit2.UserPass("unused", "unused"))
    pygit2_roundtrip(git_daemon.url("hub.git"), hub, tmp_path, callbacks)
    assert callbacks.asked == []  # git:// never authenticates


def test_pygit2_sees_hook_rejection(git_daemon: GitDaemon, env: Env, tmp_path: Path) -> None:
    hub = make_bare_hub(git_daemon.base_path / "hub.git")
    head = seed(env, hub, tmp_path)
    install_reject_hook(hub, "no pushes today")
    callbacks = Callbacks(lambda user: pygit2.UserPass("unused", "unused"))
    repo = pygit2.clone_repository(git_daemon.url("hub.git"), str(tmp_path / "c"), callbacks=callbacks)
    repo.remotes["origin"].push(["refs/heads/main:refs/heads/other"], callbacks=callbacks)
    # push() itself does not raise: the refusal only reaches the callbacks.
    assert callbacks.updates == [("refs/heads/other", "pre-receive hook declined")]
    assert "no pushes today\n" in callbacks.remote_messages
    assert hub_ref(hub) == head
    assert hub_ref(hub, "refs/heads/other") is None


# --------------------------------------------------------------------------- HTTP


def test_http_requires_token(http_server: HttpGitServer, env: Env) -> None:
    make_bare_hub(http_server.project_root / "hub.git")
    url = http_server.url("hub.git")
    assert url == f"http://127.0.0.1:{http_server.port}/hub.git"
    anonymous = git(env, "ls-remote", url, check=False)
    assert anonymous.returncode != 0
    assert http_server.auth_failures >= 1
    assert http_server.wrong_credentials == 0
    wrong = git(env, "ls-remote", with_userinfo(url, http_server.user, "nope"), check=False)
    assert wrong.returncode != 0
    assert "Authentication failed" in wrong.stderr
    assert http_server.wrong_credentials >= 1
    git(env, "ls-remote", with_userinfo(url, http_server.user, http_server.token))
    denied = [r for r in http_server.requests if r.status == 401]
    assert len(denied) == http_server.auth_failures


def test_http_cli_roundtrip(http_server: HttpGitServer, env: Env, tmp_path: Path) -> None:
    hub = make_bare_hub(http_server.project_root / "hub.git")
    url = with_userinfo(http_server.url("hub.git"), http_server.user, http_server.token)
    cli_roundtrip(env, url, hub, tmp_path)
    authorized = [r for r in http_server.requests if r.status == 200]
    assert authorized
    assert all(r.header("Authorization", "").startswith("Basic ") for r in authorized)


def test_http_chunked_push(http_server: HttpGitServer, env: Env, tmp_path: Path) -> None:
    hub = make_bare_hub(http_server.project_root / "hub.git")
    url = with_userinfo(http_server.url("hub.git"), http_server.user, http_server.token)
    work = new_work_repo(env, tmp_path / "work")
    head = commit_file(env, work, "blob.bin", os.urandom(256 * 1024))
    git(env, "-c", "http.postBuffer=1024", "push", "-q", url, "main", cwd=work)
    assert hub_ref(hub) == head
    posts = [r for r in http_server.requests if r.path.endswith("/git-receive-pack")]
    chunked = [r for r in posts if r.header("Transfer-Encoding") == "chunked"]
    assert chunked, [r.headers for r in posts]
    assert chunked[0].body_size > 256 * 1024


def test_https_refuses_unverified_cert(https_server: HttpGitServer, env: Env, tmp_path: Path) -> None:
    hub = make_bare_hub(https_server.project_root / "hub.git")
    assert https_server.cert_path is not None
    assert https_server.url("hub.git").startswith("https://127.0.0.1:")
    url = with_userinfo(https_server.url("hub.git"), https_server.user, https_server.token)
    refused = git(env, "ls-remote", url, check=False)
    assert refused.returncode != 0
    assert "certificate" in refused.stderr.lower()
    trusting = {**env, "GIT_SSL_CAINFO": str(https_server.cert_path)}
    cli_roundtrip(trusting, url, hub, tmp_path)


def test_pygit2_http_userpass(http_server: HttpGitServer, env: Env, tmp_path: Path) -> None:
    hub = make_bare_hub(http_server.project_root / "hub.git")
    seed(env, hub, tmp_path)
    user, token = http_server.user, http_server.token
    callbacks = Callbacks(lambda _: pygit2.UserPass(user, token))
    url = http_server.url("hub.git")
    pygit2_roundtrip(url, hub, tmp_path, callbacks)
    # Asked once per connection (clone, push), after a credential-less 401 probe.
    assert callbacks.asked == [(url, None, CredentialType.USERPASS_PLAINTEXT)] * 2
    push_posts = [r for r in http_server.requests if r.path == "/hub.git/git-receive-pack"]
    assert [r.header("Transfer-Encoding") for r in push_posts] == ["chunked"]
    assert push_posts[0].header("Authorization", "").startswith("Basic ")


def test_pygit2_http_wrong_token_is_retried(http_server: HttpGitServer, env: Env, tmp_path: Path) -> None:
    make_bare_hub(http_server.project_root / "hub.git")
    callbacks = Callbacks(lambda _: pygit2.UserPass(http_server.user, "wrong"))
    with pytest.raises(PermissionError):
        pygit2.clone_repository(http_server.url("hub.git"), str(tmp_path / "c"), callbacks=callbacks)
    assert len(callbacks.asked) == 4  # libgit2 kept asking until the callback raised
    assert http_server.wrong_credentials == 3


def test_pygit2_https_certificate_check(https_server: HttpGitServer, env: Env, tmp_path: Path) -> None:
    hub = make_bare_hub(https_server.project_root / "hub.git")
    seed(env, hub, tmp_path)
    user, token = https_server.user, https_server.token
    with pytest.raises(pygit2.GitError, match="certificate"):
        pygit2.clone_repository(
            https_server.url("hub.git"),
            str(tmp_path / "refused"),
            callbacks=Callbacks(lambda _: pygit2.UserPass(user, token)),
        )
    seen: list[tuple[bool, bytes]] = []

    class Trusting(Callbacks):
        def certificate_check(self, certificate: None, valid: bool, host: bytes) -> bool:
            seen.append((valid, host))
            return True

    pygit2_roundtrip(
        https_server.url("hub.git"),
        hub,
        tmp_path,
        Trusting(lambda _: pygit2.UserPass(user, token)),
    )
    assert seen[0] == (False, b"127.0.0.1")


# --------------------------------------------------------------------------- SSH


def test_ssh_cli_roundtrip(ssh_server: SshGitServer, env: Env, tmp_path: Path) -> None:
    hub = make_bare_hub(tmp_path / "hub.git")
    url = ssh_server.url(hub)
    assert url == f"ssh://root@127.0.0.1:{ssh_server.port}{hub}"
    assert ssh_server.known_hosts_line.startswith(f"[127.0.0.1]:{ssh_server.port} ssh-ed25519 AAAA")
    ssh_env = {**env, "GIT_SSH_COMMAND": ssh_server.ssh_command()}
    cli_roundtrip(ssh_env, url, hub, tmp_path)


def test_ssh_refuses_unknown_key(ssh_server: SshGitServer, env: Env, tmp_path: Path) -> None:
    hub = make_bare_hub(tmp_path / "hub.git")
    stranger = tmp_path / "stranger"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(stranger)], check=True)
    ssh_env = {**env, "GIT_SSH_COMMAND": ssh_server.ssh_command(stranger)}
    result = git(ssh_env, "ls-remote", ssh_server.url(hub), check=False)
    assert result.returncode != 0
    assert "Permission denied (publickey)" in result.stderr


def test_ssh_agent_with_encrypted_key(ssh_server: SshGitServer, env: Env, tmp_path: Path) -> None:
    hub = make_bare_hub(tmp_path / "hub.git")
    seed(env, hub, tmp_path)
    key = ssh_server.client_key_encrypted
    with ssh_agent([(key, ssh_server.passphrase)]) as agent_env:
        agent_pid = int(agent_env["SSH_AGENT_PID"])
        ssh_env = {
            **env,
            **agent_env,
            "GIT_SSH_COMMAND": ssh_server.ssh_command(agent=True),
        }
        git(ssh_env, "ls-remote", ssh_server.url(hub))
    assert not Path(f"/proc/{agent_pid}").exists()


@pytest.mark.parametrize("encrypted", [False, True], ids=["plain-key", "encrypted-key"])
def test_pygit2_ssh_keypair(ssh_server: SshGitServer, env: Env, tmp_path: Path, encrypted: bool) -> None:
    hub = make_bare_hub(tmp_path / "hub.git")
    seed(env, hub, tmp_path)
    key = ssh_server.client_key_encrypted if encrypted else ssh_server.client_key
    passphrase = ssh_server.passphrase if encrypted else ""
    callbacks = Callbacks(lambda user: pygit2.Keypair(user or "root", f"{key}.pub", str(key), passphrase))
    url = ssh_server.url(hub)
    pygit2_roundtrip(url, hub, tmp_path, callbacks)
    allowed = CredentialType.SSH_KEY | CredentialType.SSH_CUSTOM | CredentialType.SSH_MEMORY
    assert callbacks.asked == [(url, "root", allowed)] * 2


def test_pygit2_ssh_agent(
    ssh_server: SshGitServer,
    env: Env,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    hub = make_bare_hub(tmp_path / "hub.git")
    seed(env, hub, tmp_path)
    with ssh_agent([ssh_server.client_key]) as agent_env:
        monkeypatch.setenv("SSH_AUTH_SOCK", agent_env["SSH_AUTH_SOCK"])
        callbacks = Callbacks(lambda user: pygit2.KeypairFromAgent(user or "root"))
        pygit2_roundtrip(ssh_server.url(hub), hub, tmp_path, callbacks)


# --------------------------------------------------------------------------- lifecycle


def _server_for(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> tuple[GitDaemon | HttpGitServer | SshGitServer, Path, Callable[[Env], Env], str]:
    """(server, hub path, env adjuster, url) for one transport."""
    if kind == "git":
        daemon: GitDaemon = request.getfixturevalue("git_daemon")
        hub = make_bare_hub(daemon.base_path / "hub.git")
        return daemon, hub, lambda e: e, daemon.url("hub.git")
    if kind == "http":
        http: HttpGitServer = request.getfixturevalue("http_server")
        hub = make_bare_hub(http.project_root / "hub.git")
        url = with_userinfo(http.url("hub.git"), http.user, http.token)
        return http, hub, lambda e: e, url
    ssh: SshGitServer = request.getfixturevalue("ssh_server")
    hub = make_bare_hub(tmp_path / "hub.git")
    return ssh, hub, lambda e: {**e, "GIT_SSH_COMMAND": ssh.ssh_command()}, ssh.url(hub)


TRANSPORTS = ["git", "http", "ssh"]


@pytest.mark.parametrize("kind", TRANSPORTS)
def test_restart_keeps_port(kind: str, request: pytest.FixtureRequest, env: Env, tmp_path: Path) -> None:
    server, hub, adjust, url = _server_for(kind, request, tmp_path)
    port = server.port
    server.restart()
    assert server.port == port
    cli_roundtrip(adjust(env), url, hub, tmp_path)


def _slow_hook(hub: Path, marker: Path) -> None:
    """pre-receive that hangs the first time and refuses any later push.

    Over HTTP, curl may re-send a POST whose (reused) connection died without an
    answer, so the restarted server can see the same push again: it must fail too.
    """
    hook = hub / "hooks" / "pre-receive"
    hook.write_text(
        "#!/bin/sh\n"
        "cat >/dev/null\n"
        f"if [ -s {marker} ]; then echo 'hook ran again' >&2; exit 1; fi\n"
        f"echo $$ > {marker}\n"
        "exec sleep 60\n"
    )
    hook.chmod(0o755)


def _wait_for(path: Path, timeout: float = 20.0) -> str:
    deadline = time.monotonic() + timeout
    while not (path.exists() and path.read_text().strip()):
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)
    return path.read_text().strip()


@pytest.mark.parametrize("kind", TRANSPORTS)
def test_restart_mid_push_kills_server_side(
    kind: str, request: pytest.FixtureRequest, env: Env, tmp_path: Path
) -> None:
    server, hub, adjust, url = _server_for(kind, request, tmp_path)
    marker = tmp_path / "hook.pid"
    _slow_hook(hub, marker)
    work = new_work_repo(env, tmp_path / "work")
    commit_file(env, work, "a.txt", "a\n")
    push = subprocess.Popen(
        ["git", "push", url, "main"],
        cwd=work,
        env=adjust(env),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        hook_pid = int(_wait_for(marker))
        started = time.monotonic()
        server.restart()
        _, stderr = push.communicate(timeout=30)
    finally:
        kill_process_tree(push)  # git push and its remote helpers
    assert push.returncode != 0, stderr
    assert time.monotonic() - started < 20
    assert not Path(f"/proc/{hook_pid}").exists()  # the hook (server side) was killed
    assert hub_ref(hub) is None
    hub.joinpath("hooks", "pre-receive").unlink()
    cli_roundtrip(adjust(env), url, hub, tmp_path)  # the restarted server works


def _server_processes() -> list[str]:
    found = []
    for pid in descendants(os.getpid()):
        try:
            name = Path(f"/proc/{pid}/comm").read_text().strip()
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if name in SERVER_PROGRAMS:
            found.append(f"{name}[{pid}]:{state}")
    return found


def test_stop_leaves_no_processes(env: Env, tmp_path: Path) -> None:
    daemon_root = tmp_path / "daemon"
    daemon_root.mkdir()
    make_bare_hub(daemon_root / "hub.git")
    with GitDaemon(daemon_root) as daemon:
        git(env, "ls-remote", daemon.url("hub.git"))
        assert _server_processes()
    with SshGitServer(tmp_path / "sshd") as ssh:
        ssh_env = {**env, "GIT_SSH_COMMAND": ssh.ssh_command()}
        git(ssh_env, "ls-remote", ssh.url(daemon_root / "hub.git"))
        assert any(p.startswith("sshd[") for p in _server_processes())
    assert _server_processes() == []


# --------------------------------------------------------------------------- bad ports


def test_hanging_server_never_answers(hanging_server: HangingServer, env: Env) -> None:
    with socket.create_connection(("127.0.0.1", hanging_server.port), timeout=5) as conn:
        conn.settimeout(0.3)
        with pytest.raises(TimeoutError):
            conn.recv(1)
    started = time.monotonic()
    result = git(
        env,
        "-c", "http.lowSpeedLimit=1",
        "-c", "http.lowSpeedTime=1",
        "ls-remote", hanging_server.url("hub.git"),
        check=False,
    )  # fmt: skip
    assert result.returncode != 0
    assert time.monotonic() - started < 15
    assert hanging_server.accepted >= 1


def test_refusing_port_refuses(refusing_port: RefusingPort, env: Env) -> None:
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", refusing_port.port), timeout=5)
    result = git(env, "ls-remote", refusing_port.url("hub.git"), check=False)
    assert result.returncode != 0
    assert "Failed to connect" in result.stderr or "refused" in result.stderr.lower()
