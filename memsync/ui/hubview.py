"""The hub a page shows: its shelf (git/remote.py), read in place when it is on this machine,
else fetched into a cache repository under MEMSYNC_HOME (at most once every REFRESH seconds,
incrementally), as `list` does. Only reads: actions go through a working copy (actions.py)."""

from __future__ import annotations

import re
import time

from memsync.core.hubbind import bind
from memsync.errors import UsageError
from memsync.git import hub as hubmod
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
        url = hubmod.resolve(remote, None)
        if "{name}" in url.url:
            raise UsageError("memsync ui shows one hub, and this remote is a template (one repository per memory)",
                             "give the URL of one hub with --remote")
        self.hub = bind(url)
        ensure_hub(self.hub)
        self.only = sorted(set(only)) if only else None
        self._fetched = 0.0
        self._proposals: dict[str, str] = {}  # the hub's open proposal branches, as last read
        self.git = self._read()
        if self.only:
            have = {name for name, _, _ in self.memories()}
            missing = [n for n in self.only if n not in have]
            if missing:
                raise UsageError(f"the hub {self.hub.display} has no memory {missing[0]!r}",
                                 "`memsync list` names the memories it has")

    @property
    def display(self) -> str:
        return self.hub.display

    def _read(self) -> GitRepo:
        """The hub's memories and proposals read here (Hub.shelf: the hub itself on this machine,
        else the page's cache, fetched now)."""
        git = self.hub.shelf("cannot show", [f"{kind}/{n}" for kind in ("memory", "artifact")
                                             for n in self.only or ["*"]], cache="ui-")
        self._proposals = self.hub.refs_under(git, PROPOSALS)
        self._fetched = time.monotonic()
        return git

    def refresh(self, force: bool = False) -> None:
        """Bring the hub's memories up to date: a copy at most once every REFRESH seconds; a hub
        on this machine, read in place, at every call."""
        if force or not self.hub.copied_here or time.monotonic() - self._fetched >= REFRESH:
            self.git = self._read()

    def memories(self) -> list[tuple[str, str, str]]:
        """(name, type, tip) of every memory shown, sorted by name."""
        where = self.hub.heads_at
        found = []
        for ref, oid in self.git.refs_under(where):
            m = _BRANCH_RE.match(ref)
            if m and (self.only is None or m.group(2) in self.only):
                found.append((m.group(2), m.group(1), oid))
        return sorted(found)

    def open_proposals(self, name: str) -> int:
        """How many proposals of `name` wait on the hub (branches `proposals/<name>/<run-id>`)."""
        from memsync.util.names import RUN_ID_RE

        self.refresh()
        refs = self._proposals
        prefix = f"{PROPOSALS}{name}/"
        return sum(1 for ref in refs if ref.startswith(prefix) and RUN_ID_RE.match(ref.removeprefix(prefix))
                   and ".." not in ref)

    def tip(self, name: str) -> str:
        self.refresh()
        for found, _, oid in self.memories():
            if found == name:
                return oid
        raise NotFound(f"no memory {name!r} here", "the first page lists the memories shown")
