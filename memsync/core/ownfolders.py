"""memsync's own folders are never part of a memory.

MEMSYNC_HOME (the embedded hub, the caches of other hubs) or a hub on this machine may be placed
inside a memory directory (`MEMSYNC_HOME=./.memsync` in a sandbox's workspace, `memsync init` in
the folder that holds them). Committed, each push would carry the pack the previous one made
into the next version, and the hub's lock file with it. Such a folder is added to the memory's
`.git/info/exclude` (the operator's rules, which an agent's `.gitignore` cannot undo:
git/localignores.py) the first time a command opens the memory; a folder already committed stays
in history, and its later changes are left out too (`git rm -r --cached` removes it).
"""

from __future__ import annotations

from pathlib import Path

from memsync.git.hub import memsync_home
from memsync.git.remote import Hub

__all__ = ["keep_out"]

WHY = "memsync's own folder (MEMSYNC_HOME or a hub on this machine): never committed"


def keep_out(root: Path, hub: Hub) -> list[Path]:
    """Exclude memsync's folders that lie inside `root`; the folders found there."""
    found = []
    for folder in (memsync_home(), *hub.places_here()):
        try:
            inside = folder.resolve().relative_to(root.resolve())
        except (ValueError, OSError):
            continue
        if inside.parts and inside.parts[0] != ".git":  # the memory itself: nothing to leave out
            found.append(folder)
    if found:
        from memsync.git.repofiles import exclude

        for folder in found:
            exclude(root, folder, WHY)
    return found
