"""Which commits memsync made, and putting a memory's branch back after git commands an agent ran.

memsync records every commit it creates (in the process, and appended to `.git/memsync-made` for
later commands). A commit on the branch that is in neither record nor on the hub was made by
someone else: inside a run, by the agent (`git commit`, `--amend`, a rebase, a forged trailer).
`rewind` puts the branch (and HEAD, and the index) back on the last commit memsync trusts, without
touching the work tree, so the next snapshot sees everything the agent left as one change.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pygit2

from memsync.errors import RepoError
from memsync.git.repo import MADE_LEDGER, GitRepo
from memsync.git.versions import CommitInfo
from memsync.util.records import field, recordclass

KEPT_PREFIX = "refs/memsync/agent"


@recordclass
class HeadState:
    """Where HEAD is and what git operation the agent may have left half done."""

    symbolic: str | None  # the ref HEAD names (None: detached)
    oid: str | None  # the commit HEAD resolves to
    branch_tip: str | None  # the memory's branch
    operation: str | None  # "merge", "rebase interactive", ... (None: none in progress)
    stash: str | None  # refs/stash
    conflicts: bool = False
    staged: list[str] = field(default_factory=list)


def recorded(git: GitRepo) -> set[str]:
    """Every commit memsync noted in this repository (this process's and earlier commands')."""
    found = set(git.made)
    with contextlib.suppress(OSError):
        found.update(line.strip() for line in (git.git_dir / MADE_LEDGER).read_text(encoding="ascii",
                                                                                errors="replace").split("\n")
                     if line.strip())
    return found


def head_state(git: GitRepo, branch: str) -> HeadState:
    repo = git._repo
    ref = repo.references.get("HEAD")
    target = ref.target if ref is not None else None
    symbolic = target if isinstance(target, str) else None
    oid = None if repo.head_is_unborn else str(repo.head.target)
    state = repo.state()
    operation = None if state == pygit2.enums.RepositoryState.NONE else state.name.lower().replace("_", " ")
    index = git.index
    with contextlib.suppress(pygit2.GitError):
        index.read(force=False)
    return HeadState(symbolic, oid, git.ref_oid(f"refs/heads/{branch}"), operation, git.ref_oid("refs/stash"),
                     index.conflicts is not None)


def foreign(git: GitRepo, tips: list[str], hide: list[str], made: set[str], limit: int = 1000) -> list[CommitInfo]:
    """Commits reachable from `tips` but not from `hide` that memsync did not make, newest first."""
    walker = None
    for tip in dict.fromkeys(tips):
        if walker is None:
            walker = git._repo.walk(pygit2.Oid(hex=tip), pygit2.enums.SortMode.TIME)
        else:
            walker.push(pygit2.Oid(hex=tip))
    if walker is None:
        return []
    for oid in dict.fromkeys(hide):
        with contextlib.suppress(KeyError, ValueError, pygit2.GitError):
            walker.hide(pygit2.Oid(hex=oid))
    found: list[CommitInfo] = []
    for c in walker:
        if str(c.id) in made:
            continue
        found.append(CommitInfo(str(c.id), tuple(str(p) for p in c.parent_ids), c.message, c.author.name,
                                c.author.email, c.commit_time, c.commit_time_offset))
        if len(found) >= limit:
            break
    return found


def keep(git: GitRepo, name: str, oid: str) -> str:
    """Keep a commit reachable under refs/memsync/agent/ (local only: never pushed)."""
    ref = f"{KEPT_PREFIX}/{name}"
    try:
        git._repo.references.create(ref, pygit2.Oid(hex=oid), force=True)
    except (ValueError, pygit2.GitError):  # a run id that is no valid ref name (`x.lock`, `.x`)
        ref = f"{KEPT_PREFIX}/commit-{oid}"
        git._repo.references.create(ref, pygit2.Oid(hex=oid), force=True)
    return ref


def rewind(git: GitRepo, branch: str, trusted: str | None) -> None:
    """Put the branch on `trusted`, HEAD on the branch, the index on `trusted`'s tree where it
    differs, and clear a half-done merge/rebase. The work tree is not touched."""
    try:
        _rewind(git, branch, trusted)
    except (pygit2.GitError, OSError) as exc:
        raise RepoError(f"cannot put {branch} back on {str(trusted)[:8]} in {git.root}: {exc}",
                        "nothing was committed; check the repository (`git status`) and run again") from exc


def _rewind(git: GitRepo, branch: str, trusted: str | None) -> None:
    repo = git._repo
    with contextlib.suppress(pygit2.GitError):
        repo.state_cleanup()
    ref = f"refs/heads/{branch}"
    if trusted is None:
        git.delete_ref(ref)
    else:
        repo.references.create(ref, pygit2.Oid(hex=trusted), force=True)
    repo.set_head(ref)
    _reset_index(repo, trusted)


def _reset_index(repo: pygit2.Repository, trusted: str | None) -> None:
    index = repo.index
    index.read(force=True)
    tree = repo[trusted].peel(pygit2.Commit).tree if trusted is not None else None
    if tree is None:
        index.clear()
    elif index.conflicts is not None:
        index.read_tree(tree)  # a half-done merge: start from the trusted tree (the stat cache goes)
    else:
        for delta in index.diff_to_tree(tree).deltas:  # only what differs: the stat cache stays
            path = delta.old_file.path
            entry = _file(tree, path)
            if entry is None:
                with contextlib.suppress(OSError, pygit2.GitError):
                    index.remove(path)
            else:
                index.add(pygit2.IndexEntry(path, entry.id, entry.filemode))
    index.write()


def reset_entries(git: GitRepo, paths: list[str]) -> None:
    """Put these index entries back to HEAD's (a file kept out of a commit must not ride along in
    the index because someone `git add`ed it)."""
    repo = git._repo
    tree = None if repo.head_is_unborn else repo.head.peel(pygit2.Commit).tree
    index = git.index
    for path in paths:
        entry = _file(tree, path) if tree is not None else None
        if entry is None:
            with contextlib.suppress(OSError, pygit2.GitError):
                index.remove(path)
        else:
            index.add(pygit2.IndexEntry(path, entry.id, entry.filemode))


def tree_of(git: GitRepo, commit: str) -> str:
    return str(git._repo[commit].peel(pygit2.Commit).tree_id)


def first_parents(git: GitRepo, head: str, limit: int = 10_000) -> Iterator[str]:
    """`head` and its first-parent ancestors, newest first."""
    commit = git._repo[head].peel(pygit2.Commit)
    for _ in range(limit):
        yield str(commit.id)
        if not commit.parent_ids:
            return
        commit = git._repo[commit.parent_ids[0]].peel(pygit2.Commit)


def changed_paths(git: GitRepo, commit: str, tree: str) -> set[str]:
    """Paths that differ between a commit's tree and `tree` (tree ids only, no content read)."""
    repo = git._repo
    diff = repo[commit].peel(pygit2.Commit).tree.diff_to_tree(repo[tree].peel(pygit2.Tree))
    return {d.new_file.path or d.old_file.path for d in diff.deltas}


