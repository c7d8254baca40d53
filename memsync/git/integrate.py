"""Bring a fetched version into the work tree: fast-forward or keep-both merge.

Order matters for crash safety (BRIEF): merge in memory, write the merge commit object, check the
tree out, and only then move the branch. A crash in between leaves a work tree ahead of the
branch, which the next snapshot simply commits: no ref ever contradicts the files.
"""

from __future__ import annotations

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
              message: str, author: tuple[str, str] | None = None) -> Integration:
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
    merged = merge_keep_both(git.repo, ours, theirs, their_tag)
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
    try:
        git.repo.checkout_tree(tree, strategy=CheckoutStrategy.SAFE)  # type: ignore[no-untyped-call]
    except pygit2.GitError as exc:
        text = str(exc)
        if "conflict" in text.lower():
            raise WorktreeChanged(f"files changed on disk during the merge: {text}") from exc
        raise RepoError(f"cannot update the work tree: {text}",
                        "check permissions and free space; nothing was lost") from exc
