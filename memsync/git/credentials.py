"""Credentials and server identity, read from the environment anew for every operation.

Nothing here is cached to disk or between operations: a short-lived token that a sandbox
platform rotates just works. Nothing here is ever put into a message either (a message names
where a credential came from, never its value).

HTTP(S), first source that has one (the server's verdict on it is final: no second guess):
  1. a token written in the URL (`https://user:TOKEN@host/...`, or `https://TOKEN@host/...` when
     MEMSYNC_TOKEN is not set; from MEMSYNC_REMOTE or storage.yaml, never `--remote`, which
     refuses it; used for that command, never stored),
  2. `MEMSYNC_TOKEN` (user: from the URL, else `MEMSYNC_USER`, else `x-access-token`),
  3. `~/.netrc` (or `$NETRC`): the `machine` entry for the host,
  4. `git credential fill`, if git is installed: whatever credential helper git is configured
     with (`gh auth setup-git`, a store, a keychain); never prompts (no terminal, no askpass).
SSH, each tried in turn until the server accepts one:
  0. a password written in the URL (`ssh://user:PASSWORD@host/...`, `user:PASSWORD@host:path`),
     once, if the server accepts passwords,
  1. the keys in ssh-agent (`SSH_AUTH_SOCK`),
  2. `MEMSYNC_SSH_KEY` (passphrase from `MEMSYNC_SSH_PASSPHRASE`),
  3. `~/.ssh/id_ed25519`, `id_ecdsa`, `id_rsa` (encrypted ones only with MEMSYNC_SSH_PASSPHRASE).
  The user is the URL's (`ssh://user@host/...`), else `git` as hosted forges expect.
libgit2 asks again after each refusal and would loop forever; every source is offered once.
TLS: `MEMSYNC_CA_BUNDLE`, else `GIT_SSL_CAINFO`, else `SSL_CERT_FILE` (a PEM file or a directory
of hashed certificates) is added to the trusted CAs before each operation.
"""

from __future__ import annotations

import base64
import os
import shutil
from pathlib import Path
from urllib.parse import urlsplit

import pygit2
from pygit2.enums import CredentialType, Option

from memsync.errors import AuthFailed, ConfigError, HostKeyError
from memsync.git.hostkeys import ServerIdentity, verify_ssh
from memsync.git.hub import HubUrl
from memsync.util import sealed
from memsync.util.records import recordclass

DEFAULT_HTTP_USER = "x-access-token"
DEFAULT_SSH_USER = "git"
HELPER_TIMEOUT = 10.0
DEFAULT_KEYS = ("id_ed25519", "id_ecdsa", "id_rsa")

Credential = pygit2.Username | pygit2.UserPass | pygit2.Keypair | pygit2.KeypairFromAgent


class CertificateUntrusted(HostKeyError):
    """The HTTPS server's certificate did not verify against the trusted CAs."""


@recordclass(frozen=True)
class HttpSecret:
    source: str  # where it came from, safe to show
    user: str
    password: str


@recordclass(frozen=True)
class SshKey:
    source: str
    private: Path | None  # None: ssh-agent
    passphrase: str = ""
    encrypted: bool = False


