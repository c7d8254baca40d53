"""Bring a fetched version into the work tree: fast-forward or keep-both merge.

Order matters for crash safety (BRIEF): merge in memory, write the merge commit object, check the
tree out, and only then move the branch. A crash in between leaves a work tree ahead of the
branch, which the next snapshot simply commits: no ref ever contradicts the files.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

import pygit2
from pygit2.enums import CheckoutStrategy

from memsync.errors import MemsyncError, RepoError
from memsync.git.merge import ConflictCopy, merge_keep_both
from memsync.git.repo import GitRepo

Outcome = Literal["up-to-date", "ahead", "fast-forward", "merged"]


class WorktreeChanged(MemsyncError):
    """A file the merge must update changed on disk meanwhile: snapshot again, then retry."""


@dataclass
class Integration:
    outcome: Outcome
    head: str | None
    conflicts: list[ConflictCopy] = field(default_factory=list)
    kept_modified: list[str] = field(default_factory=list)


def integrate(git: GitRepo, branch: str, theirs: str, their_tag: str,
              message: str, author: tuple[str, str] | None = None,
              strategy_for: Callable[[str], str] | None = None) -> Integration:
    ours = git.head_oid()
    ref = f"refs/heads/{branch}"
    if ours == theirs:
        return Integration("up-to-date", ours)
    if ours is not None and git.is_ancestor(theirs, ours):
        return Integration("ahead", ours)
    if ours is None or git.is_ancestor(ours, theirs):
        _checkout(git, theirs)
        git.set_ref(ref, theirs, "memsync: fast-forward")
        return Integration("fast-forward", theirs)
    merged = merge_keep_both(git.repo, ours, theirs, their_tag, strategy_for=strategy_for)
    committer = git.operator_signature()
    signature = pygit2.Signature(*author) if author else committer
    oid = git.repo.create_commit(None, signature, committer, message, pygit2.Oid(hex=merged.tree),
                                 [pygit2.Oid(hex=ours), pygit2.Oid(hex=theirs)])
    _checkout(git, str(oid))
    if git.head_oid() != ours:
        raise RepoError("the memory's branch moved during a merge", "retry the command")
    git.set_ref(ref, str(oid), "memsync: merge")
    return Integration("merged", str(oid), merged.conflicts, merged.kept_modified)


def _checkout(git: GitRepo, commit: str) -> None:
    tree = git.repo[commit].peel(pygit2.Commit).tree
    old = None if git.repo.head_is_unborn else git.repo.head.peel(pygit2.Commit).tree
    bad = unsafe_path(git.repo, tree, old)
    if bad is not None:
        raise RepoError(f"refused version {commit[:8]}: it holds a path outside the memory or inside "
                        f"its .git ({bad!r})",
                        "nothing was written; revert that version on the hub or ask its owner")
    paths = None if old is None else _changed_paths(old, tree)
    try:
        if paths is None:
            git.repo.checkout_tree(tree, strategy=CheckoutStrategy.SAFE)  # type: ignore[no-untyped-call]
        elif paths:  # only what differs from HEAD: the cost follows the change, not the memory's size
            git.repo.checkout_tree(tree, paths=paths,  # type: ignore[no-untyped-call]
                                   strategy=CheckoutStrategy.SAFE | CheckoutStrategy.DISABLE_PATHSPEC_MATCH)
    except pygit2.GitError as exc:
        text = str(exc)
        if "conflict" in text.lower():
            raise WorktreeChanged(f"files changed on disk during the merge: {text}") from exc
        _undo_partial_checkout(git)
        if "invalid path" in text.lower():  # libgit2 refuses `..`, `.git`, absolute paths
            raise RepoError(f"refused version {commit[:8]}: it holds a path outside the memory or inside "
                            f"its .git ({text})",
                            "nothing was written; revert that version on the hub or ask its owner") from exc
        raise RepoError(f"cannot update the work tree: {text}",
                        "check permissions and free space; nothing was lost") from exc


def _changed_paths(old: pygit2.Tree, new: pygit2.Tree) -> list[str]:
    """Every path a checkout from `old` to `new` writes or removes (both sides of each delta, so
    a file replaced by a directory of that name is covered); a SAFE checkout of the whole tree
    touches exactly these, and only reads the rest of the work tree to find that out."""
    paths: set[str] = set()
    for delta in old.diff_to_tree(new).deltas:
        paths.update((delta.old_file.path, delta.new_file.path))
    return sorted(paths)


def _undo_partial_checkout(git: GitRepo) -> None:
    """A checkout that failed half-way (a hostile tree, a full disk) may already have removed
    files that HEAD still has: put them back, never overwriting a file changed on disk."""
    if git.repo.head_is_unborn:
        return
    head = git.repo.head.peel(pygit2.Commit).tree
    with contextlib.suppress(pygit2.GitError):
        git.repo.checkout_tree(head, strategy=CheckoutStrategy.SAFE  # type: ignore[no-untyped-call]
                               | CheckoutStrategy.RECREATE_MISSING)
        index = git.repo.index  # the snapshot before the merge left it equal to HEAD
        index.read_tree(head)
        index.write()


_FORBIDDEN = {"", ".", "..", ".git"}


def unsafe_path(repo: pygit2.Repository, tree: pygit2.Tree, old: pygit2.Tree | None,
                prefix: str = "") -> str | None:
    """The first entry a checkout must never write (`..`, `.git`, a name with `/`, two entries
    with one name, e.g. a symlink `a` and a directory `a/`); only subtrees that differ from
    `old` (the current version, already checked) are walked."""
    seen: set[str] = set()
    for entry in tree:
        name = entry.name or ""
        path = prefix + name
        if name.lower() in _FORBIDDEN or "/" in name or "\0" in name or name in seen:
            return path
        seen.add(name)
        if entry.filemode == pygit2.enums.FileMode.TREE:
            before = _subtree(repo, old, name)
            if before is not None and before.id == entry.id:
                continue
            found = unsafe_path(repo, repo[entry.id].peel(pygit2.Tree), before, path + "/")
            if found is not None:
                return found
    return None


def _subtree(repo: pygit2.Repository, tree: pygit2.Tree | None, name: str) -> pygit2.Tree | None:
    if tree is None or name not in tree:
        return None
    entry = tree[name]
    return repo[entry.id].peel(pygit2.Tree) if entry.filemode == pygit2.enums.FileMode.TREE else None
