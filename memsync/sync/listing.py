"""`memsync list`: every memory on a hub, from its ref advertisement.

Names come from ls-remote (`refs/heads/<type>/<name>`), so listing works on every transport.
Sizes and file counts need the versions' trees: a file:// hub is read in place; any other hub is
fetched into a cache repository under MEMSYNC_HOME (incremental: the next list transfers only
what changed). On a hub of thousands of memories a page (`prefix`, `after`, `limit`) reads the
trees of its own memories only, and with a prefix the cache fetches only the branches it names.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from memsync.core.hubbind import bind
from memsync.errors import UsageError
from memsync.git import hub as hubmod
from memsync.git.hub import HubUrl
from memsync.git.hubtree import TreeTooLarge
from memsync.git.remote import listing_cache
from memsync.git.repo import GitRepo
from memsync.sync.hubs import ensure_hub, last_run
from memsync.util.records import field, recordclass
from memsync.util.timefmt import rfc3339

_BRANCH_RE = re.compile(r"^refs/heads/(memory|artifact)/([a-z0-9][a-z0-9-]{1,62}[a-z0-9])$")
_PREFIX_RE = re.compile(r"^[a-z0-9-]{0,64}$")


@recordclass
class MemoryInfo:
    name: str
    type: str
    version: str
    files: int
    size: int
    updated: str  # RFC 3339, UTC
    last_run: str | None
    error: str | None = None  # the version could not be read (e.g. a tree past memsync's limits)
    last_exit_code: int | None = None  # of that run; None: still running, or killed before its end


def memory_names(refs: Iterable[str]) -> list[str]:
    """The memory names among a hub's branch refs (`refs/heads/<type>/<name>`)."""
    return sorted({m.group(2) for ref in refs if (m := _BRANCH_RE.match(ref))})


def _cache_repo(hub: HubUrl) -> GitRepo:
    return GitRepo.bare(listing_cache(hub), create=True)


@recordclass
class ListPage:
    hub: str  # as shown
    memories: list[MemoryInfo] = field(default_factory=list)
    more: str | None = None  # the last name shown when more follow: `--after` it for the next page


def list_memories(remote: str | None = None) -> tuple[str, list[MemoryInfo]]:
    """(the hub as shown, its memories sorted by name)."""
    page = list_page(remote)
    return page.hub, page.memories


def list_page(remote: str | None = None, *, prefix: str = "", after: str | None = None,
              limit: int | None = None) -> ListPage:
    """The hub's memories whose names start with `prefix`, sorted by name, from the first after
    the name `after`, at most `limit` of them."""
    check_page(prefix, after, limit)
    url = hubmod.resolve(remote, None)
    hub = bind(url)
    ensure_hub(hub)
    git = hub.shelf("cannot list", [f"{kind}/{prefix}*" for kind in ("memory", "artifact")])
    where = hub.heads_at
    branches = []
    for ref, oid in git.refs_under(where):
        match = _BRANCH_RE.match("refs/heads/" + ref[len(where):])
        if match and match.group(2).startswith(prefix) and (after is None or match.group(2) > after):
            branches.append((match.group(2), match.group(1), oid))
    branches.sort()
    page = ListPage(hub.display)
    if limit is not None and len({name for name, _, _ in branches}) > limit:
        shown = sorted({name for name, _, _ in branches})[:limit]
        page.more = shown[-1]
        branches = [b for b in branches if b[0] <= page.more]
    page.memories = [_info(git, name, kind, oid) for name, kind, oid in branches]
    return page


def check_page(prefix: str, after: str | None, limit: int | None) -> None:
    if not _PREFIX_RE.match(prefix):
        raise UsageError(f"--prefix {prefix!r} cannot begin a memory name",
                         "names are lowercase letters, digits and hyphens (e.g. --prefix team-a-)")
    if after is not None and not _PREFIX_RE.match(after):
        raise UsageError(f"--after {after!r} is not a memory name",
                         "give the last name of the previous page (memsync list prints it)")
    if limit is not None and limit < 1:
        raise UsageError(f"--limit {limit} lists nothing", "give a number of memories of 1 or more")


def _info(git: GitRepo, name: str, kind: str, oid: str) -> MemoryInfo:
    error = None
    try:
        files, size = git.tree_stats(oid)
    except TreeTooLarge as exc:  # one hostile memory must not hide the others
        files = size = 0
        error = exc.message
    info = git.commit_info(oid)
    run = last_run(git, oid)
    return MemoryInfo(name, kind, oid[:8], files, size, rfc3339(info.time),
                      run.run_id if run else None, error, run.exit_code if run else None)
