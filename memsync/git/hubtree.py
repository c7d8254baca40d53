"""What a hub version may contain, checked before anything of it is written (docs/SECURITY.md).

Every version that reaches a work tree (clone, pull, a run's or watch's pull, the merge after a
restore or revert) is checked here first, as git checks a tree before a checkout:

- no entry named like `.git` or `.vm0` at any depth (checks/pathnames.py: the commit side refuses
  the same names, so no version memsync makes holds one), in any letter case or in the spellings
  NTFS and HFS+ treat as the same name (`.vm0.`, `.vm0 `, `vm0~1`, `.vm0::$DATA`, `.v\u200cm0`):
  `.vm0/` is the memory's local configuration (remote, policies) and never comes from a hub;
- no `..`, `.`, empty name, name holding `/` or NUL, or two entries with one name;
- trees at most MAX_TREE_DEPTH deep and MAX_TREE_ENTRIES entries in all, walked without recursion;
- blobs over the memory's max_file_size are reported (by their object header: never read) so
  the caller leaves them out of the checkout.
"""

from __future__ import annotations

import pygit2

from memsync.checks.pathnames import bad_name, bad_path, reserved_name
from memsync.errors import RepoError
from memsync.util.records import field, recordclass

MAX_TREE_DEPTH = 256  # directory levels; git's own fail-safe (core.maxTreeDepth) is 2048
MAX_TREE_ENTRIES = 1_000_000  # tree entries in one version (100,000-file memories are measured)

_NOTHING_WRITTEN = "nothing was written; revert that version on the hub or ask its owner"


class UnsafeVersion(RepoError):
    """A hub version holds a path memsync never writes; nothing of it was checked out."""

    def __init__(self, message: str, path: str, hint: str = _NOTHING_WRITTEN) -> None:
        super().__init__(message, hint)
        self.path = path


class TreeTooLarge(RepoError):
    """A version's tree is deeper or larger than memsync walks."""


@recordclass(frozen=True)
class Oversize:
    path: str
    oid: str
    mode: int
    size: int


@recordclass
class TreeCheck:
    oversize: list[Oversize] = field(default_factory=list)
    attributes: list[tuple[str, int]] = field(default_factory=list)  # (id, mode) of each .gitattributes walked


def refusal(version: str, memory: str, path: str) -> UnsafeVersion:
    where = f"version {version[:8]}" + (f" of memory {memory!r}" if memory else "")
    if any(reserved_name(part) == ".vm0" for part in path.split("/")):
        return UnsafeVersion(f"refused {where}: it holds {path!r}, memsync's local configuration "
                             "(.vm0 never comes from a hub)", path)
    return UnsafeVersion(f"refused {where}: it holds a path outside the memory or inside its .git "
                         f"({path!r})", path)


