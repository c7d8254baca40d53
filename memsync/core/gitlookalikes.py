"""Folders libgit2 never shows: any `.git` in another letter case (`.GIT/`, `sub/.Git/`).

libgit2's work-tree walk skips every entry whose name is `.git` in any case, so a file an agent
writes under `.GIT/` is neither committed nor reported by a scan. No version may hold such a
name (checks/pathnames.py); this finds them so the commit that leaves them out names them.
"""

from __future__ import annotations

import os
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


__all__ = ["unseen_git_folders"]
