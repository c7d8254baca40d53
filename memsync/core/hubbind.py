"""The hub a memory belongs to, and the refusal to let it change silently.

A memory remembers its hub in storage.yaml (`remote:`): the hub it was cloned from, or the one it
was first pushed to, however that hub was given (--remote, MEMSYNC_REMOTE or the embedded default).
Afterwards MEMSYNC_REMOTE naming another hub is refused instead of being ignored, and a memory
that older versions left without a record is refused when the hub it would now use is not the one
it exchanged with (its memsync-managed `origin`). `--remote URL` stays the explicit way to push a
mirror copy elsewhere; the memory's own hub does not change.
"""

from __future__ import annotations

from pathlib import Path

from memsync.core import config as cfgmod
from memsync.core.config import StorageConfig
from memsync.errors import UsageError
from memsync.git import hub as hubmod
from memsync.git.hub import HubUrl
from memsync.git.repo import GitRepo

__all__ = ["HubChanged", "came_from", "hub_key", "record", "recordable", "resolve_for"]


class HubChanged(UsageError):
    """A command would use a hub other than the memory's own without saying so."""

    def __init__(self, name: str, own: HubUrl, other: HubUrl, why: str) -> None:
        # a hint names only what is set: the variable when it chose the other hub, else the way back
        first = ("unset MEMSYNC_REMOTE for it" if why == "MEMSYNC_REMOTE"
                 else f"add `remote: {own.display}` to .vm0/storage.yaml to keep using it")
        super().__init__(
            f"memory {name!r} belongs to the hub {own.display}, but {why} names {other.display}",
            f"{first}; `--remote {other.display}` pushes a mirror copy there; "
            "to move the memory, edit `remote:` in .vm0/storage.yaml",
        )
        self.own = own
        self.other = other


def hub_key(hub: HubUrl) -> str:
    """One spelling per hub: a hub on this machine by its resolved path, an HTTP(S) hub by its URL
    without the account (`https://alice@host/x` and `https://host/x` are one hub), else its URL."""
    local = hub.local_path
    if local is not None:
        return str(local.expanduser().resolve())
    return _without_account(hub.url) if hub.kind == "http" else hub.url


def _without_account(url: str) -> str:
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    host = (parts.hostname or "") + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=host))


def came_from(git: GitRepo, branch: str) -> HubUrl | None:
    """The hub a memory without a `remote:` record has exchanged with: the `origin` memsync set
    when it was cloned or initialised, if a version was ever fetched from it. A hint used only to
    refuse (the repository's config is the agent's to write), never to choose a hub."""
    url, managed = git.config_values("remote.origin.url", "memsync.origin")
    if not url or managed != "managed" or git.ref_oid(f"refs/remotes/origin/{branch}") is None:
        return None
    try:
        return hubmod.parse(url)
    except UsageError:
        return None


def resolve_for(config: StorageConfig, git: GitRepo, flag: str | None) -> HubUrl:
    """The hub a command on this memory uses: the documented order, with silent changes refused."""
    from memsync.util.sealed import get

    if flag:
        # explicit (a mirror when not the memory's own); never with a credential
        return hubmod.from_flag(flag, config.name)
    env = get("MEMSYNC_REMOTE")
    if config.remote:
        own = hubmod.parse(config.remote, name=config.name)
        if env:
            given = hubmod.parse(env, name=config.name)
            if hub_key(given) != hub_key(own):
                raise HubChanged(config.name, own, given, "MEMSYNC_REMOTE")
            return given  # the same hub, with the account or token the variable carries
        return own
    hub = hubmod.resolve(None, None, config.name)
    earlier = came_from(git, config.hub_branch)
    if earlier is not None and hub_key(earlier) != hub_key(hub):
        why = "MEMSYNC_REMOTE" if env else "the default (the embedded hub)"
        raise HubChanged(config.name, earlier, hub, why)
    return hub


def record(root: Path, config: StorageConfig, git: GitRepo, flag: str | None) -> None:
    """Before a memory's first push: a memory that records no hub and never exchanged with one gets
    the hub this push goes to. One that did (made by an older memsync) is left as it is: the hub
    it came from is checked by resolve_for, and a push with --remote from it is a mirror push."""
    if config.remote or came_from(git, config.hub_branch) is not None:
        return
    hub = resolve_for(config, git, flag)
    kept = recordable(hub)
    path = cfgmod.config_path(root)
    text = path.read_text(encoding="utf-8")
    sep = "" if text.endswith("\n") or not text else "\n"
    cfgmod.atomic_write(path, f"{text}{sep}remote: {kept}\n")
    config.remote = kept
    git.ensure_layout(config.hub_branch, kept)


def recordable(hub: HubUrl) -> str:
    """The hub as storage.yaml keeps it: never a credential, and for HTTP(S) no account either
    (read back, `https://alice@host` would be taken for a token); the user then comes from
    MEMSYNC_USER or MEMSYNC_REMOTE, as for any HTTPS hub."""
    return _without_account(hub.url) if hub.kind == "http" else hub.url
