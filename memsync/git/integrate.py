"""Bring a fetched version into the work tree: fast-forward or keep-both merge.

Order matters for crash safety (BRIEF): merge in memory, write the merge commit object, record
the checkout (checkoutjournal), check the tree out, move the branch, and only then drop the
record. A crash in between leaves a record that the next command rolls the work tree back by
(never a file cut short that a snapshot would take for an edit): no ref ever contradicts the files.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Literal

import pygit2
from pygit2.enums import CheckoutStrategy, FileMode

from memsync.errors import MemsyncError, RepoError
from memsync.git import checkoutjournal, inplace
from memsync.git.hubtree import Oversize, check_tree, refusal
from memsync.git.repo import GitRepo, file_blob_id, file_entry
from memsync.util import leases
from memsync.util.records import field, recordclass

if TYPE_CHECKING:  # a version already here (up to date, ahead) needs neither the merge nor the checkout
    from memsync.git.merge import ConflictCopy

Outcome = Literal["up-to-date", "ahead", "fast-forward", "merged"]


class WorktreeChanged(MemsyncError):
    """A file the merge must update changed on disk meanwhile: snapshot again, then retry."""


class WorktreeBusy(WorktreeChanged):
    """Files the merge must update are open in another process (an agent, an editor): none is
    written; the merge is tried again once they are closed."""

    def __init__(self, paths: list[str]) -> None:
        super().__init__(f"{len(paths)} file(s) the merge would update are open in another process")
        self.paths = paths


@recordclass
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
        from memsync.git import firstcheckout

        # a first checkout reads every tree of the version: libgit2 need not keep them all
        with firstcheckout.lean_cache() if ours is None else contextlib.nullcontext():
            held = _checkout(git, theirs, memory, max_file_size)
        git.set_ref(ref, theirs, "memsync: fast-forward")
        checkoutjournal.finish(git)
        return Integration("fast-forward", theirs, held_back=held)
    ours_tree = git._repo[ours].peel(pygit2.Commit).tree
    check_tree(git._repo, git._repo[theirs].peel(pygit2.Commit).tree, ours_tree, version=theirs, memory=memory)
    from memsync.git.merge import merge_keep_both

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
    checkoutjournal.finish(git)
    return Integration("merged", str(oid), merged.conflicts, merged.kept_modified, held)


def merge_aside(git: GitRepo, ours: str, theirs: str, their_tag: str, message: str,
                author: tuple[str, str] | None = None, *, memory: str = "",
                strategy_for: Callable[[str], str] | None = None) -> Integration:
    """The keep-both merge of `ours` and `theirs` as a commit that nothing checks out and no
    branch points at: what a checkpoint pushes while an agent still writes in the work tree
    (BRIEF rule 9). The hub's version is checked like one that reaches the work tree. The
    caller knows neither side already holds the other."""
    repo = git._repo
    check_tree(repo, repo[theirs].peel(pygit2.Commit).tree, repo[ours].peel(pygit2.Commit).tree,
               version=theirs, memory=memory)
    from memsync.git.merge import merge_keep_both

    merged = merge_keep_both(repo, ours, theirs, their_tag, strategy_for=strategy_for)
    committer = git.operator_signature()
    signature = pygit2.Signature(*author) if author else committer
    oid = repo.create_commit(None, signature, committer, message, pygit2.Oid(hex=merged.tree),
                             [pygit2.Oid(hex=ours), pygit2.Oid(hex=theirs)])
    git.note_made(str(oid))
    return Integration("merged", str(oid), merged.conflicts, merged.kept_modified)


def _checkout(git: GitRepo, commit: str, memory: str, max_file_size: int | None,
              checked: str | None = None) -> list[Oversize]:
    """Check `commit` out over HEAD; blobs over `max_file_size` stay out of the work tree (held
    back: index entry kept, see GitRepo.held_back). `checked`: the hub version a merge
    `commit` was made from, named in a refusal. The checkout is recorded first
    (checkoutjournal.begin): the caller moves the branch, then calls checkoutjournal.finish."""
    from memsync.git import filters

    repo = git._repo
    tree = repo[commit].peel(pygit2.Commit).tree
    old = None if repo.head_is_unborn else repo.head.peel(pygit2.Commit).tree
    checked_tree = check_tree(repo, tree, old, version=checked or commit, memory=memory,
                              max_file_size=max_file_size, totals=git.stats_memo)
    oversize = checked_tree.oversize
    # a first checkout writes every file: without libgit2's filters when none can apply (filters.py)
    unfiltered = old is None and filters.unneeded(repo, checked_tree.attributes)
    stale = _stale_copies(git, old, oversize)  # before anything is written
    paths = None if old is None else _changed_paths(old, tree)
    exclude = {o.path for o in oversize} | set(git.held_back())
    rewrite = [] if old is None or paths is None else inplace.candidates(old, tree, paths, exclude)
    # A file another process has open is never written: its lease is refused (util/leases.py).
    # One nobody has open is rewritten in place through its lease, only if it is still the old
    # version (git/inplace.py); every other path is probed (leased and released) before libgit2
    # writes it: libgit2 opens files by name, which would break a lease memsync still held.
    with leases.held(git.root, [p for p in paths or [] if p not in rewrite]) as probed:
        busy = probed.busy
    if busy:
        raise WorktreeBusy(busy)
    wanted = inplace.versions(repo, old, tree, rewrite) if old is not None and rewrite else {}
    return _write_checkout(git, repo, tree, commit, paths, oversize, stale, unfiltered, checked or commit,
                           memory, wanted)


def _write_checkout(git: GitRepo, repo: pygit2.Repository, tree: pygit2.Tree, commit: str, paths: list[str] | None,
                    oversize: list[Oversize], stale: list[str], unfiltered: bool, checked: str, memory: str,
                    wanted: dict[str, tuple[bytes, bytes]]) -> list[Oversize]:
    from memsync.git import filters, firstcheckout

    try:
        checkoutjournal.begin(git, commit, paths)
    except OSError as exc:
        raise disk_refusal(git, "cannot start the checkout", exc) from exc
    rewritten = _rewrite_in_place(git, wanted)
    before = git.held_back()
    held = {path: oid for path, oid in before.items() if _blob_id(tree, path) == oid}
    held.update((o.path, o.oid) for o in oversize)
    git.set_held_back({**before, **held})  # first: a crash after the checkout leaves it right
    skip = {o.path for o in oversize}
    missing = []  # held back before, changed now: not on disk, so SAFE would see a conflict
    if paths is not None:
        missing = [p for p in paths if p in before and p not in held]
        paths = [p for p in paths if p not in skip and p not in missing and p not in rewritten]
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
        if rewritten:
            inplace.stage(repo, tree, rewritten)
    except OSError as exc:
        raise disk_refusal(git, "cannot update the work tree", exc, _undo_partial_checkout(git)) from exc
    except pygit2.GitError as exc:
        text = str(exc)
        undone = _undo_partial_checkout(git)
        if "conflict" in text.lower():
            raise WorktreeChanged(f"files changed on disk during the merge: {text}") from exc
        if "invalid path" in text.lower():  # libgit2 refuses `..`, `.git`, absolute paths
            raise refusal(checked, memory, text) from exc
        raise disk_refusal(git, "cannot update the work tree", exc, undone) from exc
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


def _rewrite_in_place(git: GitRepo, wanted: dict[str, tuple[bytes, bytes]]) -> list[str]:
    """Write the files `wanted` names under their leases (git/inplace.py): the ones rewritten.
    None is written when one is open elsewhere (WorktreeBusy) or no longer the old version
    (WorktreeChanged); a failed write is rolled back by the checkout journal."""
    if not wanted:
        return []
    try:
        with leases.held(git.root, sorted(wanted), writable=wanted) as held_files:
            if held_files.busy:
                raise WorktreeBusy(held_files.busy)
            fds = {p: fd for p, fd in held_files.fds.items() if held_files.available}
            if inplace.differing(fds, wanted):
                raise WorktreeChanged("files changed on disk during the merge")
            inplace.write(fds, wanted)
    except WorktreeChanged:
        _undo_partial_checkout(git)
        raise
    except OSError as exc:
        raise disk_refusal(git, "cannot update the work tree", exc, _undo_partial_checkout(git)) from exc
    return sorted(fds)


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


def _undo_partial_checkout(git: GitRepo) -> bool:
    """A checkout that failed half-way (a hostile tree, a full disk) may already have written or
    removed files: roll them back to HEAD now (checkoutjournal.recover), never touching a file
    changed on disk. False when that failed too (a disk still full): the record stays, and the
    next command rolls back before it looks for local changes."""
    try:
        checkoutjournal.recover(git)
    except (OSError, pygit2.GitError):
        return False
    return True


def undo_interrupted_checkout(git: GitRepo) -> None:
    """Before a command looks at the work tree: roll back a checkout a crash cut short
    (checkoutjournal), or stop with a clear error while that cannot be done yet."""
    try:
        done = checkoutjournal.recover(git)
    except (OSError, pygit2.GitError) as exc:
        raise disk_refusal(git, "cannot put back the files of a checkout that was cut short", exc, False) from exc
    if done is not None and (done.restored or done.kept):
        from memsync.util import notices

        kept = f"; {len(done.kept)} changed since kept as they are" if done.kept else ""
        notices.warn(f"a checkout cut short (memsync was stopped, or the disk was full) was undone in {git.root}: "
                     f"{len(done.restored)} file(s) put back as they were{kept}")


def disk_refusal(git: GitRepo, what: str, exc: BaseException, undone: bool = True) -> RepoError:
    """A work tree that cannot be written (a full disk, permissions), named with what was kept."""
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    if disk_full(git.root) or any(s in text.lower() for s in ("no space left", "disk quota", "file too large")):
        text = f"the disk is full ({text})"
    kept = ("nothing was lost: the files it had started to write are back as they were"
            if undone else "nothing was lost: the next memsync command puts back the files it had started to write")
    return RepoError(f"{what} in {git.root}: {text}", f"free some disk space (or fix permissions) and run the "
                     f"command again; {kept}")


def disk_full(path: object) -> bool:
    """Whether the file system holding `path` has (almost) no space left for us."""
    import os

    try:
        st = os.statvfs(str(path))
    except OSError:
        return False
    return st.f_bavail * st.f_frsize < 1024 * 1024
