"""Reading history for `memsync log/diff/restore/revert`: revisions, per-version changes, diffs,
file contents at a version, and the three-way merge that undoes a change without losing a side.

Everything returns hex ids, paths and bytes; pygit2 errors become memsync errors here.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

import pygit2
from pygit2.enums import DeltaStatus, DiffOption, FileMode, MergeFavor, SortMode

from memsync.errors import RepoError, UsageError
from memsync.git import treediff
from memsync.git.hubtree import MAX_TREE_DEPTH, TreeTooLarge
from memsync.git.repo import GitRepo, file_entry
from memsync.git.treediff import DeltaKind, PathDelta
from memsync.util.names import is_gathered
from memsync.util.records import field, recordclass

if TYPE_CHECKING:  # (the merge machinery is imported by what undoes a change, not by `log`)
    from datetime import datetime

    from memsync.git.merge import ConflictCopy

REV_HINT = "use a version from `memsync log` (8 hex digits), a git revision such as HEAD~2, or run:<id>"


class UnknownRevision(UsageError):
    def __init__(self, spec: str, why: str = "no such version") -> None:
        super().__init__(f"unknown version {spec!r}: {why}", REV_HINT)
        self.spec = spec


@recordclass(frozen=True)
class VersionChanges:
    """One commit and what it changed against its first parent."""

    oid: str
    parents: tuple[str, ...]
    message: str
    time: int
    author: str
    deltas: list[PathDelta]
    created: list[str]  # conflict files a merge made or added versions to (in no parent as they are here)
    tree: str = ""
    parent_tree: str | None = None  # the first parent's tree; None for a first version


@recordclass(frozen=True)
class FilePatch:
    path: str
    kind: str
    added: int
    deleted: int
    binary: bool
    data: bytes  # the unified diff of this file, exactly as git writes it


@recordclass
class Undo:
    tree: str
    conflicts: list[ConflictCopy] = field(default_factory=list)
    kept_modified: list[str] = field(default_factory=list)


# -- revisions -----------------------------------------------------------------------------------
def resolve(git: GitRepo, spec: str) -> str:
    """A full commit id for a sha (full or short), a ref or any git revision (`HEAD~2`)."""
    repo = git._repo
    if not spec or spec.startswith("-"):
        raise UnknownRevision(spec, "not a revision")
    try:
        obj = repo.revparse_single(spec)
        return str(obj.peel(pygit2.Commit).id)
    except KeyError as exc:
        raise UnknownRevision(spec) from exc
    except (ValueError, pygit2.GitError, pygit2.InvalidSpecError) as exc:
        raise UnknownRevision(spec, str(exc).splitlines()[0] if str(exc) else "not a revision") from exc


def first_parent(git: GitRepo, oid: str) -> str | None:
    repo = git._repo
    parents = repo[oid].peel(pygit2.Commit).parent_ids
    return str(parents[0]) if parents else None


def tree_of(git: GitRepo, commit: str | None) -> str:
    """The tree of a commit; the empty tree for None (before the first version)."""
    repo = git._repo
    if commit is None:
        return str(repo.TreeBuilder().write())
    return str(repo[commit].peel(pygit2.Commit).tree_id)


# -- walking -------------------------------------------------------------------------------------
def walk(git: GitRepo, tip: str) -> Iterator[VersionChanges]:
    """Newest first (topological, then time), each with its changes against its first parent."""
    repo = git._repo
    sort = SortMode.TOPOLOGICAL | SortMode.TIME
    for c in repo.walk(pygit2.Oid(hex=tip), sort):
        yield _version_changes(repo, c)


def changes(git: GitRepo, oid: str, *, deltas: bool = True) -> VersionChanges:
    """One version and what it changed against its first parent (`deltas=False`: the version
    only, its `deltas` and `created` left empty)."""
    repo = git._repo
    c = repo[oid].peel(pygit2.Commit)
    if not deltas:
        parent_tree = str(c.parents[0].tree_id) if c.parent_ids else None
        return VersionChanges(str(c.id), tuple(str(p) for p in c.parent_ids), c.message, c.commit_time,
                              c.author.name, [], [], str(c.tree_id), parent_tree)
    return _version_changes(repo, c)


def _version_changes(repo: pygit2.Repository, c: pygit2.Commit) -> VersionChanges:
    parents = [p.tree for p in c.parents]
    old = parents[0] if parents else None
    deltas = _tree_deltas(repo, old, c.tree)
    created = [d.path for d in deltas if _made_here(c.tree, parents, d)] if len(parents) > 1 else []
    return VersionChanges(str(c.id), tuple(str(p) for p in c.parent_ids), c.message, c.commit_time,
                          c.author.name, deltas, created, str(c.tree_id), None if old is None else str(old.id))


def messages(git: GitRepo, tip: str, *, stream: bool = False) -> Iterator[tuple[str, int, str]]:
    """(oid, number of parents, message), newest first, without computing any diff.

    `stream`: in git log's order (by commit time, as the versions are reached), read one by one,
    so the first N cost the same at any length of history; libgit2 sorts topologically only
    after reading every commit (docs/PERFORMANCE.md). The two orders differ only where
    clocks disagreed (a version older than its parent) or versions share a second."""
    repo = git._repo
    sort = SortMode.NONE if stream else SortMode.TOPOLOGICAL | SortMode.TIME
    for c in repo.walk(pygit2.Oid(hex=tip), sort):
        yield str(c.id), len(c.parent_ids), c.message


def touches(git: GitRepo, oid: str, path: str) -> bool:
    """Did this version change `path`? A merge counts only if its result differs from every
    parent (it made a new content), so a change merged in is shown once, where it was made."""
    repo = git._repo
    c = repo[oid].peel(pygit2.Commit)
    mine = _entry_id(c.tree, path)
    if not c.parents:
        return mine is not None
    return all(_entry_id(p.tree, path) != mine for p in c.parents)


def blob_at(git: GitRepo, commit: str, path: str) -> tuple[bytes, int] | None:
    """(content, mode) of a file at a version, or None if it was not a file there."""
    repo = git._repo
    entry = file_entry(repo[commit].peel(pygit2.Commit).tree, path)
    if entry is None:
        return None
    return repo[entry.id].peel(pygit2.Blob).data, int(entry.filemode)


def files_under(git: GitRepo, commit: str, prefix: str) -> list[str]:
    """The files of a version at `prefix` (a file) or below it (a directory)."""
    repo = git._repo
    tree = repo[commit].peel(pygit2.Commit).tree
    if not prefix:
        return sorted(tree_files(git, str(tree.id)))
    try:
        entry = tree[prefix]
    except KeyError:
        return []
    if entry.filemode == FileMode.COMMIT:
        return []
    if entry.filemode != FileMode.TREE:
        return [prefix]
    found: list[str] = []
    _collect(repo, repo[entry.id].peel(pygit2.Tree), prefix, found)
    return found


def read_blob(git: GitRepo, oid: str) -> bytes:
    repo = git._repo
    data: bytes = repo[oid].peel(pygit2.Blob).data
    return data


def blob_by_id(git: GitRepo, oid: str) -> bytes | None:
    """The bytes of blob `oid`; None when this repository holds no blob by that id (absent, or a
    tree, commit or tag)."""
    try:
        obj = git._repo.get(oid)
    except (ValueError, pygit2.GitError):
        return None
    return obj.data if isinstance(obj, pygit2.Blob) else None


def tree_files(git: GitRepo, tree: str) -> dict[str, tuple[str, int]]:
    """path -> (blob id, mode) for every file of a tree."""
    repo = git._repo
    found: dict[str, tuple[str, int]] = {}
    _walk_tree(repo, repo[tree].peel(pygit2.Tree), "", found)
    return found


# -- diffs -----------------------------------------------------------------------------------------
def diff(git: GitRepo, old_tree: str, new_tree: str | None, paths: Iterable[str] = (),
         context: int = 3) -> list[FilePatch]:
    """Patches from `old_tree` to `new_tree` (None: the work tree, untracked files included),
    limited to `paths` (files or directories) when given."""
    repo = git._repo
    wanted = [p.strip("/") for p in paths]
    old = repo[old_tree].peel(pygit2.Tree)
    if new_tree is None:
        flags = (DiffOption.INCLUDE_UNTRACKED | DiffOption.RECURSE_UNTRACKED_DIRS
                 | DiffOption.SHOW_UNTRACKED_CONTENT | DiffOption.INCLUDE_TYPECHANGE)
        found = old.diff_to_workdir(flags=flags, context_lines=context)
    else:
        found = old.diff_to_tree(repo[new_tree].peel(pygit2.Tree), context_lines=context)
    patches: list[FilePatch] = []
    for patch in found:
        if patch is None:
            continue
        delta = patch.delta
        path = delta.new_file.path if delta.status != DeltaStatus.DELETED else delta.old_file.path
        if wanted and not any(path == w or path.startswith(w + "/") or not w for w in wanted):
            continue
        _, added, deleted = patch.line_stats
        patches.append(FilePatch(path, _kind(delta.status), added, deleted, bool(delta.is_binary),
                                 patch.data))
    return patches


# -- undo ------------------------------------------------------------------------------------------
def own_result(git: GitRepo, commits: list[str]) -> tuple[str, str]:
    """(base tree, result tree) of a series of versions, oldest first, made by one run.

    base = the first version's first parent. If the series is one first-parent chain, result is
    the last version's tree. If other versions were merged in between (a checkpoint pushed to a
    hub that had moved on), each version's own change is replayed onto the base instead, so
    the result holds what the run changed and nothing it merged from others."""
    repo = git._repo
    base = tree_of(git, first_parent(git, commits[0]))
    chained = all(first_parent(git, b) == a for a, b in itertools.pairwise(commits))
    if chained:
        return base, tree_of(git, commits[-1])
    current = base
    from memsync.git.merge import follow_policy_only, keep_both

    follow_policy_only(repo)
    for oid in commits:
        index = repo.merge_trees(tree_of(git, first_parent(git, oid)), current, tree_of(git, oid),
                                 favor=MergeFavor.THEIRS)
        current = keep_both(repo, index, "replay").tree
    return base, current


def undo(git: GitRepo, base_tree: str, result_tree: str, onto: str, tag: str,
         now: datetime | None = None) -> Undo:
    """The tree of `onto` with the change base->result taken back: a three-way merge of
    ancestor=result, ours=onto, theirs=base. Where later versions touched the same lines, the
    current content stays at the path and the undone content goes beside it (`tag` names it)."""
    repo = git._repo
    from memsync.git.merge import follow_policy_only, keep_both

    follow_policy_only(repo)
    try:
        index = repo.merge_trees(result_tree, tree_of(git, onto), base_tree)
    except pygit2.GitError as exc:
        raise RepoError(f"cannot compute the revert: {exc}",
                        "report this with `git log --oneline -5`") from exc
    merged = keep_both(repo, index, tag, now)
    return Undo(merged.tree, merged.conflicts, merged.kept_modified)


# -- helpers -----------------------------------------------------------------------------------------
def _tree_deltas(repo: pygit2.Repository, old: pygit2.Tree | None, new: pygit2.Tree) -> list[PathDelta]:
    return treediff.deltas(repo, old.id if old is not None else None, new.id)


def _kind(status: DeltaStatus) -> DeltaKind:
    if status in (DeltaStatus.ADDED, DeltaStatus.UNTRACKED):
        return "added"
    if status == DeltaStatus.DELETED:
        return "deleted"
    return "modified"


def _entry_id(tree: pygit2.Tree, path: str) -> str | None:
    entry = file_entry(tree, path)
    return None if entry is None else f"{entry.id}:{int(entry.filemode)}"


def _made_here(tree: pygit2.Tree, parents: list[pygit2.Tree], d: PathDelta) -> bool:
    """A merge made this file: a conflict copy in none of the parents, or a gathered conflict
    file (names.is_gathered) the merge added versions to, so no parent had it as it is now."""
    if d.kind == "added" and not any(_in_tree(t, d.path) for t in parents[1:]):
        return True
    if d.kind == "deleted" or not is_gathered(d.path):
        return False
    mine = _entry_id(tree, d.path)
    return all(_entry_id(t, d.path) != mine for t in parents[1:])


def _in_tree(tree: pygit2.Tree, path: str) -> bool:
    return _entry_id(tree, path) is not None


def _collect(repo: pygit2.Repository, tree: pygit2.Tree, prefix: str, found: list[str]) -> None:
    files: dict[str, tuple[str, int]] = {}
    _walk_tree(repo, tree, prefix + "/", files)
    found.extend(sorted(files))


def _walk_tree(repo: pygit2.Repository, tree: pygit2.Tree, prefix: str,
               found: dict[str, tuple[str, int]]) -> None:
    """Every file below `tree`, without recursion (a hub may serve a tree thousands deep)."""
    stack = [(tree, prefix, 1)]
    while stack:
        current, base, depth = stack.pop()
        if depth > MAX_TREE_DEPTH:
            raise TreeTooLarge(f"a version's tree is deeper than {MAX_TREE_DEPTH} directories ({base[:80]}...)",
                               "ask the hub's owner to revert that version")
        for entry in current:
            path = f"{base}{entry.name}"
            if entry.filemode == FileMode.TREE:
                stack.append((repo[entry.id].peel(pygit2.Tree), path + "/", depth + 1))
            elif entry.filemode != FileMode.COMMIT:
                found[path] = (str(entry.id), int(entry.filemode))
