"""Shell completion of memory names and run ids, from what is on this machine (never the network).

Memory names: the refs of the hub a new memory would use (MEMSYNC_REMOTE, else the embedded hub)
when it is a directory here, else the listing cache `memsync list` keeps for that hub. Run ids:
the trailers of the current memory's recent versions. Completion must answer at once and never
fail: anything unreadable completes nothing.
"""

from __future__ import annotations

import re
from pathlib import Path

__all__ = ["memory_names", "memory_specs", "run_ids", "run_revs"]

_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{1,62}[a-z0-9]$")
_RUN_SCAN = 300  # versions read for run ids


def memory_names(incomplete: str) -> list[str]:
    try:
        from memsync.git import hub as hubmod
        from memsync.git.remote import names_seen

        names = names_seen(hubmod.resolve(None, None))
    except Exception:  # completion never fails
        return []
    return sorted(n for n in names if n.startswith(incomplete))


def memory_specs(incomplete: str) -> list[str]:
    """--memory NAME[:PATH][:ro]: the NAME part."""
    return [] if ":" in incomplete else memory_names(incomplete)


def run_ids(incomplete: str) -> list[str]:
    try:
        from memsync.core import config as cfgmod
        from memsync.git import history
        from memsync.git.repo import GitRepo
        from memsync.git.trailers import first, parse

        root = cfgmod.find_root(Path.cwd())
        if root is None:
            return []
        git = GitRepo.open(root)
        head = git.head_oid()
        if head is None:
            return []
        found: dict[str, None] = {}
        for n, (_oid, _parents, message) in enumerate(history.messages(git, head, stream=True)):
            run_id = first(parse(message), "Memsync-Run-Id")
            if run_id and run_id.startswith(incomplete):
                found.setdefault(run_id)
            if n >= _RUN_SCAN:
                break
    except Exception:  # completion never fails
        return []
    return list(found)


def run_revs(incomplete: str) -> list[str]:
    """A REV that may be run:<id>."""
    if not "run:".startswith(incomplete) and not incomplete.startswith("run:"):
        return []
    rest = incomplete[4:] if incomplete.startswith("run:") else ""
    return [f"run:{r}" for r in run_ids(rest)]
