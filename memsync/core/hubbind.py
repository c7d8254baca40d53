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
from memsync.core.locking import Tenure, clear_stale_git_locks, held
from memsync.core.maintenance import auto_beside
from memsync.errors import UsageError
from memsync.git import hub as hubmod
from memsync.git.hub import HubUrl
from memsync.git.remote import Hub, Keeper, open_hub
from memsync.git.repo import GitRepo
from memsync.util.records import recordclass

__all__ = ["KEEPER", "Bound", "HubChanged", "Resolution", "bind", "bind_memory", "came_from", "record",
           "resolution", "resolve_for"]


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


@recordclass(frozen=True)
class Resolution:
    """The hub a command on a memory uses (`url`), and the memory's own hub when that one is
    another (a mirror given with --remote), both worked out in one pass (`resolution`)."""

    url: HubUrl
    own: HubUrl | None = None


def resolve_for(config: StorageConfig, git: GitRepo, flag: str | None) -> HubUrl:
    """The hub a command on this memory uses: the documented order, with silent changes refused."""
    return resolution(config, git, flag).url


def resolution(config: StorageConfig, git: GitRepo, flag: str | None) -> Resolution:
    """resolve_for's hub, with the memory's own hub when the two differ (a mirror push)."""
    from memsync.util.sealed import get

    if flag:
        # explicit (a mirror when not the memory's own); never with a credential
        url = hubmod.from_flag(flag, config.name)
        own = hubmod.parse(config.remote, name=config.name) if config.remote \
            else hubmod.resolve(None, None, config.name)
        return Resolution(url, None if own.key == url.key else own)  # --remote naming the own hub, however spelled
    env = get("MEMSYNC_REMOTE")
    if config.remote:
        own = hubmod.parse(config.remote, name=config.name)
        if env:
            given = hubmod.parse(env, name=config.name)
            if given.key != own.key:
                raise HubChanged(config.name, own, given, "MEMSYNC_REMOTE")
            return Resolution(given)  # the same hub, with the account or token the variable carries
        return Resolution(own)
    hub = hubmod.resolve(None, None, config.name)
    earlier = came_from(git, config.hub_branch)
    if earlier is not None and earlier.key != hub.key:
        why = "MEMSYNC_REMOTE" if env else "the default (the embedded hub)"
        raise HubChanged(config.name, earlier, hub, why)
    return Resolution(hub)


def record(root: Path, config: StorageConfig, git: GitRepo, hub: HubUrl) -> None:
    """Before a memory's first push: a memory that records no hub and never exchanged with one gets
    the hub this push goes to (`hub`, as resolve_for resolved it). One that did (made by an older
    memsync) is left as it is: the hub it came from is checked by resolve_for, and a push with
    --remote from it is a mirror push."""
    if config.remote or came_from(git, config.hub_branch) is not None:
        return
    kept = hub.recordable
    path = cfgmod.config_path(root)
    text = path.read_text(encoding="utf-8")
    sep = "" if text.endswith("\n") or not text else "\n"
    cfgmod.atomic_write(path, f"{text}{sep}remote: {kept}\n")
    config.remote = kept
    git.ensure_layout(config.hub_branch, kept)


@recordclass(frozen=True)
class Bound:
    """A memory's hub for one command, resolved and bound once: the hub itself, where what is
    known of its branch is kept (`tracking`), and the memory's own hub when this one is a mirror."""

    hub: Hub
    tracking: str  # "origin" for the memory's own hub, a name of its own for a mirror
    own: HubUrl | None  # the memory's own hub, when `hub` is another


def bind(url: HubUrl) -> Hub:
    """The hub at `url` of its kind (git/remote.py), with the core's lock and repack lent to it."""
    return open_hub(url, KEEPER)


def bind_memory(config: StorageConfig, git: GitRepo, flag: str | None, first_push: bool = False,
                root: Path | None = None, bound: Hub | None = None) -> Bound:
    """A memory's hub for a command, resolved once (resolution) and bound once; `first_push`: a
    push records it in storage.yaml first when the memory records none (record). `bound`: the
    hub this command already bound for the memory, from which it cloned it now (its storage.yaml
    records that hub): neither resolved nor bound again."""
    if bound is not None:
        return Bound(bound, "origin", None)
    found = resolution(config, git, flag)
    if first_push and root is not None and not config.remote:
        record(root, config, git, found.url)
        if config.remote:  # recorded now: the hub this push goes to is the memory's own
            found = Resolution(found.url)
    hub = bind(found.url)
    if found.own is None:  # the memory's own hub (the documented order, or --remote naming it)
        return Bound(hub, "origin", None)
    return Bound(hub, "hub-" + _digest(found.url.key), found.own)


def _digest(key: str) -> str:
    import hashlib  # a second hub only (OpenSSL's hashes are slow to load: docs/PERFORMANCE.md)

    return hashlib.sha1(key.encode("utf-8", "surrogateescape")).hexdigest()[:12]


def _clear_stale(git_dir: Path, tenure: Tenure, what: str) -> None:
    clear_stale_git_locks(git_dir, tenure, what)


KEEPER = Keeper(held, _clear_stale, auto_beside)
