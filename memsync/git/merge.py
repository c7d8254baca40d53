"""Three-way merge that never loses a side (BRIEF rule 1).

libgit2 merges in memory, line by line (a `.gitattributes` in the tree has no say: mergeattrs.py);
a conflict it leaves in a file whose merge policy (storage.yaml `merge:`, see merge_policy.py) is
union, ours or theirs is resolved by merging that file again with that favour; JSON, JSON lines
and YAML files both sides changed merge by structure, and a result that does not parse is never
kept (structured.py); every other conflict is resolved by keeping the local (ours) version at the
path and adding the other side to the path's one gathered file (`summary.md` ->
`summary.conflicts.md`, checks/gathered.py), however many runs conflict; a gathered file that both
sides changed merges entry by entry and never splits in two. A modification beats a deletion.
Only what cannot be a file's version in Markdown (a symlink, a file where the other side made a
folder) still goes beside it as `NAME.conflict-<tag>-<UTC>.EXT`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from datetime import datetime, timezone

import pygit2
from pygit2.enums import MergeFavor

from memsync.checks import gathered, structured
from memsync.errors import RepoError
from memsync.git.mergeattrs import neutralize
from memsync.util.names import conflict_copy_name, gathered_name, host_name, is_gathered
from memsync.util.records import field, recordclass


@recordclass(frozen=True)
class ConflictCopy:
    path: str  # where the local version stays
    copy: str  # where the other side's version was put
    reason: str  # "both modified" | "both added"


@recordclass
class MergeResult:
    tree: str
    conflicts: list[ConflictCopy] = field(default_factory=list)
    kept_modified: list[str] = field(default_factory=list)  # modification beat a deletion


_FAVOR = {"union": MergeFavor.UNION, "ours": MergeFavor.OURS, "theirs": MergeFavor.THEIRS}


def merge_keep_both(repo: pygit2.Repository, ours: str, theirs: str, their_tag: str,
                    now: datetime | None = None,
                    strategy_for: Callable[[str], str] | None = None) -> MergeResult:
    if repo.merge_base(pygit2.Oid(hex=ours), pygit2.Oid(hex=theirs)) is None:
        raise RepoError(
            "the local memory and the remote share no history",
            "clone the remote memory into a new directory, or rename this one (`name:` in .vm0/storage.yaml)",
        )
    if strategy_for is None:
        from memsync.checks.merge_policy import strategy_for as by_default

        def strategy_for(path: str) -> str:
            return by_default([], path)

    follow_policy_only(repo)
    index = repo.merge_commits(ours, theirs)
    _by_appends(repo, index, ours, theirs, strategy_for)
    resolutions = _by_policy(repo, index, ours, theirs, strategy_for)
    forced = _by_structure(repo, index, ours, theirs, strategy_for, resolutions)
    _by_entries(repo, index, ours, theirs)
    return keep_both(repo, index, their_tag, now, resolutions=resolutions, forced=forced, their_version=theirs)


def _by_entries(repo: pygit2.Repository, index: pygit2.Index, ours: str, theirs: str) -> None:
    """Gathered files both sides changed (or one deleted, the other changed): merged entry by
    entry (gathered.merge3), whatever the line merge made of them, so none is ever lost or split."""
    base_oid = repo.merge_base(pygit2.Oid(hex=ours), pygit2.Oid(hex=theirs))
    trees = [repo[oid].peel(pygit2.Commit).tree for oid in (base_oid, ours, theirs)]
    for path in sorted(p for p in _changed_on_both_sides(repo, *trees) if is_gathered(p)):
        base, mine, other = (_blob_entry(tree, path) for tree in trees)
        merged = _merge_gathered(repo, path, base, mine, other)
        if index.conflicts is not None:
            _drop_conflict(index.conflicts, path)
        if merged is None:
            with contextlib.suppress(OSError, KeyError, ValueError):
                index.remove(path)
        else:
            index.add(merged)


def _by_appends(repo: pygit2.Repository, index: pygit2.Index, ours: str, theirs: str,
                strategy_for: Callable[[str], str]) -> None:
    """Files whose policy is `append` that both sides changed: merged by appendmerge (every line
    each side added, once), whatever libgit2's line merge made of them. A deletion on one side, a
    link or a binary file is left to the other rules (a modification beats a deletion)."""
    from memsync.checks.appendmerge import merge_appends

    base_oid = repo.merge_base(pygit2.Oid(hex=ours), pygit2.Oid(hex=theirs))
    trees = [repo[oid].peel(pygit2.Commit).tree for oid in (base_oid, ours, theirs)]
    for path in sorted(p for p in _changed_on_both_sides(repo, *trees) if strategy_for(p) == "append"):
        base, mine, other = (_blob_entry(tree, path) for tree in trees)
        if mine is None or other is None:
            continue
        sides = [b"" if e is None else repo[e.id].peel(pygit2.Blob).data for e in (base, mine, other)]
        if any(b"\0" in data[:8000] for data in sides):
            continue
        merged = merge_appends(None if base is None else sides[0], sides[1], sides[2])
        if index.conflicts is not None:
            _drop_conflict(index.conflicts, path)
        index.add(pygit2.IndexEntry(path, repo.create_blob(merged), mine.mode))


def _merge_gathered(repo: pygit2.Repository, path: str, *sides: pygit2.IndexEntry | None) -> pygit2.IndexEntry | None:
    base, mine, other = (None if e is None else repo[e.id].peel(pygit2.Blob).data for e in sides)
    merged = gathered.merge3(base, mine, other)
    return None if merged is None else pygit2.IndexEntry(path, repo.create_blob(merged), pygit2.enums.FileMode.BLOB)


def follow_policy_only(repo: pygit2.Repository) -> None:
    """Before any merge of this repository: attributes in the tree choose no merge driver."""
    try:
        neutralize(repo)
    except OSError as exc:
        raise RepoError(f"cannot write {repo.path}info/attributes: {exc.strerror or exc}",
                        "memsync merges only when the tree's .gitattributes cannot choose how; "
                        "make the memory's .git/info writable") from exc


def _by_structure(repo: pygit2.Repository, index: pygit2.Index, ours: str, theirs: str,
                  strategy_for: Callable[[str], str],
                  resolutions: dict[str, pygit2.IndexEntry]) -> dict[str, tuple[pygit2.IndexEntry, pygit2.IndexEntry]]:
    """JSON, JSON lines and YAML files both sides changed: merged by structure (structured.py).
    Updates `resolutions` (the entries that resolve conflicts) and the index (clean line merges replaced); returns the
    files whose line merge was clean but must keep both sides (ours, theirs)."""
    base_oid = repo.merge_base(pygit2.Oid(hex=ours), pygit2.Oid(hex=theirs))
    trees = [repo[oid].peel(pygit2.Commit).tree for oid in (base_oid, ours, theirs)]
    conflicted = {e.path for c in (index.conflicts or []) for e in c if e is not None}
    forced: dict[str, tuple[pygit2.IndexEntry, pygit2.IndexEntry]] = {}
    for path in _changed_on_both_sides(repo, *trees):
        kind = structured.kind_of(path)
        if kind is None:
            continue
        base, mine, other = (_blob_entry(tree, path) for tree in trees)
        if mine is None or other is None or mine.id == other.id:
            continue  # a deletion (a modification beats it), a link, or the same change
        if path in resolutions:
            text: bytes | None = repo[resolutions[path].id].peel(pygit2.Blob).data
        elif path in conflicted:
            text = None
        elif path in index:
            text = repo[index[path].id].peel(pygit2.Blob).data
        else:
            continue
        merged = structured.merge(kind, strategy_for(path),
                                  None if base is None else repo[base.id].peel(pygit2.Blob).data,
                                  repo[mine.id].peel(pygit2.Blob).data, repo[other.id].peel(pygit2.Blob).data,
                                  text)
        if merged is None:
            resolutions.pop(path, None)  # still a conflict: keep_both keeps both sides
            if path not in conflicted:
                forced[path] = (mine, other)
        elif merged != text:
            entry = pygit2.IndexEntry(path, repo.create_blob(merged), mine.mode)
            if path in conflicted:
                resolutions[path] = entry
            else:
                index.add(entry)
    return forced


def _changed_on_both_sides(repo: pygit2.Repository, base: pygit2.Tree, ours: pygit2.Tree,
                           theirs: pygit2.Tree) -> set[str]:
    """Following only the subtrees that differ (treediff.py): the cost follows the change."""
    from memsync.git.treediff import paths_between

    def changed(tree: pygit2.Tree) -> set[str]:
        return {path for path, _ in paths_between(repo, str(base.id), str(tree.id))}

    return changed(ours) & changed(theirs)


def _blob_entry(tree: pygit2.Tree, path: str) -> pygit2.IndexEntry | None:
    try:
        obj = tree[path]
    except KeyError:
        return None
    if obj.filemode not in (pygit2.enums.FileMode.BLOB, pygit2.enums.FileMode.BLOB_EXECUTABLE):
        return None
    return pygit2.IndexEntry(path, obj.id, obj.filemode)


def _by_policy(repo: pygit2.Repository, index: pygit2.Index, ours: str, theirs: str,
               strategy_for: Callable[[str], str]) -> dict[str, pygit2.IndexEntry]:
    """Conflicting files (both sides changed them) whose policy is union/ours/theirs, merged again
    with that favour; what libgit2 still cannot merge (a binary file) stays a conflict."""
    if index.conflicts is None:
        return {}
    wanted: dict[str, list[str]] = {}
    for _, mine, other in index.conflicts:
        if mine is not None and other is not None and mine.path == other.path:
            strategy = strategy_for(mine.path)
            if strategy in _FAVOR:
                wanted.setdefault(strategy, []).append(mine.path)
    resolutions: dict[str, pygit2.IndexEntry] = {}
    for strategy, paths in wanted.items():
        again = repo.merge_commits(ours, theirs, favor=_FAVOR[strategy])
        left = {e.path for c in (again.conflicts or []) for e in c if e is not None}
        for path in paths:
            if path not in left and path in again:
                resolutions[path] = again[path]
    return resolutions


def keep_both(repo: pygit2.Repository, index: pygit2.Index, their_tag: str,
              now: datetime | None = None, our_tag: str | None = None,
              resolutions: dict[str, pygit2.IndexEntry] | None = None,
              forced: dict[str, tuple[pygit2.IndexEntry, pygit2.IndexEntry]] | None = None,
              their_version: str | None = None) -> MergeResult:
    """Resolve every conflict of a merged index (ours at the path, theirs gathered beside it;
    a modification beats a deletion) and write its tree. Also used by `memsync revert`.
    `forced`: files the line merge merged cleanly that must keep both sides all the same.
    `their_version`: the commit the other side is (recorded with each gathered version).

    A file (or symlink) at a path the other side made a directory cannot share it: the
    directory keeps the path and the file goes beside it as a conflict copy (named after the
    side it came from), so neither side's files are lost."""
    when = now or datetime.now(timezone.utc)
    result = MergeResult(tree="")
    if index.conflicts is not None or forced:
        resolved: list[tuple[pygit2.IndexEntry, str, bool]] = []  # (entry, its side's tag, as a copy)
        for path, (mine, other) in (forced or {}).items():
            index.remove(path)
            resolved.append((mine, our_tag or host_name(), False))
            resolved.append((other, their_tag, True))
            result.conflicts.append(ConflictCopy(path, path, "both modified"))
        collection = index.conflicts or []
        for ancestor, mine, other in list(collection):
            for entry in (ancestor, mine, other):
                if entry is not None:
                    _drop_conflict(collection, entry.path)
            path = next(e.path for e in (ancestor, mine, other) if e is not None)
            if is_gathered(path):
                merged = _merge_gathered(repo, path, ancestor, mine, other)
                if merged is not None:
                    resolved.append((merged, our_tag or host_name(), False))
                continue
            if mine is not None and resolutions and mine.path in resolutions:
                resolved.append((resolutions[mine.path], our_tag or host_name(), False))  # merged by its policy
            elif mine is not None and other is not None:
                resolved.append((mine, our_tag or host_name(), False))
                resolved.append((other, their_tag, True))
                result.conflicts.append(ConflictCopy(mine.path, other.path,
                                                     "both added" if ancestor is None else "both modified"))
            elif mine is not None or other is not None:
                kept = mine if mine is not None else other
                assert kept is not None
                resolved.append((kept, (our_tag or host_name()) if kept is mine else their_tag, False))
                result.kept_modified.append(kept.path)
        their_time = (datetime.fromtimestamp(repo[their_version].peel(pygit2.Commit).commit_time, timezone.utc)
                      if their_version else when)
        losers = _place(index, resolved, result, when)
        _gather(repo, index, result, [(entry, tag, their_version, their_time) for entry, tag in losers])
    try:
        result.tree = str(index.write_tree(repo))
    except pygit2.GitError as exc:
        raise RepoError(f"cannot write the merged tree: {exc}",
                        "report this with the output of `git status`") from exc
    return result


