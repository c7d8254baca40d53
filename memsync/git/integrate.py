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
from pygit2.enums import CheckoutStrategy, FileMode

from memsync.errors import MemsyncError, RepoError
from memsync.git import filters, firstcheckout
from memsync.git.hubtree import Oversize, check_tree, refusal
from memsync.git.merge import ConflictCopy, merge_keep_both
from memsync.git.repo import GitRepo, file_blob_id, file_entry

Outcome = Literal["up-to-date", "ahead", "fast-forward", "merged"]


class WorktreeChanged(MemsyncError):
    """A file the merge must update changed on disk meanwhile: snapshot again, then retry."""


@dataclass
class Integration:
    outcome: Outcome
    head: str | None
    conflicts: list[ConflictCopy] = field(default_factory=list)
    kept_modified: list[str] = field(default_factory=list)
    held_back: list[Oversize] = field(default_factory=list)  # over max_file_size: not written


def integrate(git: GitRepo, branch: str, theirs: str, their_tag: str,
              message: str, author: tuple[str, str] | None = None, *,
              memory: str = "", max_file_size: int | None = None,
              strategy_for: Callable[[str], str] | None = None) -> Integration:
    """Bring `theirs` into the work tree. Every tree that reaches it is checked first
    (hubtree.check_tree): a refused version leaves work tree, index and branch untouched."""
    ours = git.head_oid()
    ref = f"refs/heads/{branch}"
    if ours == theirs:
        return Integration("up-to-date", ours)
    if ours is not None and git.is_ancestor(theirs, ours):
        return Integration("ahead", ours)
    if ours is None or git.is_ancestor(ours, theirs):
        # a first checkout reads every tree of the version: libgit2 need not keep them all
        with firstcheckout.lean_cache() if ours is None else contextlib.nullcontext():
            held = _checkout(git, theirs, memory, max_file_size)
        git.set_ref(ref, theirs, "memsync: fast-forward")
        return Integration("fast-forward", theirs, held_back=held)
    ours_tree = git._repo[ours].peel(pygit2.Commit).tree
    check_tree(git._repo, git._repo[theirs].peel(pygit2.Commit).tree, ours_tree, version=theirs, memory=memory)
    merged = merge_keep_both(git._repo, ours, theirs, their_tag, strategy_for=strategy_for)
    committer = git.operator_signature()
    signature = pygit2.Signature(*author) if author else committer
    oid = git._repo.create_commit(None, signature, committer, message, pygit2.Oid(hex=merged.tree),
                                 [pygit2.Oid(hex=ours), pygit2.Oid(hex=theirs)])
    git.note_made(str(oid))
    held = _checkout(git, str(oid), memory, max_file_size, checked=theirs)
    if git.head_oid() != ours:
        raise RepoError("the memory's branch moved during a merge", "retry the command")
    git.set_ref(ref, str(oid), "memsync: merge")
    return Integration("merged", str(oid), merged.conflicts, merged.kept_modified, held)