def check_tree(repo: pygit2.Repository, tree: pygit2.Tree, old: pygit2.Tree | None, *, version: str,
               memory: str = "", max_file_size: int | None = None,
               max_depth: int = MAX_TREE_DEPTH, max_entries: int = MAX_TREE_ENTRIES,
               totals: dict[str, tuple[int, int]] | None = None) -> TreeCheck:
    """Refuse a tree a checkout must never write; report its blobs over `max_file_size`.
    Only what differs from `old` (the version already checked out, checked when it came) is
    walked, so the cost follows the change, not the memory's size. `totals` (a tree_totals
    memo, first checkout only): subtrees whose bytes in all fit the limit skip the size reads,
    so a clone reads each object header once, for its Files/Size line and this check together."""
    result = TreeCheck()
    if old is None and max_file_size is not None and totals is not None:
        tree_totals(repo, tree, totals, version=version, memory=memory, max_depth=max_depth,
                    max_entries=max_entries)
    stack: list[tuple[pygit2.Tree, pygit2.Tree | None, str, int]] = [(tree, old, "", 1)]
    entries = 0
    while stack:
        current, before, prefix, depth = stack.pop()
        if depth > max_depth:
            raise _too_large(version, memory, f"deeper than {max_depth} directories (at {prefix[:80]!r}...)")
        entries += len(current)
        if entries > max_entries:
            raise _too_large(version, memory, f"more than {max_entries:,} entries")
        limit = max_file_size
        if limit is not None and totals is not None and totals.get(str(current.id), (0, limit + 1))[1] <= limit:
            limit = None  # nothing below is larger than all of it together
        seen: set[str] = set()
        for entry in current:
            name = entry.name or ""
            path = prefix + name
            if bad_name(name) or name in seen:
                raise refusal(version, memory, path)
            seen.add(name)
            same = _entry(before, name)
            if same is not None and same.id == entry.id and same.filemode == entry.filemode:
                continue  # unchanged: checked when it arrived, and not written again
            kind = entry.type_str  # a plain string: no FileMode enum per entry
            if name == ".gitattributes":
                result.attributes.append((str(entry.id), int(entry.filemode)))
            if kind == "tree":
                was = repo[same.id].peel(pygit2.Tree) if same is not None and same.type_str == "tree" else None
                stack.append((repo[entry.id].peel(pygit2.Tree), was, path + "/", depth + 1))
            elif kind != "commit" and limit is not None:
                size = int(repo.odb.read_header(entry.id)[1])
                if size > limit:
                    result.oversize.append(Oversize(path, str(entry.id), int(entry.filemode), size))
    result.oversize.sort(key=lambda o: o.path)
    return result


def tree_totals(repo: pygit2.Repository, tree: pygit2.Tree, memo: dict[str, tuple[int, int]], *,
                version: str = "", memory: str = "", max_depth: int = MAX_TREE_DEPTH,
                max_entries: int = MAX_TREE_ENTRIES) -> tuple[int, int]:
    """(files, bytes) of a tree from object headers only, walked without recursion (post-order
    on an explicit stack); TreeTooLarge past the caps. `memo` holds subtrees already counted."""
    header = repo.odb.read_header
    entries = 0
    stack: list[tuple[pygit2.Tree, int, bool]] = [(tree, 1, False)]
    while stack:
        current, depth, counted = stack.pop()
        key = str(current.id)
        if key in memo:
            continue
        if not counted:
            if depth > max_depth:
                raise _too_large(version, memory, f"deeper than {max_depth} directories")
            entries += len(current)
            if entries > max_entries:
                raise _too_large(version, memory, f"more than {max_entries:,} entries")
            stack.append((current, depth, True))
            stack.extend((entry, depth + 1, False) for entry in current  # type: ignore[misc]
                         if entry.type_str == "tree" and str(entry.id) not in memo)
            continue
        files = size = 0
        for entry in current:
            kind = entry.type_str  # plain strings: ~5x faster than building FileMode enums
            if kind == "tree":
                f, s = memo[str(entry.id)]
                files, size = files + f, size + s
            elif kind == "blob":
                files += 1
                size += header(entry.id)[1]
        memo[key] = (files, size)
    return memo[str(tree.id)]


def _entry(tree: pygit2.Tree | None, name: str) -> pygit2.Object | None:
    if tree is None:
        return None
    try:
        return tree[name]
    except KeyError:
        return None


def _too_large(version: str, memory: str, what: str) -> TreeTooLarge:
    where = f"version {version[:8]}" + (f" of memory {memory!r}" if memory else "") if version else "a version"
    return TreeTooLarge(f"refused {where}: its tree is {what}",
                        f"memsync walks at most {MAX_TREE_DEPTH} directory levels and {MAX_TREE_ENTRIES:,} "
                        "entries per version; nothing was written; ask the hub's owner to revert it")


__all__ = ["MAX_TREE_DEPTH", "MAX_TREE_ENTRIES", "Oversize", "TreeCheck", "TreeTooLarge", "UnsafeVersion",
           "bad_name", "bad_path", "check_tree", "refusal", "reserved_name", "tree_totals"]
