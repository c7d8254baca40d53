"""Credentials and server identity checks, read from the environment for every operation.

Nothing here is cached to disk: short-lived tokens work because each operation reads them anew.
libgit2 calls the credentials callback again after each failure, so attempts are counted.
"""

from __future__ import annotations

import os
from pathlib import Path

import pygit2
from pygit2.enums import CredentialType

from memsync.errors import AuthFailed, HostKeyError
from memsync.hub import HubUrl

MAX_ATTEMPTS = 2
DEFAULT_HTTP_USER = "x-access-token"


def _ssh_keys(attempt: int, user: str) -> pygit2.Keypair | pygit2.KeypairFromAgent | None:
    candidates: list[pygit2.Keypair | pygit2.KeypairFromAgent] = []
    if os.environ.get("SSH_AUTH_SOCK"):
        candidates.append(pygit2.KeypairFromAgent(user))
    key = os.environ.get("MEMSYNC_SSH_KEY")
    passphrase = os.environ.get("MEMSYNC_SSH_PASSPHRASE", "")
    paths = [Path(key).expanduser()] if key else []
    ssh_dir = Path.home() / ".ssh"
    paths += [ssh_dir / n for n in ("id_ed25519", "id_ecdsa", "id_rsa")]
    for path in paths:
        if path.exists():
            pub = path.with_name(path.name + ".pub")
            candidates.append(pygit2.Keypair(user, str(pub) if pub.exists() else None, str(path), passphrase))
    return candidates[attempt - 1] if attempt <= len(candidates) else None


def credentials_for(hub: HubUrl, username_from_url: str | None, allowed: int,
                    attempt: int) -> pygit2.Username | pygit2.UserPass | pygit2.Keypair | pygit2.KeypairFromAgent:
    allowed_types = CredentialType(allowed)
    if CredentialType.SSH_KEY in allowed_types:
        user = username_from_url or os.environ.get("USER") or "git"
        cred = _ssh_keys(attempt, user)
        if cred is None:
            raise AuthFailed(f"{hub.display}: no SSH key was accepted",
                             "load a key into ssh-agent or set MEMSYNC_SSH_KEY")
        return cred
    if CredentialType.USERNAME in allowed_types:
        return pygit2.Username(username_from_url or os.environ.get("USER") or "git")
    if CredentialType.USERPASS_PLAINTEXT in allowed_types:
        token = hub.password or os.environ.get("MEMSYNC_TOKEN")
        if not token:
            raise AuthFailed(f"{hub.display} asks for credentials and none are set",
                             "set MEMSYNC_TOKEN (and MEMSYNC_USER if the server needs a user name)")
        if attempt > MAX_ATTEMPTS:
            raise AuthFailed(f"{hub.display} refused the token",
                             "check MEMSYNC_TOKEN is valid and allowed to read and write the repository")
        user = username_from_url or os.environ.get("MEMSYNC_USER") or DEFAULT_HTTP_USER
        return pygit2.UserPass(user, token)
    raise AuthFailed(f"{hub.display} asks for an unsupported kind of credential")


def check_host(hub: HubUrl, valid: bool, host: bytes) -> bool:
    if valid:
        return True
    name = host.decode(errors="replace")
    raise HostKeyError(
        f"{hub.display}: the identity of {name} could not be verified",
        "for SSH add its key to known_hosts (ssh-keyscan); for HTTPS install its CA certificate",
    )
