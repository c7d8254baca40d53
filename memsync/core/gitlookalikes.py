"""Folders libgit2 never shows: any `.git` in another letter case (`.GIT/`, `sub/.Git/`).

libgit2's work-tree walk skips every entry whose name is `.git` in any case, so a file an agent
writes under `.GIT/` is neither committed nor reported by a scan. No version may hold such a
name (checks/pathnames.py); this finds them so the commit that leaves them out names them.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

_LIMIT = 100  # named folders; past that, the first ones are enough to say so


def unseen_git_folders(root: Path) -> list[str]:
    """Relative paths of the entries named `.git` in another letter case, memory-wide, without
    entering the memory's own `.git` or a nested repository's (a folder holding `.git`)."""
    found: list[str] = []
    stack = [""]
    while stack and len(found) < _LIMIT:
        rel = stack.pop()
        prefix = f"{rel}/" if rel else ""
        odd: list[str] = []
        folders: list[str] = []
        nested = False
        try:
            with os.scandir(root / rel if rel else root) as it:
                for entry in it:
                    name = entry.name
                    if len(name) == 4 and name.lower() == ".git":
                        if name == ".git":
                            nested = True
                        else:
                            odd.append(prefix + name)
                    elif entry.is_dir(follow_symlinks=False) and (rel or name != ".vm0"):
                        folders.append(prefix + name)
        except OSError:
            continue
        if nested and rel:
            continue  # a nested repository: reported as one folder by the scan
        found += odd
        stack += folders
    return sorted(found)


def beside(root: Path) -> Callable[[], list[str]]:
    """unseen_git_folders(root) in a thread of its own, begun now: the returned call waits for
    it. A run's closing snapshot begins it before its scan, whose diff runs in libgit2 with the
    GIL released: the two walks overlap on a second core (~10 ms at 10,000 files, ~65 ms at
    100,000). It only reads. MEMSYNC_NO_EARLY_WALK=1: walked when the result is asked for."""
    from memsync.core.lockfirst import enabled
    from memsync.util.threads import helper_body, join_all

    if not enabled():
        return lambda: unseen_git_folders(root)
    found: list[list[str]] = []
    failed: list[BaseException] = []

    def walk() -> None:
        try:
            found.append(unseen_git_folders(root))
        except BaseException as exc:  # raised by the caller's wait
            failed.append(exc)

    thread = threading.Thread(target=helper_body(walk), name="memsync-lookalikes", daemon=True)
    thread.start()

    def result() -> list[str]:
        join_all([thread])
        if failed:
            raise failed[0]
        return found[0]
    return result


__all__ = ["beside", "unseen_git_folders"]
