"""Credentials, host keys, TLS and network failures against real servers on 127.0.0.1.

Also the leak test: every byte memsync wrote or printed is searched for the token.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import os
import subprocess
import sys
import time
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from memsync.errors import HostKeyError
from memsync.git.hostkeys import HostKeyChanged, HostUnknown, fingerprint, verify_ssh
from tests.conftest import Cli, git, memsync_cmd, write
from tests.helpers.servers import HttpGitServer, SshGitServer, make_bare_hub, ssh_agent

# -- known_hosts matching (pure) ----------------------------------------------------------------

KEY_A = b"\x00\x00\x00\x0bssh-ed25519\x00\x00\x00\x20" + bytes(range(32))
KEY_B = b"\x00\x00\x00\x0bssh-ed25519\x00\x00\x00\x20" + bytes(range(32, 64))
KEY_RSA = b"\x00\x00\x00\x07ssh-rsa\x00\x00\x00\x03\x01\x00\x01\x00\x00\x00\x02\x00\xff"


def line(host: str, blob: bytes) -> str:
    kind = blob[4:4 + blob[3]].decode()
    return f"{host} {kind} {base64.b64encode(blob).decode()}\n"


@pytest.fixture
def known(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "kh"
    monkeypatch.setenv("MEMSYNC_KNOWN_HOSTS", str(path))
    return path


def test_fingerprint_matches_ssh_keygen(tmp_path: Path) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "k")], check=True)
    pub = (tmp_path / "k.pub").read_text().split()
    printed = subprocess.run(["ssh-keygen", "-l", "-E", "sha256", "-f", str(tmp_path / "k.pub")],
                             capture_output=True, text=True, check=True).stdout.split()[1]
    assert fingerprint(base64.b64decode(pub[1])) == printed


@pytest.mark.parametrize("entry", [
    "example.org", "EXAMPLE.org", "*.org", "other.net,example.org", "ex?mple.org",
])
def test_plain_and_pattern_entries_match(known: Path, entry: str) -> None:
    known.write_text("# comment\n\n" + line(entry, KEY_A))
    verify_ssh("ssh://example.org/x", "example.org", None, KEY_A)


def test_port_entries_need_brackets(known: Path) -> None:
    known.write_text(line("example.org", KEY_A))
    with pytest.raises(HostUnknown, match=r"\[example.org\]:2222"):
        verify_ssh("u", "example.org", 2222, KEY_A)
    known.write_text(line("[example.org]:2222", KEY_A))
    verify_ssh("u", "example.org", 2222, KEY_A)
    with pytest.raises(HostUnknown):
        verify_ssh("u", "example.org", 22, KEY_A)


def test_negated_pattern_excludes(known: Path) -> None:
    known.write_text(line("*.org,!example.org", KEY_A))
    with pytest.raises(HostUnknown):
        verify_ssh("u", "example.org", None, KEY_A)


def test_hashed_entries_from_ssh_keygen_H(known: Path) -> None:
    known.write_text(line("[example.org]:2222", KEY_A) + line("plain.org", KEY_B))
    subprocess.run(["ssh-keygen", "-H", "-f", str(known)], check=True, capture_output=True)
    assert "example.org" not in known.read_text() and known.read_text().startswith("|1|")
    verify_ssh("u", "example.org", 2222, KEY_A)
    verify_ssh("u", "plain.org", None, KEY_B)
    with pytest.raises(HostKeyChanged):
        verify_ssh("u", "plain.org", None, KEY_A)


def test_changed_key_is_refused_loudly(known: Path) -> None:
    known.write_text(line("example.org", KEY_A))
    with pytest.raises(HostKeyChanged) as info:
        verify_ssh("ssh://example.org/x", "example.org", None, KEY_B)
    assert "HAS CHANGED" in info.value.message and "man-in-the-middle" in info.value.message
    assert fingerprint(KEY_A) in info.value.message and fingerprint(KEY_B) in info.value.message
    assert f"{known}:1" in info.value.message
    assert "ssh-keygen -R 'example.org'" in (info.value.hint or "")


def test_other_key_type_is_unknown_not_changed(known: Path) -> None:
    known.write_text(line("example.org", KEY_RSA))
    with pytest.raises(HostUnknown, match="only ssh-rsa keys"):
        verify_ssh("u", "example.org", None, KEY_A)


def test_revoked_key_is_refused(known: Path) -> None:
    known.write_text("@revoked example.org " + line("x", KEY_A).split(" ", 1)[1] + line("example.org", KEY_A))
    with pytest.raises(HostKeyError, match="revoked"):
        verify_ssh("u", "example.org", None, KEY_A)


def test_default_known_hosts_is_home_ssh(tmp_path: Path) -> None:
    ssh_dir = Path.home() / ".ssh"
    ssh_dir.mkdir()
    (ssh_dir / "known_hosts").write_text(line("example.org", KEY_A))
    verify_ssh("u", "example.org", None, KEY_A)


# -- SSH against a real sshd ----------------------------------------------------------------------


@pytest.fixture
def ssh_hub(ssh_server: SshGitServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An ssh:// MEMSYNC_REMOTE with a pushed memory, no credentials or known_hosts set yet."""
    bare = make_bare_hub(tmp_path / "hub.git")
    monkeypatch.setenv("MEMSYNC_REMOTE", ssh_server.url(bare))
    yield bare