class Credentials:
    """What to answer libgit2's credentials callback with, for one operation on one hub."""

    def __init__(self, hub: HubUrl) -> None:
        self.hub = hub
        self.tried: list[str] = []
        self._ssh: list[SshKey] | None = None
        self._http_given = False
        self._ssh_password_given = False

    def acquire(self, url: str | None, username_from_url: str | None, allowed: int) -> Credential:
        """`url`: the URL libgit2 is authenticating to, which after a redirect is not the hub's."""
        types = CredentialType(allowed)
        if (self.hub.kind == "ssh" and self.hub.password is not None and not self._ssh_password_given
                and CredentialType.USERPASS_PLAINTEXT in types):
            # a password written into an ssh URL (MEMSYNC_REMOTE, storage.yaml): offered once
            self._ssh_password_given = True
            return pygit2.UserPass(username_from_url or DEFAULT_SSH_USER, self.hub.password)
        if CredentialType.SSH_KEY in types:
            return self._next_ssh_key(username_from_url or DEFAULT_SSH_USER)
        if CredentialType.USERNAME in types:
            return pygit2.Username(username_from_url or DEFAULT_SSH_USER)
        if CredentialType.USERPASS_PLAINTEXT in types:
            return self._http(url or self.hub.url, username_from_url)
        raise AuthFailed(f"{self.hub.display} asks for a kind of credential memsync does not support")

    def _http(self, url: str, username_from_url: str | None) -> pygit2.UserPass:
        if origin(url) != origin(self.hub.url):
            # A redirect to another host (or port, or scheme): the hub's token is not for it. Like
            # git, only a credential stored for that very host may go there, once.
            secret = None if self._http_given else stored_secret(url, username_from_url)
            if secret is None:
                scheme, host, port = origin(url)
                there = f"{scheme}://{host}" + (f":{port}" if port else "")
                raise AuthFailed(f"{self.hub.display} redirected to {there}, which asks for credentials; "
                                 "the hub's credentials are only sent to the hub's own host",
                                 "if the hub really moved, use its new URL as the remote "
                                 "(--remote, storage.yaml `remote`, MEMSYNC_REMOTE)")
            self._http_given = True
            self.tried.append(secret.source)
            return pygit2.UserPass(secret.user, secret.password)
        if self._http_given:
            raise AuthFailed(f"{self.hub.display} refused the credential from {self.tried[-1]}",
                             "check that it is valid, not expired and allowed to read and write the "
                             "repository (and MEMSYNC_USER, if the server needs a user name)")
        secret = http_secret(self.hub, username_from_url)
        if secret is None:
            raise AuthFailed(f"{self.hub.display} asks for credentials and none are set",
                             "set MEMSYNC_TOKEN (and MEMSYNC_USER if the server needs a user name); "
                             "see docs/REMOTES.md")
        self._http_given = True
        self.tried.append(secret.source)
        return pygit2.UserPass(secret.user, secret.password)

    def _next_ssh_key(self, user: str) -> pygit2.Keypair | pygit2.KeypairFromAgent:
        if self._ssh is None:
            self._ssh = ssh_keys()
        if not self._ssh:
            raise AuthFailed(f"{self.hub.display}: no SSH key to offer",
                             "load a key into ssh-agent, or set MEMSYNC_SSH_KEY to a private key file")
        if len(self.tried) >= len(self._ssh):
            wrong_passphrase = " (or MEMSYNC_SSH_PASSPHRASE is wrong)" if any(k.encrypted for k in self._ssh) else ""
            raise AuthFailed(f"{self.hub.display} accepted none of the SSH keys offered "
                             f"({', '.join(self.tried)}) for user {user!r}",
                             "add the public key to the server (for GitHub: a deploy key with write "
                             f"access), or check the user name in the URL{wrong_passphrase}")
        key = self._ssh[len(self.tried)]
        self.tried.append(key.source)
        if key.private is None:
            return pygit2.KeypairFromAgent(user)
        pub = key.private.with_name(key.private.name + ".pub")
        return pygit2.Keypair(user, str(pub) if pub.exists() else None, str(key.private), key.passphrase)


def http_secret(hub: HubUrl, username_from_url: str | None) -> HttpSecret | None:
    """The first HTTP credential found, in the documented order."""
    token = sealed.get("MEMSYNC_TOKEN")
    if hub.password and token and "@" not in hub.url:
        # `https://NAME@host`: a user name when MEMSYNC_TOKEN is set, else a token (GitHub style).
        username_from_url = username_from_url or hub.password
    user = username_from_url or sealed.get("MEMSYNC_USER") or DEFAULT_HTTP_USER
    if hub.password and hub.password != username_from_url:
        return HttpSecret("the remote URL", user, hub.password)
    if token:
        return HttpSecret("MEMSYNC_TOKEN", user, token)
    return stored_secret(hub.url, username_from_url)


