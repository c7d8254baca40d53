"""The work-tree scan: one walk of the memory's files against its index and HEAD.

`scan` returns what differs from HEAD together with what the walk saw beside it (ignored files,
nested repositories, index flags it cleared) as one `ScanResult`; it refreshes the index's stat
cache on the way, so the next scan does not re-hash copied files. repo.py holds the repository
the scan reads; versions.py reads history.
"""

from __future__ import annotations

import contextlib
import os
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pygit2
from pygit2.enums import DiffOption

from memsync.errors import RepoError
from memsync.git import earlyscan, hints, indexflags, native
from memsync.git.repo import EXCLUDES, GitRepo, WorkChange, file_entry, index_entry, index_tree_cached, write_tree
from memsync.git.workdiff import Walked, diff_to_workdir, scan_flags
from memsync.util.records import recordclass

__all__ = ["ScanResult", "own_exclude", "scan"]

_OWN_RULES = tuple(line for line in EXCLUDES.splitlines() if line and not line.startswith("#"))


@recordclass(frozen=True)
class ScanResult:
    """What one scan found."""

    changes: list[WorkChange]  # what differs from HEAD, by path
    ignored: list[str]  # untracked files and folders ("dir/") the operator's ignore rules hide
    unhidden: list[str]  # new files only a `.gitignore` the operator's rules leave out hides: taken
    nested: list[str]  # folders holding their own .git
    unhidden_flags: list[indexflags.Hiding]  # index flags a full scan cleared


def scan(git: GitRepo, write_index: bool = True, full: bool = False, tree_ignores: bool = True,
         meanwhile: Callable[[], None] | None = None) -> ScanResult:
    """Everything that differs from HEAD: one walk of the work tree, which also refreshes
    the index's stat cache so the next scan does not re-hash copied files.
    `write_index=False`: the caller commits next, and commit_index writes the index once.
    The index is written only when the walk refreshed stat data (or could not tell).
    `full=True`: never narrowed by a change tracker's hint (git/hints.py), for what must see
    every change however it was made: an agent's record, a read-only memory's undo.
    Ignore rules are the operator's (git/localignores.py): `.git/info/exclude`,
    core.excludesFile and, with `tree_ignores` (the operator's own commits and status), the
    `.gitignore` files that did not come from the hub; `tree_ignores=False` (an agent's record):
    no `.gitignore` in the tree hides anything.
    `meanwhile`: the caller's own preparation, run while an early walk is still going."""
    flags = scan_flags()
    cleared = _clear_hiding_flags(git) if full else []
    early = _early_walk(git, flags, meanwhile)  # (before git.index: the walk's rule)
    index = git.index
    index.read(force=False)
    head = None if git.reader.head_is_unborn else git.reader.head.peel(pygit2.Commit).tree
    candidates: set[str] = set()
    staged_same = False  # the index holds exactly HEAD's tree
    if head is not None:
        staged_same = index_tree_cached(index) == head.id
        if not staged_same:
            for delta in index.diff_to_tree(head).deltas:
                candidates.update((delta.old_file.path, delta.new_file.path))
    else:
        candidates.update(entry.path for entry in index)
    staged = bool(candidates)  # the index differs from HEAD
    deltas = early if early is not None else _workdir_deltas(git, index, flags, full)
    ignored, unhidden = _ignored(git, deltas, candidates, tree_ignores, index)
    del deltas, early
    native.release_free_heap()  # the walk's diff, freed: glibc keeps it mapped (in the early walk's arena)
    # (a refreshed entry was written by libgit2 from inside the diff: workdiff.py)
    if write_index and head is not None and not staged and index_tree_cached(index) != head.id:
        # The index holds HEAD's tree, but its tree cache does not say so (a refreshed entry
        # or a checkout drops its folders from it): rebuild it from HEAD's trees, all
        # present, and keep it, so the next scan compares the index with HEAD for free.
        # Not when the caller commits next (write_index=False): a commit rebuilds it anyway,
        # and a pull's checkout would drop it again at once.
        with contextlib.suppress(pygit2.GitError, OSError):
            write_tree(index)
            git.index_changed()  # commit_index writes it (again, and reports a failure)
    if write_index:
        git.write_changed_index()
    git.matched_head(git.head_oid() if head is not None and not candidates else None)
    # libgit2 reports a directory holding its own .git as one untracked "dir/" entry
    nested = sorted(p.rstrip("/") for p in candidates if p.endswith("/"))
    changes: list[WorkChange] = []
    held = git.held_back() if candidates else {}
    for path in sorted(candidates):
        entry = None if head is None else file_entry(head, path)
        on_disk = _is_file_or_link(git.root / path)
        if entry is not None and on_disk:
            changes.append(WorkChange(path, "modified"))
        elif entry is not None and held.get(path) == str(entry.id):  # held back: not a deletion
            if _keep_entry(index, path, entry):
                git.index_changed()
        elif entry is not None:
            changes.append(WorkChange(path, "deleted"))
        elif on_disk:
            changes.append(WorkChange(path, "added"))
    return ScanResult(changes, ignored, unhidden, nested, cleared)