def ssh_env(monkeypatch: pytest.MonkeyPatch, server: SshGitServer, tmp_path: Path, key: bool = True) -> Path:
    known = server.write_known_hosts(tmp_path / "known_hosts")
    monkeypatch.setenv("MEMSYNC_KNOWN_HOSTS", str(known))
    if key:
        monkeypatch.setenv("MEMSYNC_SSH_KEY", str(server.client_key))
    return known


def test_ssh_known_host_is_accepted(ssh_hub: Path, ssh_server: SshGitServer, cli: Cli, tmp_path: Path,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    ssh_env(monkeypatch, ssh_server, tmp_path)
    r = cli("list")
    assert r.code == 0, r.err


def test_ssh_unknown_host_refused_with_fingerprint(ssh_hub: Path, ssh_server: SshGitServer, cli: Cli,
                                                  tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    known = tmp_path / "empty_known_hosts"
    known.write_text("")
    monkeypatch.setenv("MEMSYNC_KNOWN_HOSTS", str(known))
    monkeypatch.setenv("MEMSYNC_SSH_KEY", str(ssh_server.client_key))
    r = cli("list")
    assert r.code == 4
    expected = subprocess.run(["ssh-keygen", "-l", "-f", f"{ssh_server.host_key}.pub"], capture_output=True,
                              text=True, check=True).stdout.split()[1]
    assert f"[127.0.0.1]:{ssh_server.port} is not in known_hosts" in r.err
    assert expected in r.err
    assert ssh_server.known_hosts_line.strip() in r.err  # the exact line that trusts it
    assert f"ssh-keyscan -p {ssh_server.port} 127.0.0.1 >> {known}" in r.err
    # Following the hint works.
    with known.open("a") as fh:
        fh.write(ssh_server.known_hosts_line)
    assert cli("list").code == 0


def test_ssh_changed_host_key_refused_loudly(ssh_hub: Path, ssh_server: SshGitServer, cli: Cli,
                                            tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "impostor")], check=True)
    impostor = " ".join((tmp_path / "impostor.pub").read_text().split()[:2])
    known = tmp_path / "known_hosts"
    known.write_text(f"[127.0.0.1]:{ssh_server.port} {impostor}\n")
    monkeypatch.setenv("MEMSYNC_KNOWN_HOSTS", str(known))
    monkeypatch.setenv("MEMSYNC_SSH_KEY", str(ssh_server.client_key))
    r = cli("list")
    assert r.code == 4
    assert "HAS CHANGED" in r.err and "man-in-the-middle" in r.err
    assert "not in known_hosts" not in r.err