def stored_secret(url: str, username_from_url: str | None) -> HttpSecret | None:
    """A credential stored for exactly this URL's host: ~/.netrc, then git's credential helper."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    return _from_netrc(host, username_from_url) or _from_git_helper(parts.scheme, parts.netloc.rsplit("@", 1)[-1],
                                                                    username_from_url)


_DEFAULT_PORTS = {"http": 80, "https": 443}


def origin(url: str) -> tuple[str, str, int | None]:
    """(scheme, host, port) as credentials are scoped: a redirect to anything else is another host."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return ("", url, None)
    scheme = parts.scheme.lower()
    return (scheme, (parts.hostname or "").lower(), port or _DEFAULT_PORTS.get(scheme))


def _from_netrc(host: str, wanted_user: str | None) -> HttpSecret | None:
    import netrc  # HTTPS credentials only: not every command's start-up

    path = Path(os.environ.get("NETRC") or Path.home() / ".netrc").expanduser()
    if not path.is_file():
        return None
    try:
        entry = netrc.netrc(str(path)).authenticators(host)
    except (netrc.NetrcParseError, OSError, UnicodeDecodeError):
        return None
    if entry is None or not entry[2]:
        return None
    login = entry[0] or wanted_user or DEFAULT_HTTP_USER
    if wanted_user and login != wanted_user:
        return None
    return HttpSecret(f"{path} (machine {host})", login, entry[2])


def _from_git_helper(scheme: str, host: str, wanted_user: str | None) -> HttpSecret | None:
    import subprocess  # HTTPS credentials only: not every command's start-up
    import tempfile

    git = shutil.which("git")
    if git is None or not host:
        return None
    query = f"protocol={scheme}\nhost={host}\n" + (f"username={wanted_user}\n" if wanted_user else "") + "\n"
    try:
        with tempfile.TemporaryDirectory(prefix="memsync-credential-") as neutral:
            done = subprocess.run([git, "credential", "fill"], input=query, capture_output=True, text=True,
                                  cwd=neutral, env=_helper_env(neutral), timeout=HELPER_TIMEOUT, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    answer = dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)
    if not answer.get("password"):
        return None
    return HttpSecret("git's credential helper", answer.get("username") or wanted_user or DEFAULT_HTTP_USER,
                      answer["password"])


def _helper_env(neutral: str) -> dict[str, str]:
    """git's environment for `git credential fill`: run outside any repository, so only the
    operator's global and system config choose the helper, never a memory's .git/config (or a
    repository named by GIT_DIR, or config injected through GIT_CONFIG_PARAMETERS/COUNT)."""
    env = {k: v for k, v in os.environ.items()
           if k not in _REPO_VARIABLES and not k.startswith(("GIT_CONFIG_KEY_", "GIT_CONFIG_VALUE_"))}
    env.update(GIT_TERMINAL_PROMPT="0", GIT_ASKPASS="", SSH_ASKPASS="",
               GIT_CEILING_DIRECTORIES=str(Path(neutral).parent))
    return env


_REPO_VARIABLES = frozenset((
    "GIT_DIR", "GIT_WORK_TREE", "GIT_COMMON_DIR", "GIT_INDEX_FILE", "GIT_NAMESPACE", "GIT_DISCOVERY_ACROSS_FILESYSTEM",
    "GIT_CONFIG", "GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT", "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_CEILING_DIRECTORIES",
))