def _gather(repo: pygit2.Repository, index: pygit2.Index, result: MergeResult,
            losers: list[tuple[pygit2.IndexEntry, str, str | None, datetime]]) -> None:
    """Add each losing version to its path's gathered file (made, or added to, in the index)."""
    by_file: dict[str, list[gathered.Loser]] = {}
    for entry, tag, version, when in losers:
        data = repo[entry.id].peel(pygit2.Blob).data
        loser = gathered.Loser(str(entry.path), data, str(entry.id), tag, version, when)
        by_file.setdefault(gathered_name(loser.path), []).append(loser)
    for name, found in by_file.items():
        existing = repo[index[name].id].peel(pygit2.Blob).data if name in index else None
        blob = repo.create_blob(gathered.add(existing, found))
        index.add(pygit2.IndexEntry(name, blob, pygit2.enums.FileMode.BLOB))
    gathered_at = {loser.path: name for name, found in by_file.items() for loser in found}
    result.conflicts[:] = [ConflictCopy(c.path, gathered_at.get(c.copy, c.copy), c.reason) for c in result.conflicts]


def _place(index: pygit2.Index, resolved: list[tuple[pygit2.IndexEntry, str, bool]], result: MergeResult,
           when: datetime) -> list[tuple[pygit2.IndexEntry, str]]:
    """Add the resolved entries; a file whose path is also a directory moves beside it. Returns
    the losing versions of regular files, for their gathered file (_gather)."""
    staged = {str(entry.path): entry for entry in index}
    final = set(staged) | {str(entry.path) for entry, _, as_copy in resolved if not as_copy}
    dirs = {parent for path in final for parent in _parents(path)}
    taken = set(final)
    clashes = [(staged[p], "clash", False) for p in staged if p in dirs]  # libgit2 staged both sides
    for entry, _, _ in clashes:
        index.remove(entry.path)
    copies: dict[str, str] = {}
    losers: list[tuple[pygit2.IndexEntry, str]] = []
    for entry, tag, as_copy in [*resolved, *clashes]:
        path = str(entry.path)
        if as_copy and entry.mode in _REGULAR and gathered_name(path) not in dirs and gathered.can_name(path):
            losers.append((entry, tag))
            continue
        if as_copy:
            copy = _free_name(conflict_copy_name(path, tag, when), taken | dirs)
            copies[path] = copy
        elif path in dirs:
            copy = _free_name(conflict_copy_name(path, tag, when), taken | dirs)
            result.conflicts.append(ConflictCopy(path, copy, "file/directory clash"))
            with contextlib.suppress(ValueError):
                result.kept_modified.remove(path)
        else:
            copy = path
        taken.add(copy)
        index.add(pygit2.IndexEntry(copy, entry.id, entry.mode))
    result.conflicts[:] = [ConflictCopy(c.path, copies.get(c.copy, c.copy), c.reason) for c in result.conflicts]
    return losers


_REGULAR = (pygit2.enums.FileMode.BLOB, pygit2.enums.FileMode.BLOB_EXECUTABLE)


def _drop_conflict(collection: object, path: str) -> None:
    with contextlib.suppress(KeyError):
        del collection[path]  # type: ignore[attr-defined]


def _parents(path: str) -> list[str]:
    parts = path.split("/")
    return ["/".join(parts[:n]) for n in range(1, len(parts))]


def _free_name(candidate: str, taken: set[str]) -> str:
    if candidate not in taken:
        return candidate
    n = 2
    while f"{candidate}.{n}" in taken:
        n += 1
    return f"{candidate}.{n}"