def _ignored(git: GitRepo, walked: Walked, candidates: set[str], tree_ignores: bool,
             index: pygit2.Index) -> tuple[list[str], list[str]]:
    """(what the operator's ignore rules hide, the new files only a `.gitignore` they do not
    follow hides): the walk's ignored entries sorted out; every other delta's paths are added to
    `candidates`, the unhidden files too."""
    ignored: list[str] = []
    local = None
    unhidden: list[str] = []
    home = _home_inside(git.root)
    for path in walked.ignored:
        if own_exclude(path) or (home is not None and (path + "/").startswith(home)):
            continue
        if local is None:
            from memsync.git.localignores import LocalIgnores

            local = LocalIgnores(git.reader, tree_rules=tree_ignores)
        if local.hides(path):
            ignored.append(path)
        elif path.endswith("/"):
            found, hidden = local.files_under(git.root, path, index)
            unhidden += [p for p in found if not own_exclude(p)]
            ignored += [p for p in hidden if not own_exclude(p)]
        else:
            unhidden.append(path)
    candidates.update(walked.changed)
    candidates.update(unhidden)
    return sorted(ignored), sorted(unhidden)

def _clear_hiding_flags(git: GitRepo) -> list[indexflags.Hiding]:
    """Clear assume-unchanged and skip-worktree on every index entry (git/indexflags.py): a
    scan that must see every change (an agent's record) cannot let one look away. The
    entries keep their blob and mode; their stat data goes, so the scan hashes those files."""
    try:
        with open(git.git_dir / "index", "rb") as fh:
            found = indexflags.hiding(fh.read())
    except OSError:
        return []
    if not found:
        return []
    index = git.index
    index.read(force=False)
    for flagged in found:
        entry = index_entry(index, flagged.path)
        if entry is not None:
            index.remove(flagged.path)
            index.add(pygit2.IndexEntry(flagged.path, entry.id, entry.mode))
    git.index_changed()
    git.matched_head(None)
    return found

# What became of each walk begun under the lock (git/earlyscan.py) that a scan of its repository
# found: "used" (its deltas are the scan's) or "set aside" (the scan walked itself). Counted for
# tests and debugging; nothing decides on it.
EARLY_WALKS: Counter[str] = Counter()


def _early_walk(git: GitRepo, flags: DiffOption,
                meanwhile: Callable[[], None] | None = None) -> Walked | None:
    """The deltas of the walk git/earlyscan.py began under the lock, if this is the scan it
    stands for: this repository's first look at its index (its rule, in that module)."""
    deltas = earlyscan.take(git.root, int(flags), meanwhile)
    if deltas is None:
        return None
    if hints.source is not None or not git.index_untouched:
        EARLY_WALKS["set aside"] += 1
        return None
    EARLY_WALKS["used"] += 1
    return deltas