def _encrypted(path: Path) -> bool:
    """Whether a private key file needs a passphrase (OpenSSH or PEM format)."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return False
    if "ENCRYPTED" in text:
        return True
    if "BEGIN OPENSSH PRIVATE KEY" not in text:
        return False
    body = "".join(line for line in text.splitlines() if line and not line.startswith("-----"))
    try:
        raw = base64.b64decode(body)
    except ValueError:
        return False
    magic = b"openssh-key-v1\0"
    cipher_len = int.from_bytes(raw[len(magic):len(magic) + 4], "big")
    return raw[len(magic) + 4:len(magic) + 4 + cipher_len] != b"none"


def ssh_keys() -> list[SshKey]:
    """The keys to offer, in order; a broken MEMSYNC_SSH_KEY is an error, not skipped."""
    keys: list[SshKey] = []
    sock = os.environ.get("SSH_AUTH_SOCK")
    if sock and Path(sock).exists():
        keys.append(SshKey("ssh-agent", None))
    passphrase = sealed.get("MEMSYNC_SSH_PASSPHRASE") or ""
    explicit = sealed.get("MEMSYNC_SSH_KEY")
    if explicit:
        path = Path(explicit).expanduser()
        if not path.is_file():
            raise AuthFailed(f"MEMSYNC_SSH_KEY points to {path}, which is not a file",
                             "set it to the private key file (not the .pub)")
        encrypted = _encrypted(path)
        if encrypted and not passphrase:
            raise AuthFailed(f"the SSH key {path} (MEMSYNC_SSH_KEY) is protected by a passphrase",
                             "set MEMSYNC_SSH_PASSPHRASE, or load the key into ssh-agent")
        keys.append(SshKey(f"MEMSYNC_SSH_KEY {path}", path, passphrase, encrypted))
    for name in DEFAULT_KEYS:
        path = Path.home() / ".ssh" / name
        encrypted = _encrypted(path)
        if path.is_file() and (passphrase or not encrypted):
            keys.append(SshKey(str(path), path, passphrase, encrypted))
    return keys


def check_server(hub: HubUrl, identity: ServerIdentity) -> None:
    """Raise unless the server proved to be who known_hosts / the CA store says it is."""
    if identity.kind == "ssh":
        if identity.key is None:
            raise HostKeyError(f"{hub.display}: cannot verify the SSH host key ({identity.error})",
                               "refusing to connect to an unverified server")
        host, port = ssh_host_port(hub)
        verify_ssh(hub.display, identity.host or host, port, identity.key)
        return
    if identity.valid:
        return
    if identity.kind == "tls":
        raise CertificateUntrusted(
            f"{hub.display}: the TLS certificate of {identity.host} is not trusted "
            "(self-signed, expired, issued by an unknown CA, or for another host name)",
            "if the server uses a private CA, set MEMSYNC_CA_BUNDLE to its PEM certificate file "
            "(SSL_CERT_FILE and GIT_SSL_CAINFO work too)",
        )
    raise HostKeyError(f"{hub.display}: the identity of {identity.host} could not be verified")


def ssh_host_port(hub: HubUrl) -> tuple[str, int | None]:
    if "://" in hub.url:
        parts = urlsplit(hub.url)
        return parts.hostname or "", parts.port
    return hub.url.split("@", 1)[-1].split(":", 1)[0], None  # scp-like user@host:path


_applied_ca: tuple[str | None, str | None] | None = None


def configure_tls() -> None:
    """Trust the CA bundle named in the environment (read anew for every operation)."""
    global _applied_ca
    name, value = next(((n, os.environ[n]) for n in ("MEMSYNC_CA_BUNDLE", "GIT_SSL_CAINFO", "SSL_CERT_FILE")
                        if os.environ.get(n)), (None, None))
    if name is None or value is None:
        return
    path = Path(value).expanduser()
    if not path.exists():
        raise ConfigError(f"{name} points to {path}, which does not exist",
                          "set it to a PEM file of CA certificates")
    wanted = (None, str(path)) if path.is_dir() else (str(path), None)
    if wanted != _applied_ca:
        pygit2.option(Option.SET_SSL_CERT_LOCATIONS, *wanted)
        _applied_ca = wanted
