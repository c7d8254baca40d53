"""Two histories of one memory that never met: joined, keeping both sides' files.

Two machines (or two clones on one machine) that each started the memory before either pushed
hold histories with no common version; a three-way merge has no base to work from. Like
`git merge --allow-unrelated-histories`, the join is a merge commit of both: its tree is ours,
with every file only they have added, and their version of a file both have with other bytes
put beside ours as a conflict copy (BRIEF rule 1: nothing is lost). Its first parent is theirs,
so ours fast-forwards to it (the work tree only gains files) and the hub fast-forwards to it too.
"""

from __future__ import annotations

import pygit2
from pygit2.enums import FileMode

from memsync.git.repo import GitRepo
from memsync.util.names import conflict_copy_name

__all__ = ["join_unrelated"]


def _entries(repo: pygit2.Repository, tree: pygit2.Tree, prefix: str = "") -> dict[str, tuple[str, int]]:
    """Every blob and link of a tree: path -> (oid, mode)."""
    found: dict[str, tuple[str, int]] = {}
    for entry in tree:
        path = f"{prefix}{entry.name}"
        if entry.type_str == "tree":
            found.update(_entries(repo, repo[entry.id].peel(pygit2.Tree), path + "/"))
        elif entry.type_str == "blob":
            found[path] = (str(entry.id), entry.filemode)
    return found


def _clashes(path: str, taken: set[str], folders: set[str]) -> bool:
    """`path` cannot be added beside `taken`: a file where a folder is, or under a file."""
    if path in folders:
        return True
    parts = path.split("/")
    return any("/".join(parts[:i]) in taken for i in range(1, len(parts)))


def _beside(path: str, tag: str, taken: set[str]) -> str:
    """A conflict copy's name for `path`; where a folder of `path` is a file of ours, that folder
    is the one renamed (a copy named inside it would sit under a file again, for ever)."""
    parts = path.split("/")
    cut = next((i for i in range(1, len(parts)) if "/".join(parts[:i]) in taken), None)
    if cut is None:
        return conflict_copy_name(path, tag)
    return "/".join([conflict_copy_name("/".join(parts[:cut]), tag), *parts[cut:]])


def join_unrelated(git: GitRepo, ours: str, theirs: str, their_tag: str, message: str,
                   author: tuple[str, str] | None = None) -> str:
    """The join commit of `ours` and `theirs` (histories with no common version): not checked
    out, no ref moved; the caller fast-forwards to it."""
    repo = git._repo
    mine = _entries(repo, repo[ours].peel(pygit2.Commit).tree)
    other = _entries(repo, repo[theirs].peel(pygit2.Commit).tree)
    index = pygit2.Index()
    taken = set(mine)
    folders = {"/".join(p.split("/")[:i]) for p in mine for i in range(1, p.count("/") + 1)}
    for path, (oid, mode) in mine.items():
        index.add(pygit2.IndexEntry(path, pygit2.Oid(hex=oid), FileMode(mode)))
    for path, (oid, mode) in sorted(other.items()):
        if mine.get(path, (None,))[0] == oid:
            continue
        target, n = path, 1
        while target in taken or _clashes(target, taken, folders):  # a free name beside it, never over one
            target = _beside(path, their_tag if n == 1 else f"{their_tag}-{n}", taken)
            n += 1
        index.add(pygit2.IndexEntry(target, pygit2.Oid(hex=oid), FileMode(mode)))
        taken.add(target)
        folders.update("/".join(target.split("/")[:i]) for i in range(1, target.count("/") + 1))
    tree = index.write_tree(repo)
    committer = git.operator_signature()
    signature = pygit2.Signature(*author) if author else committer
    made = repo.create_commit(None, signature, committer, message, tree,
                              [pygit2.Oid(hex=theirs), pygit2.Oid(hex=ours)])
    git.note_made(str(made))
    return str(made)