def _workdir_deltas(git: GitRepo, index: pygit2.Index, flags: DiffOption, full: bool) -> Walked:
    """The index-to-work-tree diff: of the paths a change tracker names, when one has a
    baseline this index can use (git/hints.py) and the caller allows it, else of everything.
    Its result is handed back as the next baseline."""
    link = hints.source
    root = os.path.realpath(git.root)
    since = None if link is None or git.reader.head_is_unborn else link.since(root)
    if link is None or since is None:
        return diff_to_workdir(git.reader, index, flags)
    cached = index_tree_cached(index)
    if cached is None:  # the cache lost folders (a refresh, a commit not written back): rebuild it
        with contextlib.suppress(pygit2.GitError, OSError):
            cached = write_tree(index)
            git.index_changed()  # and keep it, so the next scan has it for free
    tree = None if cached is None else str(cached)
    stamp = hints.fingerprint(git.git_dir, int(flags), git.config_values("core.excludesFile",
                                                                          "core.attributesFile"))
    paths = None if full or not git.narrow else hints.narrowing(since, tree, stamp)
    if paths is not None and tree is not None and since.tree is not None and tree != since.tree:
        try:
            from memsync.git.treediff import paths_between

            moved = [p if kind != "deleted" else _first_gone(git.reader, tree, p)
                     for p, kind in paths_between(git.reader, since.tree, tree)]
        except (KeyError, ValueError, pygit2.GitError, RepoError):
            moved = None
        if moved is None or len(moved) + len(paths) > hints.MAX_PATHS or any(
                p.rsplit("/", 1)[-1] in hints.RULE_FILES for p in moved):
            paths = None
        else:
            paths = paths | frozenset(moved)
    # One diff per path (workdiff.py says why), none inside another: a folder covers its files.
    # (libgit2 narrowed to a path below a folder holding its own .git can miss what a full diff
    # reports there; the tracker never narrows while the memory holds one.)
    asked = None if paths is None else _outermost(p.rstrip("/") for p in paths)
    if asked is not None and len(asked) > hints.MAX_DIFFS:
        asked = None  # past this many, one full diff costs less
    # (libgit2 writes the index from inside each diff that refreshed an entry)
    deltas = diff_to_workdir(git.reader, index, flags, asked)
    if tree is not None:
        link.hand_back(root, since.token, tree, stamp, sorted(deltas.paths()), asked is None)
    return deltas


def own_exclude(path: str) -> bool:
    """Whether memsync's own exclude rules (EXCLUDES, which git reads from info/exclude) hide
    `path` (a folder ends in `/`): those are not news to report. Matched by the one glob engine,
    gitignore's rules, as git matches them; every memory's `.vm0/` without compiling them."""
    from memsync.checks import globs

    return path.startswith(".vm0/") or globs.matches_list(_OWN_RULES, path)


def _home_inside(root: Path) -> str | None:
    """MEMSYNC_HOME as a folder path ("state/memsync/") when it lies inside `root`: excluded as
    memsync's own (core/ownfolders.py), so not news to report either."""
    from memsync.git.hub import memsync_home

    home = memsync_home()
    try:
        inside = Path(os.path.abspath(home)).relative_to(os.path.abspath(root))
    except ValueError:
        try:
            inside = home.resolve().relative_to(root.resolve())
        except (ValueError, OSError):
            return None
    return inside.as_posix() + "/" if inside.parts else None


def _first_gone(repo: pygit2.Repository, tree: str, path: str) -> str:
    """For a path the index no longer has: its outermost folder with nothing left in the index's
    tree (git reports an ignored folder without tracked files as one "dir/" entry), else itself."""
    root = repo[tree].peel(pygit2.Tree)
    parts = path.split("/")
    for depth in range(1, len(parts)):
        folder = "/".join(parts[:depth])
        try:
            root[folder]
        except KeyError:
            return folder
    return path


def _outermost(paths: Iterator[str] | list[str]) -> list[str]:
    """The paths, without any that lies inside another of them (sorted)."""
    kept: list[str] = []
    for path in sorted(set(paths), key=lambda p: p.split("/")):
        if not kept or not path.startswith(kept[-1] + "/"):
            kept.append(path)
    return kept


def _is_file_or_link(path: Path) -> bool:
    import stat

    try:
        mode = path.lstat().st_mode
    except OSError:
        return False
    return stat.S_ISREG(mode) or stat.S_ISLNK(mode)


def _keep_entry(index: pygit2.Index, path: str, entry: pygit2.Object) -> bool:
    """The index keeps a held-back file's blob (a checkout killed before writing it may not have).
    True if the entry had to be put back."""
    try:
        if index[path].id == entry.id:
            return False
    except KeyError:
        pass
    index.add(pygit2.IndexEntry(path, entry.id, entry.filemode))
    return True