def test_ssh_known_hosts_env_replaces_home_file(ssh_hub: Path, ssh_server: SshGitServer, cli: Cli,
                                               tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMSYNC_SSH_KEY", str(ssh_server.client_key))
    ssh_dir = Path.home() / ".ssh"
    ssh_dir.mkdir()
    ssh_server.write_known_hosts(ssh_dir / "known_hosts")
    assert cli("list").code == 0  # ~/.ssh/known_hosts by default
    empty = tmp_path / "other_known_hosts"
    empty.write_text("")
    monkeypatch.setenv("MEMSYNC_KNOWN_HOSTS", str(empty))
    r = cli("list")
    assert r.code == 4 and "not in known_hosts" in r.err


def test_ssh_hashed_known_hosts(ssh_hub: Path, ssh_server: SshGitServer, cli: Cli, tmp_path: Path,
                                monkeypatch: pytest.MonkeyPatch) -> None:
    known = ssh_env(monkeypatch, ssh_server, tmp_path)
    subprocess.run(["ssh-keygen", "-H", "-f", str(known)], check=True, capture_output=True)
    assert "127.0.0.1" not in known.read_text()
    assert cli("list").code == 0


def test_ssh_agent_comes_first(ssh_hub: Path, ssh_server: SshGitServer, cli: Cli, tmp_path: Path,
                               monkeypatch: pytest.MonkeyPatch) -> None:
    ssh_env(monkeypatch, ssh_server, tmp_path, key=False)
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "stranger")], check=True)
    monkeypatch.setenv("MEMSYNC_SSH_KEY", str(tmp_path / "stranger"))  # would be refused: never offered
    with ssh_agent([ssh_server.client_key]) as agent:
        for key, value in agent.items():
            monkeypatch.setenv(key, value)
        r = cli("list")
        assert r.code == 0, r.err
    stranger = subprocess.run(["ssh-keygen", "-l", "-f", str(tmp_path / "stranger.pub")], capture_output=True,
                              text=True, check=True).stdout.split()[1]
    assert not [entry for entry in ssh_server.log if stranger in entry]
    assert any("Accepted publickey" in entry for entry in ssh_server.log)


def test_ssh_agent_without_the_key_falls_back_to_memsync_ssh_key(ssh_hub: Path, ssh_server: SshGitServer, cli: Cli,
                                                                 tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    ssh_env(monkeypatch, ssh_server, tmp_path)
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "stranger")], check=True)
    with ssh_agent([tmp_path / "stranger"]) as agent:
        for key, value in agent.items():
            monkeypatch.setenv(key, value)
        r = cli("list")
        assert r.code == 0, r.err


