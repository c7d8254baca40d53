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
        try:
            with os.scandir(root / rel if rel else root) as it:
                entries = list(it)
        except OSError:
            continue
        if rel and any(e.name == ".git" for e in entries):
            continue  # a nested repository: reported as one folder by the scan
        for entry in entries:
            name = entry.name
            if name.lower() == ".git":
                if name != ".git":
                    found.append(f"{rel}/{name}" if rel else name)
                continue
            if name == ".vm0" and not rel:
                continue
            try:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(f"{rel}/{name}" if rel else name)
            except OSError:
                continue
    return sorted(found)


__all__ = ["unseen_git_folders"]
