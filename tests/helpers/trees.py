"""Every file of a tree, read with pygit2 (tests that build merges in a bare repository)."""

from __future__ import annotations

import pygit2


def tree_files(repo: pygit2.Repository, rev: str) -> dict[str, bytes]:
    """path -> bytes of every blob under `rev` (a commit or a tree id)."""
    found: dict[str, bytes] = {}

    def walk(t: pygit2.Tree, prefix: str) -> None:
        for entry in t:
            obj = repo[entry.id]
            if isinstance(obj, pygit2.Tree):
                walk(obj, f"{prefix}{entry.name}/")
            else:
                found[f"{prefix}{entry.name}"] = obj.peel(pygit2.Blob).data

    walk(repo[rev].peel(pygit2.Tree), "")
    return found
