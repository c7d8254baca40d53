"""The hub a page shows: read in place when it is on this machine, else fetched into a cache
repository under MEMSYNC_HOME (at most once every REFRESH seconds, incrementally), as `list`
does. Only reads: actions go through a working copy (actions.py)."""

from __future__ import annotations

import hashlib
import re
import time

from memsync.core.hubbind import bind
from memsync.core.locking import clear_stale_git_locks, held
from memsync.errors import UsageError
from memsync.git import hub as hubmod
from memsync.git import transport
from memsync.git.hub import HubUrl
from memsync.git.repo import GitRepo
from memsync.sync.hubs import ensure_hub

PROPOSALS = "refs/heads/proposals/"
REFRESH = 10.0  # seconds between two fetches from a network hub
_BRANCH_RE = re.compile(r"^refs/(?:heads|hub)/(memory|artifact)/([a-z0-9][a-z0-9-]{1,62}[a-z0-9])$")


class NotFound(UsageError):
    """A page names a memory, version, file or run the hub does not have (HTTP 404)."""


class HubView:
    """One hub, with the memories a page may show (`only`: those named by --memory)."""

    def __init__(self, remote: str | None, only: list[str] | None = None) -> None:
        self.remote = remote
        self.hub: HubUrl = hubmod.resolve(remote, None)
        if "{name}" in self.hub.url:
            raise UsageError("memsync ui shows one hub, and this remote is a template (one repository per memory)",
                             "give the URL of one hub with --remote")
        ensure_hub(bind(self.hub))
        self.only = sorted(set(only)) if only else None
        self._fetched = 0.0
        self._proposals: dict[str, str] = {}  # a network hub's open proposal branches, as last read
        self.git = self._open()
        self.refresh(force=True)
        if self.only:
            have = {name for name, _, _ in self.memories()}
            missing = [n for n in self.only if n not in have]
            if missing:
                raise UsageError(f"the hub {self.hub.display} has no memory {missing[0]!r}",
                                 "`memsync list` names the memories it has")

    @property
    def display(self) -> str:
        return self.hub.display

    def _open(self) -> GitRepo:
        if self.hub.local_path is not None:
            transport.check_local(self.hub)
            return transport.open_local_hub(self.hub, "cannot show")
        digest = hashlib.sha256(self.hub.url.encode()).hexdigest()[:16]
        return GitRepo.bare(hubmod.ensure_home() / "cache" / f"ui-{digest}.git", create=True)

    def refresh(self, force: bool = False) -> None:
        """Bring a network hub's memories into the cache (a hub on this machine is always current)."""
        if self.hub.local_path is not None or (not force and time.monotonic() - self._fetched < REFRESH):
            return
        home = hubmod.ensure_home()
        names = self.only or ["*"]
        with held(home / "ui-cache.lock", "the page's cache") as tenure:
            clear_stale_git_locks(self.git.git_dir, tenure, "the page's cache")
            transport.fetch(self.git, self.hub, [f"+refs/heads/{kind}/{n}:refs/hub/{kind}/{n}"
                                                 for kind in ("memory", "artifact") for n in names])
            self._proposals = transport.refs_under(self.git, self.hub, PROPOSALS)
        self._fetched = time.monotonic()

    def memories(self) -> list[tuple[str, str, str]]:
        """(name, type, tip) of every memory shown, sorted by name."""
        where = "refs/heads/" if self.hub.local_path is not None else "refs/hub/"
        found = []
        for ref, oid in self.git.refs_under(where):
            m = _BRANCH_RE.match(ref)
            if m and (self.only is None or m.group(2) in self.only):
                found.append((m.group(2), m.group(1), oid))
        return sorted(found)

    def open_proposals(self, name: str) -> int:
        """How many proposals of `name` wait on the hub (branches `proposals/<name>/<run-id>`)."""
        from memsync.util.names import RUN_ID_RE

        refs = self._proposals if self.hub.local_path is None else dict(self.git.refs_under(PROPOSALS))
        prefix = f"{PROPOSALS}{name}/"
        return sum(1 for ref in refs if ref.startswith(prefix) and RUN_ID_RE.match(ref.removeprefix(prefix))
                   and ".." not in ref)

    def tip(self, name: str) -> str:
        self.refresh()
        for found, _, oid in self.memories():
            if found == name:
                return oid
        raise NotFound(f"no memory {name!r} here", "the first page lists the memories shown")