def test_ssh_encrypted_key_with_passphrase(ssh_hub: Path, ssh_server: SshGitServer, cli: Cli, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    ssh_env(monkeypatch, ssh_server, tmp_path, key=False)
    monkeypatch.setenv("MEMSYNC_SSH_KEY", str(ssh_server.client_key_encrypted))
    r = cli("list")
    assert r.code == 4 and "passphrase" in r.err and "MEMSYNC_SSH_PASSPHRASE" in r.err
    monkeypatch.setenv("MEMSYNC_SSH_PASSPHRASE", ssh_server.passphrase)
    r = cli("list")
    assert r.code == 0, r.err
    assert ssh_server.passphrase not in r.err + r.out


def test_ssh_wrong_passphrase_fails_cleanly(ssh_hub: Path, ssh_server: SshGitServer, cli: Cli, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    ssh_env(monkeypatch, ssh_server, tmp_path, key=False)
    monkeypatch.setenv("MEMSYNC_SSH_KEY", str(ssh_server.client_key_encrypted))
    monkeypatch.setenv("MEMSYNC_SSH_PASSPHRASE", "wrong-passphrase-value")
    started = time.monotonic()
    r = cli("list")
    assert r.code == 4, r.err
    assert "accepted none of the SSH keys" in r.err and "MEMSYNC_SSH_PASSPHRASE is wrong" in r.err
    assert "wrong-passphrase-value" not in r.err
    assert time.monotonic() - started < 15


def test_ssh_default_key_in_home(ssh_hub: Path, ssh_server: SshGitServer, cli: Cli, tmp_path: Path,
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    ssh_env(monkeypatch, ssh_server, tmp_path, key=False)
    ssh_dir = Path.home() / ".ssh"
    ssh_dir.mkdir()
    for suffix in ("", ".pub"):
        (ssh_dir / f"id_ed25519{suffix}").write_bytes(Path(f"{ssh_server.client_key}{suffix}").read_bytes())
    (ssh_dir / "id_ed25519").chmod(0o600)
    assert cli("list").code == 0


def test_ssh_unaccepted_key_fails_after_few_attempts(ssh_hub: Path, ssh_server: SshGitServer, cli: Cli,
                                                    tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ssh_env(monkeypatch, ssh_server, tmp_path, key=False)
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "stranger")], check=True)
    monkeypatch.setenv("MEMSYNC_SSH_KEY", str(tmp_path / "stranger"))
    started = time.monotonic()
    r = cli("list")
    assert r.code == 4
    assert "accepted none of the SSH keys" in r.err and "stranger" in r.err
    assert time.monotonic() - started < 15


def test_ssh_no_key_at_all(ssh_hub: Path, ssh_server: SshGitServer, cli: Cli, tmp_path: Path,
                           monkeypatch: pytest.MonkeyPatch) -> None:
    ssh_env(monkeypatch, ssh_server, tmp_path, key=False)
    r = cli("list")
    assert r.code == 4 and "no SSH key" in r.err and "MEMSYNC_SSH_KEY" in r.err


# -- HTTP(S) credentials ---------------------------------------------------------------------------


@pytest.fixture
def http_hub(http_server: HttpGitServer, monkeypatch: pytest.MonkeyPatch) -> HttpGitServer:
    make_bare_hub(http_server.project_root / "hub.git")
    monkeypatch.setenv("MEMSYNC_REMOTE", http_server.url("hub.git"))
    return http_server


def test_http_token_from_env(http_hub: HttpGitServer, cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMSYNC_TOKEN", http_hub.token)
    monkeypatch.setenv("MEMSYNC_USER", http_hub.user)
    r = cli("list")
    assert r.code == 0, r.err
    assert http_hub.wrong_credentials == 0


def test_http_user_from_url(http_hub: HttpGitServer, cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMSYNC_TOKEN", http_hub.token)
    url = http_hub.url("hub.git").replace("://", f"://{http_hub.user}@")
    assert cli("list", "--remote", url).code == 0


def test_http_wrong_token_fails_fast_without_looping(http_hub: HttpGitServer, cli: Cli,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMSYNC_TOKEN", "wrong-token-0123456789")
    monkeypatch.setenv("MEMSYNC_USER", http_hub.user)
    started = time.monotonic()
    r = cli("list")
    assert r.code == 4
    assert "refused the credential from MEMSYNC_TOKEN" in r.err
    assert "wrong-token-0123456789" not in r.err + r.out
    assert http_hub.wrong_credentials <= 2
    assert time.monotonic() - started < 10


def test_http_without_credentials_says_what_to_set(http_hub: HttpGitServer, cli: Cli) -> None:
    r = cli("list")
    assert r.code == 4 and "none are set" in r.err and "MEMSYNC_TOKEN" in r.err


def test_http_token_is_read_per_operation(http_hub: HttpGitServer, cli: Cli, monkeypatch: pytest.MonkeyPatch,
                                          tmp_path: Path) -> None:
    monkeypatch.setenv("MEMSYNC_USER", http_hub.user)
    monkeypatch.setenv("MEMSYNC_TOKEN", "expired-token-aaaaaaaa")
    assert cli("list").code == 4
    monkeypatch.setenv("MEMSYNC_TOKEN", http_hub.token)  # the platform handed out a fresh one
    root = tmp_path / "research"
    root.mkdir()
    assert cli("init", cwd=root).code == 0
    write(root, "a.md", "a\n")
    assert cli("push", cwd=root).code == 0
    monkeypatch.setenv("MEMSYNC_TOKEN", "expired-token-bbbbbbbb")
    assert cli("pull", cwd=root).code == 4


def test_http_netrc_fallback(http_hub: HttpGitServer, cli: Cli) -> None:
    netrc = Path.home() / ".netrc"
    netrc.write_text(f"machine 127.0.0.1\n  login {http_hub.user}\n  password {http_hub.token}\n")
    netrc.chmod(0o600)
    r = cli("list")
    assert r.code == 0, r.err


def test_http_git_credential_helper_fallback(http_hub: HttpGitServer, cli: Cli, tmp_path: Path) -> None:
    store = tmp_path / "git-credentials"
    store.write_text(f"http://{http_hub.user}:{http_hub.token}@127.0.0.1%3a{http_hub.port}\n")
    git("config", "--global", "credential.helper", f"store --file={store}", cwd=tmp_path)
    r = cli("list")
    assert r.code == 0, r.err


def test_http_token_in_url_is_used_but_never_stored(http_hub: HttpGitServer, cli: Cli, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    url = http_hub.url("hub.git").replace("://", f"://{http_hub.user}:{http_hub.token}@")
    root = tmp_path / "research"
    root.mkdir()
    r = cli("init", "--remote", url, cwd=root)
    assert r.code == 2 and "credential on memsync's command line" in r.err  # never on a command line
    assert http_hub.token not in r.err and not (root / ".vm0").exists()
    monkeypatch.setenv("MEMSYNC_REMOTE", url)
    r = cli("init", cwd=root)
    assert r.code == 0, r.err
    write(root, "a.md", "a\n")
    assert cli("push", cwd=root).code == 0  # the token in MEMSYNC_REMOTE is used
    monkeypatch.setenv("MEMSYNC_REMOTE", http_hub.url("hub.git"))
    write(root, "b.md", "b\n")
    assert cli("push", cwd=root).code == 4  # ... and kept nowhere
    assert http_hub.token not in (root / ".vm0" / "storage.yaml").read_text()
    assert http_hub.token not in (root / ".git" / "config").read_text()


# -- TLS -------------------------------------------------------------------------------------------


@pytest.fixture
def https_hub(https_server: HttpGitServer, monkeypatch: pytest.MonkeyPatch) -> HttpGitServer:
    make_bare_hub(https_server.project_root / "hub.git")
    monkeypatch.setenv("MEMSYNC_REMOTE", https_server.url("hub.git"))
    monkeypatch.setenv("MEMSYNC_TOKEN", https_server.token)
    monkeypatch.setenv("MEMSYNC_USER", https_server.user)
    for name in ("SSL_CERT_FILE", "SSL_CERT_DIR"):
        monkeypatch.delenv(name, raising=False)
    return https_server


def test_https_self_signed_is_refused(https_hub: HttpGitServer, tmp_path: Path) -> None:
    proc = memsync_cmd("list", cwd=tmp_path, timeout=30)
    assert proc.returncode == 4
    assert "TLS certificate of 127.0.0.1 is not trusted" in proc.stderr
    assert "MEMSYNC_CA_BUNDLE" in proc.stderr
    assert not any(r.header("Authorization") for r in https_hub.requests)  # no token sent to it


@pytest.mark.parametrize("variable", ["MEMSYNC_CA_BUNDLE", "SSL_CERT_FILE", "GIT_SSL_CAINFO"])
def test_https_trusted_with_a_ca_bundle(https_hub: HttpGitServer, tmp_path: Path, variable: str) -> None:
    env = dict(os.environ, **{variable: str(https_hub.cert_path)})
    root = tmp_path / "research"
    root.mkdir()
    memsync_cmd("init", cwd=root, env=env, check=True)
    write(root, "a.md", "over tls\n")
    memsync_cmd("push", cwd=root, env=env, check=True)
    proc = memsync_cmd("list", cwd=tmp_path, env=env, check=True)
    assert "research" in proc.stdout


def test_missing_ca_bundle_is_a_config_error(https_hub: HttpGitServer, tmp_path: Path) -> None:
    env = dict(os.environ, MEMSYNC_CA_BUNDLE=str(tmp_path / "nope.pem"))
    proc = memsync_cmd("list", cwd=tmp_path, env=env, timeout=30)
    assert proc.returncode == 3 and "MEMSYNC_CA_BUNDLE" in proc.stderr


# -- network failures, each bounded in time -------------------------------------------------------

FAST = {"MEMSYNC_CONNECT_TIMEOUT": "2", "MEMSYNC_IO_TIMEOUT": "2"}


def timed_list(url: str, cwd: Path, **extra: str) -> tuple[subprocess.CompletedProcess[str], float]:
    env = dict(os.environ, **FAST, **extra)
    started = time.monotonic()
    proc = memsync_cmd("list", "--remote", url, cwd=cwd, env=env, timeout=60)
    return proc, time.monotonic() - started


@pytest.mark.parametrize("scheme", ["git", "http", "ssh"])
def test_connection_refused(refusing_port, tmp_path: Path, scheme: str) -> None:  # type: ignore[no-untyped-def]
    url = refusing_port.url("hub.git", scheme).replace("ssh://", "ssh://git@")
    proc, took = timed_list(url, tmp_path)
    assert proc.returncode == 4, proc.stderr
    assert proc.stderr.startswith("error: ") and "Traceback" not in proc.stderr
    assert "nothing is listening there" in proc.stderr and "--offline" in proc.stderr
    assert took < 10


@pytest.mark.parametrize("scheme", ["git", "http", "ssh"])
@pytest.mark.slow
def test_dns_failure(tmp_path: Path, scheme: str) -> None:
    proc, took = timed_list(f"{scheme}://nonexistent.invalid/hub.git", tmp_path)
    assert proc.returncode == 4, proc.stderr
    assert "unknown host" in proc.stderr and "nonexistent.invalid" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert took < 15


@pytest.mark.parametrize("scheme", ["git", "http", "ssh"])
def test_hanging_server_times_out(hanging_server, tmp_path: Path, scheme: str) -> None:  # type: ignore[no-untyped-def]
    url = hanging_server.url("hub.git", scheme).replace("ssh://", "ssh://git@")
    proc, took = timed_list(url, tmp_path, MEMSYNC_KNOWN_HOSTS=str(tmp_path / "none"))
    assert proc.returncode == 4, proc.stderr
    assert "did not answer in time" in proc.stderr and "MEMSYNC_IO_TIMEOUT" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert took < 20


def test_run_with_the_server_down_stops_before_the_command(refusing_port, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    marker = tmp_path / "ran"
    env = dict(os.environ, **FAST, MEMSYNC_REMOTE=refusing_port.url("hub.git", "http"))
    started = time.monotonic()
    proc = memsync_cmd("run", "--memory", "research", "--", sys.executable, "-c",
                       f"open({str(marker)!r}, 'w')", cwd=tmp_path, env=env, timeout=60)
    assert proc.returncode == 4, proc.stderr
    assert not marker.exists()
    assert time.monotonic() - started < 15


# -- the leak test --------------------------------------------------------------------------------


def _all_bytes(root: Path) -> Iterator[tuple[Path, bytes]]:
    """Every file under root, with git objects inflated (loose) or dumped (packs)."""
    for path in root.rglob("*"):
        if not path.is_file():
            continue
        data = path.read_bytes()
        if "objects" in path.parts and len(path.parent.name) == 2:
            with contextlib.suppress(zlib.error):
                data = zlib.decompress(data)
        yield path, data
    for gitdir in {p.parent for p in root.rglob("HEAD") if (p.parent / "objects").is_dir()}:
        dump = subprocess.run(["git", "--git-dir", str(gitdir), "cat-file", "--batch-all-objects", "--batch"],
                              capture_output=True, check=False).stdout
        yield gitdir / "objects", dump


def test_no_credential_anywhere(http_hub: HttpGitServer, tmp_path: Path, refusing_port) -> None:  # type: ignore[no-untyped-def]
    token = http_hub.token
    wrong = "wrong" + hashlib.sha256(b"w").hexdigest()[:24]
    good = dict(os.environ, MEMSYNC_TOKEN=token, MEMSYNC_USER=http_hub.user, MEMSYNC_REMOTE=http_hub.url("hub.git"),
                **FAST)
    bad = dict(good, MEMSYNC_TOKEN=wrong)
    url_with_token = http_hub.url("hub.git").replace("://", f"://{http_hub.user}:{token}@")
    agent = tmp_path / "agent.py"
    agent.write_text("import os, pathlib; p = pathlib.Path(os.environ['MEMSYNC_MEMORY_DIR']);"
                     " (p / 'run.md').write_text(os.environ['MEMSYNC_RUN_ID'])\n")
    root, laptop = tmp_path / "research", tmp_path / "laptop"
    root.mkdir()
    printed: list[str] = []

    def run(*args: str, cwd: Path, env: dict[str, str]) -> int:
        proc = memsync_cmd(*args, cwd=cwd, env=env, timeout=60)
        printed.extend([proc.stdout, proc.stderr])
        return proc.returncode

    assert run("init", "--remote", url_with_token, cwd=root, env=dict(good, MEMSYNC_TOKEN="")) == 2  # refused
    assert run("init", cwd=root, env=dict(good, MEMSYNC_TOKEN="", MEMSYNC_REMOTE=url_with_token)) == 0
    write(root, "notes.md", "notes\n")
    assert run("push", cwd=root, env=dict(good, MEMSYNC_TOKEN="")) == 4  # the URL's token is not kept
    assert run("push", cwd=root, env=dict(good, MEMSYNC_TOKEN="", MEMSYNC_REMOTE=url_with_token)) == 0
    write(root, "notes.md", "notes, more\n")
    assert run("push", cwd=root, env=good) == 0
    assert run("clone", "research", str(laptop), cwd=tmp_path, env=good) == 0
    assert run("run", "--memory", f"research:{laptop}", "--", sys.executable, str(agent), cwd=tmp_path, env=good) == 0
    assert run("pull", cwd=root, env=good) == 0
    assert run("status", cwd=root, env=good) == 0
    assert run("status", "--json", cwd=root, env=bad) in (0, 4)
    assert run("list", cwd=tmp_path, env=good) == 0
    assert run("list", cwd=tmp_path, env=dict(good, MEMSYNC_REMOTE=url_with_token)) == 0
    assert run("list", "--remote", url_with_token, cwd=tmp_path, env=good) == 2
    # error paths: wrong token, token in a URL that fails, server down, debug mode
    write(root, "more.md", "more\n")
    assert run("push", cwd=root, env=bad) != 0
    assert run("pull", cwd=root, env=bad) == 4
    assert run("list", cwd=tmp_path, env=dict(good, MEMSYNC_REMOTE=url_with_token.replace(token, wrong))) == 4
    down = refusing_port.url("hub.git", "http").replace("://", f"://{http_hub.user}:{token}@")
    assert run("list", cwd=tmp_path, env=dict(good, MEMSYNC_REMOTE=down)) == 4
    assert run("push", cwd=root, env=dict(bad, MEMSYNC_DEBUG="1")) != 0
    assert run("run", "--memory", f"research:{laptop}", "--", sys.executable, str(agent),
               cwd=tmp_path, env=dict(bad, MEMSYNC_DEBUG="1")) != 0
    assert (root / "notes.md").exists() and "research" in "".join(printed)

    for secret in (token, wrong):
        for text in printed:
            assert secret not in text
        for where in (tmp_path, Path(os.environ["MEMSYNC_HOME"])):
            for path, data in _all_bytes(where):
                assert secret.encode() not in data, f"{secret[:4]}… found in {path}"