def changed_files(git: GitRepo, start: str | None, tree: str, only: set[str] | None = None
                  ) -> list[tuple[str, bytes | None, bytes | None]]:
    """(path, content at `start`, content in `tree`) for each file that differs (None: absent;
    `start` None: the empty memory); `only`: just these paths (others are not read)."""
    repo = git._repo
    new = repo[tree].peel(pygit2.Tree)
    diff = new.diff_to_tree(swap=True) if start is None else repo[start].peel(pygit2.Commit).tree.diff_to_tree(new)
    found: list[tuple[str, bytes | None, bytes | None]] = []
    for delta in diff.deltas:
        if only is not None and (delta.new_file.path or delta.old_file.path) not in only:
            continue
        sides = []
        for side in (delta.old_file, delta.new_file):
            present = side.mode not in (0, int(pygit2.enums.FileMode.TREE), int(pygit2.enums.FileMode.COMMIT))
            sides.append(bytes(repo[side.id].peel(pygit2.Blob).data) if present and side.id.raw != bytes(20)
                         else None)
        found.append((delta.new_file.path or delta.old_file.path, sides[0], sides[1]))
    return found


def _file(tree: pygit2.Tree, path: str) -> pygit2.Object | None:
    from memsync.git.repo import file_entry

    return file_entry(tree, path)


__all__ = ["HeadState", "changed_files", "changed_paths", "first_parents", "foreign", "head_state", "keep", "recorded",
           "reset_entries", "rewind", "tree_of"]
