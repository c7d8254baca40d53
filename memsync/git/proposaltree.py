"""The git side of proposals: trees read and built, HEAD moved between a memory's branch and a
proposal's, refs of a hub on this machine listed and removed.

A proposal is a plain branch; what is particular to it is done here on commits and trees, so
that sync/proposals.py holds no pygit2 object.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Literal

import pygit2
from pygit2.enums import CheckoutStrategy, FileMode, ObjectType

from memsync.errors import RepoError
from memsync.git.hub import HubUrl
from memsync.git.repo import GitRepo
from memsync.git.transport import NotFastForward, open_local_hub, translate
from memsync.git.treediff import DeltaKind, Found, walk
from memsync.util.records import recordclass

__all__ = ["Change", "blob", "changes", "files", "leave_branch", "overlay", "record", "switch_head"]


@recordclass(frozen=True)
class Change:
    path: str
    kind: DeltaKind
    old: str | None  # blob id in the older tree
    new: str | None  # blob id in the newer tree


def _tree(git: GitRepo, oid: str) -> pygit2.Tree:
    """The tree of a commit (or a tree's own id)."""
    return git.reader[oid].peel(pygit2.Tree)


def changes(git: GitRepo, old: str | None, new: str) -> list[Change]:
    """Every file that differs between the versions (or trees) `old` (None: empty) and `new`."""
    found: Found = []
    walk(git.reader, None if old is None else _tree(git, old).id, _tree(git, new).id, "", found, 1)
    return sorted((Change(p, k, None if a is None else str(a), None if b is None else str(b))
                   for p, k, a, b in found), key=lambda c: c.path)


def files(git: GitRepo, commit: str) -> Iterator[tuple[str, str, int]]:
    """(path, blob id, size) of every regular file or link in the version `commit`."""
    repo = git.reader
    stack: list[tuple[str, pygit2.Tree]] = [("", _tree(git, commit))]
    while stack:
        prefix, tree = stack.pop()
        for entry in tree:
            path = f"{prefix}{entry.name}"
            if entry.type == ObjectType.TREE:
                stack.append((path + "/", repo[entry.id]))  # type: ignore[arg-type]
            elif entry.type == ObjectType.BLOB:
                yield path, str(entry.id), int(repo.odb.read_header(entry.id)[1])


def blob(git: GitRepo, oid: str) -> bytes:
    return bytes(git.reader[oid].peel(pygit2.Blob).data)


def overlay(git: GitRepo, base: str, source: str, paths: list[str], message: str,
            author: tuple[str, str] | None = None) -> str:
    """A commit on `base` whose tree is `base`'s with each of `paths` as `source` has it (gone
    where `source` has none): a proposal narrowed to some paths, or moved onto another base."""
    index = pygit2.Index()
    index.read_tree(_tree(git, base))
    src = _tree(git, source)
    for path in paths:
        try:
            entry = src[path]
        except KeyError:
            with contextlib.suppress(OSError, KeyError):
                index.remove(path)
            continue
        if entry.type != ObjectType.BLOB:
            continue
        index.add(pygit2.IndexEntry(path, entry.id, entry.filemode))
    return _commit(git, index, base, message, author)


def with_files(git: GitRepo, base: str, written: dict[str, tuple[bytes, int] | None], message: str,
               author: tuple[str, str] | None = None) -> str:
    """A commit on `base` with `written` (path: (content, mode), None: deleted) changed."""
    repo = git._repo
    index = pygit2.Index()
    index.read_tree(_tree(git, base))
    for path, item in written.items():
        if item is None:
            with contextlib.suppress(OSError, KeyError):
                index.remove(path)
            continue
        data, mode = item
        oid = repo.create_blob(data)
        index.add(pygit2.IndexEntry(path, oid, FileMode.LINK if mode == int(FileMode.LINK) else
                                    (FileMode.BLOB_EXECUTABLE if mode & 0o111 else FileMode.BLOB)))
    return _commit(git, index, base, message, author)


def _commit(git: GitRepo, index: pygit2.Index, base: str, message: str, author: tuple[str, str] | None) -> str:
    """`index`'s tree as a commit on `base`, noted as memsync's."""
    repo = git._repo
    tree = index.write_tree(repo)
    committer = git.operator_signature()
    oid = repo.create_commit(None, pygit2.Signature(*author) if author else committer, committer, message,
                             tree, [pygit2.Oid(hex=base)])
    git.note_made(str(oid))
    return str(oid)


def tree_of(git: GitRepo, commit: str) -> str:
    return str(_tree(git, commit).id)


def merged_tree(git: GitRepo, ours: str, theirs: str, tag: str,
                strategy_for: Callable[[str], str] | None = None) -> tuple[str, list[str]]:
    """The tree a merge of `theirs` into `ours` would commit, with memsync's rules (conflicts
    kept both, gathered), and the paths of the conflicts; nothing is written but objects."""
    if git.is_ancestor(theirs, ours):
        return tree_of(git, ours), []
    if git.is_ancestor(ours, theirs):
        return tree_of(git, theirs), []
    from memsync.git.merge import merge_keep_both

    result = merge_keep_both(git._repo, ours, theirs, tag, strategy_for=strategy_for)
    return result.tree, [c.path for c in result.conflicts]


def record(git: GitRepo, parents: list[str], message: str) -> str:
    """A commit with the first parent's tree: a closed proposal's record (its state, reason and
    who closed it in the message), so the hub carries it over every transport."""
    repo = git._repo
    committer = git.operator_signature()
    oid = repo.create_commit(None, committer, committer, message, _tree(git, parents[0]).id,
                             [pygit2.Oid(hex=p) for p in parents])
    git.note_made(str(oid))
    return str(oid)


def switch_head(git: GitRepo, branch: str, at: str) -> None:
    """Make `branch` (created at `at`, HEAD's commit) the branch HEAD names. The tree is the same
    one: nothing in the work tree or the index changes."""
    repo = git._repo
    head = git.head_oid()
    if head != at:
        raise RepoError(f"cannot start a proposal: HEAD is at {(head or 'nothing')[:8]}, not {at[:8]}")
    repo.references.create(f"refs/heads/{branch}", pygit2.Oid(hex=at), force=True)
    repo.references.create("HEAD", f"refs/heads/{branch}", force=True)


def leave_branch(git: GitRepo, branch: str) -> None:
    """Put HEAD back on `branch` and its tree in the work tree, from the proposal branch HEAD is
    on. A safe checkout: a file changed since the proposal's last commit (kept out of it: a
    secret, a file too large) is never overwritten: then HEAD stays (RepoError names them)."""
    repo = git._repo
    target = git.ref_oid(f"refs/heads/{branch}")
    if target is None:
        raise RepoError(f"cannot go back to {branch}: no such branch here")
    try:
        repo.checkout_tree(repo[target].peel(pygit2.Commit).tree,  # type: ignore[no-untyped-call]
                           strategy=CheckoutStrategy.SAFE)
    except pygit2.GitError:  # a file changed under the proposal: nothing was written, say which
        conflicted = sorted(repo.status())
        raise RepoError(f"the work tree has changes not in the proposal ({', '.join(conflicted[:5])}): "
                        f"HEAD stays on the proposal's branch",
                        f"save or move them, then `git switch {branch}`") from None
    repo.references.create("HEAD", f"refs/heads/{branch}", force=True)
    git.forget_cached()


def hub_refs(hub: HubUrl, prefix: str) -> dict[str, str]:
    """The refs under `prefix` of a hub on this machine, read in place."""
    repo = open_local_hub(hub, "cannot list")._repo
    found: dict[str, str] = {}
    for name in repo.references:
        if name.startswith(prefix):
            target = repo.references[name].target
            if isinstance(target, pygit2.Oid):
                found[name] = str(target)
    return found


def delete_hub_ref(hub: HubUrl, ref: str, expected: str) -> None:
    """Remove `ref` from a hub on this machine if it still points at `expected` (caller holds
    the hub's lock); NotFastForward when it moved."""
    repo = open_local_hub(hub, "cannot push to")._repo
    try:
        found = repo.references.get(ref)
        if found is None:
            return
        if str(found.target) != expected:
            raise NotFastForward(f"the hub's {ref} moved")
        found.delete()
    except (pygit2.GitError, OSError) as exc:
        raise translate(exc, hub, "cannot push to") from exc


def _no_link_above(root: Path, path: str) -> bool:
    """No folder on the way to `path` is a symlink (nothing is read or removed through one)."""
    where = root
    for part in path.split("/")[:-1]:
        where = where / part
        try:
            if not stat.S_ISDIR(os.lstat(where).st_mode):
                return False
        except OSError:
            return False
    return True


def read_work_file(git: GitRepo, path: str, max_size: int | None) -> tuple[bytes, int] | Literal["skip"] | None:
    """A work-tree file's bytes and mode; None when it is gone; "skip" when it is not a regular
    file or link, lies under a symlinked folder, or is larger than `max_size`."""
    if not _no_link_above(git.root, path):
        return "skip"
    full = git.root / path
    try:
        st = os.lstat(full)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(st.st_mode):
        return os.readlink(full).encode("utf-8", "surrogateescape"), int(FileMode.LINK)
    if not stat.S_ISREG(st.st_mode) or (max_size is not None and st.st_size > max_size):
        return "skip"
    fd = os.open(full, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    with os.fdopen(fd, "rb") as fh:
        return fh.read(), st.st_mode & 0o777 | 0o100000


def restore_paths(git: GitRepo, paths: list[str]) -> None:
    """Put `paths` back as HEAD has them in the work tree and index (removed where HEAD has
    none); their changed versions must be saved elsewhere first (a proposal)."""
    repo = git._repo
    head = git.head_oid()
    tree = _tree(git, head) if head else None
    present = [p for p in paths if tree is not None and _has(tree, p)]
    if present and tree is not None:
        repo.checkout_tree(tree, paths=present, strategy=CheckoutStrategy.FORCE)  # type: ignore[no-untyped-call]
    for path in paths:
        if path in present or not _no_link_above(git.root, path):
            continue
        with contextlib.suppress(FileNotFoundError, IsADirectoryError):
            os.unlink(git.root / path)
    git.forget_cached()


def _has(tree: pygit2.Tree, path: str) -> bool:
    try:
        return tree[path].type == ObjectType.BLOB
    except KeyError:
        return False
