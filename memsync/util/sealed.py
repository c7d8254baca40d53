"""Credentials kept out of the agent's reach during `memsync run`.

Before the command starts, memsync moves its credentials out of its own environment into this
module's memory (the copy the kernel shows in /proc/PID/environ is overwritten too), makes its own
process non-dumpable (same-uid processes can then no longer read /proc/PID/environ or
/proc/PID/mem, nor ptrace it), and gives the command an environment without them. Credentials keep
working for memsync's own fetches and pushes: every reader asks `get()` rather than os.environ.
"""

from __future__ import annotations

import os
import sys

# Cheap to import: a served `run`'s client (handoff.py) seals itself with this module on every
# command, so urllib.parse (and its `re`), contextlib and ctypes are imported only where needed.

__all__ = ["CREDENTIAL_VARS", "child_environment", "get", "make_undumpable", "seal", "strip_userinfo",
           "wipe_initial_copy"]

# Read by memsync only, never needed by the command. MEMSYNC_USER names the account the token
# belongs to: no secret itself, but it goes with the token and the command has no use for it.
CREDENTIAL_VARS = ("MEMSYNC_TOKEN", "MEMSYNC_USER", "MEMSYNC_SSH_KEY", "MEMSYNC_SSH_PASSPHRASE")
_AGENT_VARS = ("SSH_AUTH_SOCK", "SSH_AGENT_PID")
_held: dict[str, str] = {}


def get(name: str) -> str | None:
    """A variable as memsync reads it: the environment's, else the value sealed away from it."""
    value = os.environ.get(name)
    return value if value is not None else _held.get(name)


def strip_userinfo(url: str) -> str:
    """The URL without a password or bare token (`https://user:TOKEN@host` -> `https://user@host`,
    `https://TOKEN@host` -> `https://host`); anything else unchanged."""
    if "@" not in url:
        return url
    from urllib.parse import urlsplit, urlunsplit

    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    if parts.scheme.lower() not in ("http", "https") or "@" not in parts.netloc:
        return url
    userinfo, host = parts.netloc.rsplit("@", 1)
    user, has_secret, _ = userinfo.partition(":")
    return urlunsplit(parts._replace(netloc=f"{user}@{host}" if has_secret and user else host))


class seal:  # a class, not a @contextmanager: contextlib stays out of the client (see above)
    """Move the credentials (and a MEMSYNC_REMOTE holding one) out of this process's environment
    for the duration, keeping them for `get()`; they are put back afterwards."""

    def __enter__(self) -> None:
        remote = os.environ.get("MEMSYNC_REMOTE")
        names = CREDENTIAL_VARS + (("MEMSYNC_REMOTE",) if remote and strip_userinfo(remote) != remote else ())
        for name in names:
            value = os.environ.get(name)
            if value is not None:
                _held[name] = value
                wipe_initial_copy(name)
                del os.environ[name]

    def __exit__(self, *_exc: object) -> None:
        os.environ.update(_held)
        _held.clear()


def child_environment(keep_ssh_agent: bool = False) -> dict[str, str]:
    """memsync's environment minus every credential (and the ssh-agent unless asked to keep it)."""
    env = {k: v for k, v in os.environ.items() if k not in CREDENTIAL_VARS}
    if not keep_ssh_agent:
        for name in _AGENT_VARS:
            env.pop(name, None)
    remote = get("MEMSYNC_REMOTE")
    if remote:
        env["MEMSYNC_REMOTE"] = strip_userinfo(remote)
    return env


def wipe_initial_copy(name: str) -> None:
    """Overwrite the value in the process's initial environment block, which the kernel shows in
    /proc/PID/environ whatever os.environ says later (glibc's unsetenv only drops the pointer)."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    try:
        environ = ctypes.POINTER(ctypes.c_void_p).in_dll(ctypes.CDLL(None), "environ")
    except (OSError, ValueError):
        return
    prefix = name.encode() + b"="
    i = 0
    while environ[i]:
        address = environ[i]
        entry = ctypes.string_at(address)
        if entry.startswith(prefix):
            ctypes.memset(address + len(prefix), 0, len(entry) - len(prefix))
        i += 1


def make_undumpable() -> bool:
    """prctl(PR_SET_DUMPABLE, 0): no core dumps, /proc/PID/{environ,mem} owned by root and no
    ptrace by processes of the same uid. Linux only; False where it is not available."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    pr_set_dumpable = 4
    try:
        return int(ctypes.CDLL(None, use_errno=True).prctl(pr_set_dumpable, 0, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False