def _checkout(git: GitRepo, commit: str, memory: str, max_file_size: int | None,
              checked: str | None = None) -> list[Oversize]:
    """Check `commit` out over HEAD; blobs over `max_file_size` stay out of the work tree (held
    back: index entry kept, see GitRepo.held_back). `checked`: the hub version a merge
    `commit` was made from, named in a refusal."""
    repo = git._repo
    tree = repo[commit].peel(pygit2.Commit).tree
    old = None if repo.head_is_unborn else repo.head.peel(pygit2.Commit).tree
    checked_tree = check_tree(repo, tree, old, version=checked or commit, memory=memory,
                              max_file_size=max_file_size, totals=git.stats_memo)
    oversize = checked_tree.oversize
    # a first checkout writes every file: without libgit2's filters when none can apply (filters.py)
    unfiltered = old is None and filters.unneeded(repo, checked_tree.attributes)
    stale = _stale_copies(git, old, oversize)  # before anything is written
    before = git.held_back()
    held = {path: oid for path, oid in before.items() if _blob_id(tree, path) == oid}
    held.update((o.path, o.oid) for o in oversize)
    git.set_held_back({**before, **held})  # first: a crash after the checkout leaves it right
    paths = None if old is None else _changed_paths(old, tree)
    skip = {o.path for o in oversize}
    missing = []  # held back before, changed now: not on disk, so SAFE would see a conflict
    if paths is not None:
        missing = [p for p in paths if p in before and p not in held]
        paths = [p for p in paths if p not in skip and p not in missing]
    elif skip:
        paths = [p for p in _all_paths(repo, tree) if p not in skip]
    try:
        if paths is None:
            firstcheckout.write_all(repo, tree, git.stats_memo, filtered=not unfiltered)
        elif paths:  # only what differs from HEAD: the cost follows the change, not the memory's size
            filters.checkout(repo, tree, CheckoutStrategy.SAFE | CheckoutStrategy.DISABLE_PATHSPEC_MATCH, paths,
                             filters=not unfiltered)
        if missing:
            filters.checkout(repo, tree, CheckoutStrategy.SAFE | CheckoutStrategy.RECREATE_MISSING
                             | CheckoutStrategy.DISABLE_PATHSPEC_MATCH, missing)
    except pygit2.GitError as exc:
        text = str(exc)
        if "conflict" in text.lower():
            raise WorktreeChanged(f"files changed on disk during the merge: {text}") from exc
        _undo_partial_checkout(git)
        if "invalid path" in text.lower():  # libgit2 refuses `..`, `.git`, absolute paths
            raise refusal(checked or commit, memory, text) from exc
        raise RepoError(f"cannot update the work tree: {text}",
                        "check permissions and free space; nothing was lost") from exc
    for path in stale:  # the previous version of a file now held back: removed, as a checkout would
        (git.root / path).unlink(missing_ok=True)
    if oversize:
        index = repo.index
        index.read(force=False)
        for o in oversize:  # the version's blob stays in the index: commits keep it
            index.add(pygit2.IndexEntry(o.path, pygit2.Oid(hex=o.oid), FileMode(o.mode)))
        index.write()
    git.set_held_back(held)
    return oversize


def _stale_copies(git: GitRepo, old: pygit2.Tree | None, oversize: list[Oversize]) -> list[str]:
    """Files of the current version that a held-back file replaces. Left on disk they would be
    committed next as if the operator had undone the hub's change; one changed on disk
    meanwhile is snapshotted first (WorktreeChanged) and the merge keeps both."""
    stale = []
    for o in oversize:
        entry = None if old is None else file_entry(old, o.path)
        if entry is None:
            continue
        on_disk = file_blob_id(git.root / o.path)
        if on_disk is not None and on_disk != str(entry.id):
            raise WorktreeChanged(f"{o.path} changed on disk during the merge")
        stale.append(o.path)
    return stale


def _blob_id(tree: pygit2.Tree, path: str) -> str | None:
    entry = file_entry(tree, path)
    return None if entry is None else str(entry.id)


def _all_paths(repo: pygit2.Repository, tree: pygit2.Tree) -> list[str]:
    return sorted(delta.new_file.path for delta in tree.diff_to_tree(swap=True).deltas)


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
    files that HEAD still has: put them back, never overwriting a file changed on disk (nor
    writing a file held back for its size)."""
    if git._repo.head_is_unborn:
        return
    head = git._repo.head.peel(pygit2.Commit).tree
    held = git.held_back()
    with contextlib.suppress(pygit2.GitError):
        strategy = CheckoutStrategy.SAFE | CheckoutStrategy.RECREATE_MISSING
        if held:
            paths = [p for p in _all_paths(git._repo, head) if p not in held]
            git._repo.checkout_tree(head, paths=paths,  # type: ignore[no-untyped-call]
                                   strategy=strategy | CheckoutStrategy.DISABLE_PATHSPEC_MATCH)
        else:
            git._repo.checkout_tree(head, strategy=strategy)  # type: ignore[no-untyped-call]
        index = git._repo.index  # the snapshot before the merge left it equal to HEAD
        index.read_tree(head)  # held-back files keep their entry: HEAD has them
        index.write()
