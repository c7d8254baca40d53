"""`memsync list`: every memory on a hub, from its ref advertisement.

Names come from ls-remote (`refs/heads/<type>/<name>`), so listing works on every transport.
Sizes and file counts need the versions' trees: a file:// hub is read in place; any other hub is
fetched into a cache repository under MEMSYNC_HOME (incremental: the next list transfers only
what changed).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass

from memsync.core.locking import clear_stale_git_locks, held
from memsync.git import hub as hubmod
from memsync.git import transport
from memsync.git.hub import HubUrl
from memsync.git.hubtree import TreeTooLarge
from memsync.git.repo import GitRepo
from memsync.sync.hubs import ensure_hub, last_run
from memsync.util.timefmt import rfc3339

_BRANCH_RE = re.compile(r"^refs/heads/(memory|artifact)/([a-z0-9][a-z0-9-]{1,62}[a-z0-9])$")


@dataclass
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
    path = hubmod.memsync_home() / "cache" / (hashlib.sha256(hub.url.encode()).hexdigest()[:16] + ".git")
    return GitRepo.bare(path, create=True)


def list_memories(remote: str | None = None) -> tuple[str, list[MemoryInfo]]:
    """(the hub as shown, its memories sorted by name)."""
    hub = hubmod.resolve(remote, None)
    ensure_hub(hub)
    if hub.local_path is not None:
        transport.check_local(hub)  # a clear error if it is missing
        git = transport.open_local_hub(hub, "cannot list")
        prefix = "refs/heads/"
    else:
        home = hubmod.ensure_home()
        with held(home / "cache.lock", "the listing cache") as tenure:
            git = _cache_repo(hub)
            clear_stale_git_locks(git.git_dir, tenure, "the listing cache")  # a killed `list`
            transport.fetch(git, hub, ["+refs/heads/memory/*:refs/hub/memory/*",
                                            "+refs/heads/artifact/*:refs/hub/artifact/*"])
        prefix = "refs/hub/"
    found: list[MemoryInfo] = []
    for ref, oid in git.refs_under(prefix):
        match = _BRANCH_RE.match("refs/heads/" + ref[len(prefix):])
        if not match:
            continue
        error = None
        try:
            files, size = git.tree_stats(oid)
        except TreeTooLarge as exc:  # one hostile memory must not hide the others
            files = size = 0
            error = exc.message
        info = git.commit_info(oid)
        run = last_run(git, oid)
        found.append(MemoryInfo(match.group(2), match.group(1), oid[:8], files, size,
                                rfc3339(info.time),
                                run.run_id if run else None, error, run.exit_code if run else None))
    return hub.display, sorted(found, key=lambda m: (m.name, m.type))
