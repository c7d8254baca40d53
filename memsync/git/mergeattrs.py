"""Merges follow memsync's policy, never a `.gitattributes` in the tree.

libgit2 picks a file's merge driver from its `merge` attribute, read from the work tree's
`.gitattributes` files, which the agent and any hub writer can change: one line `* merge=union`
made concurrent rewrites of a JSON file end as two objects on two lines, with no conflict
reported. `$GIT_DIR/info/attributes` outranks every `.gitattributes` (and the user's and the
system's attributes files), and within it the last matching line wins: memsync keeps `* merge`
(the default line merge) as its last line before every merge, and merge.py applies storage.yaml's
`merge:` policy on top. Other attributes (line endings on checkout) are not touched.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pygit2

from memsync.util.fs import atomic_write

__all__ = ["BLOCK", "neutralize"]

BLOCK = "# memsync: merges follow .vm0/storage.yaml `merge:` and memsync's defaults only\n* merge\n"


def neutralize(repo: pygit2.Repository) -> None:
    """Make `* merge` the last rule of the repository's info/attributes (idempotent)."""
    folder = os.path.join(repo.path, "info")
    path = os.path.join(folder, "attributes")
    current = ""
    if not os.path.islink(path):  # a planted link is replaced, never read or written through
        with contextlib.suppress(FileNotFoundError, IsADirectoryError, UnicodeDecodeError), \
                open(path, encoding="utf-8") as fh:
            current = fh.read()
    if current.endswith(BLOCK) and not os.path.islink(path):
        return
    kept = current.replace(BLOCK, "")
    if kept and not kept.endswith("\n"):
        kept += "\n"
    os.makedirs(folder, exist_ok=True)
    if os.path.isdir(path) and not os.path.islink(path):
        raise OSError(f"{path} is a directory")
    atomic_write(Path(path), (kept + BLOCK).encode("utf-8"), durable=False)
