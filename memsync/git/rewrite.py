"""The one sanctioned history rewrite (`memsync redact`): replace blobs, keep everything else.

Each commit is recreated with the same message, author, committer and dates, and a tree in which
only the named blobs differ; a commit whose tree and parents do not change keeps its id. The
rewrite is deterministic, so two clones applying the same blob map to the same commits get the
same new ids. Also here: a compare-and-swap of a local hub's branch, and purging old objects.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path

import pygit2
from pygit2.enums import FileMode, SortMode

from memsync.errors import RepoError
from memsync.git import checkoutjournal, engine
from memsync.git.repo import GitRepo
from memsync.util.records import field, recordclass

BlobFn = Callable[[str], str | None]  # old blob id -> new blob id, or None to keep it


@recordclass
class Rewritten:
    tip: str
    commits: dict[str, str] = field(default_factory=dict)  # old -> new, only those that changed
    blobs: dict[str, str] = field(default_factory=dict)  # old -> new, those actually replaced


AdoptFn = Callable[[str, str], str | None]  # a shallow root, its rewritten tree -> its rewrite


def rewrite(git: GitRepo, tip: str, blob_fn: BlobFn, adopt: AdoptFn | None = None) -> Rewritten:
    """Rewrite the history reachable from `tip`. `adopt`: for a commit whose parents a shallow
    clone left out, the commit it becomes (the hub's, checked by the caller), or None."""
    repo = git._repo
    result = Rewritten(tip)
    trees: dict[str, str] = {}
    walker = repo.walk(pygit2.Oid(hex=tip), SortMode.TOPOLOGICAL | SortMode.REVERSE)
    for c in walker:
        old = str(c.id)
        parents = [pygit2.Oid(hex=result.commits.get(str(p), str(p))) for p in c.parent_ids]
        tree = _tree(repo, str(c.tree_id), blob_fn, trees, result.blobs)
        adopted = adopt(str(c.id), tree) if adopt is not None and not c.parent_ids else None
        if adopted is not None:
            if adopted != old:
                result.commits[old] = adopted
            continue
        if tree == str(c.tree_id) and [str(p) for p in parents] == [str(p) for p in c.parent_ids]:
            continue
        args = [c.message_encoding] if c.message_encoding else []
        new = repo.create_commit(None, c.author, c.committer, c.message, pygit2.Oid(hex=tree), parents, *args)
        result.commits[old] = str(new)
    result.tip = result.commits.get(tip, tip)
    return result


def _tree(repo: pygit2.Repository, oid: str, blob_fn: BlobFn, memo: dict[str, str],
          replaced: dict[str, str]) -> str:
    if oid in memo:
        return memo[oid]
    tree = repo[oid].peel(pygit2.Tree)
    builder = None
    for entry in tree:
        new = None
        if entry.filemode == FileMode.TREE:
            sub = _tree(repo, str(entry.id), blob_fn, memo, replaced)
            new = sub if sub != str(entry.id) else None
        elif entry.filemode in (FileMode.BLOB, FileMode.BLOB_EXECUTABLE):
            new = blob_fn(str(entry.id))
            if new is not None and new != str(entry.id):
                replaced[str(entry.id)] = new
            else:
                new = None
        if new is not None:
            builder = builder or repo.TreeBuilder(tree)
            builder.insert(entry.name or "", pygit2.Oid(hex=new), entry.filemode)
    memo[oid] = str(builder.write()) if builder is not None else oid
    return memo[oid]


def blob_replacer(git: GitRepo, rule: Callable[[bytes], bytes | None]) -> BlobFn:
    """A BlobFn from a content rule (None: keep); each blob is read once."""
    repo = git._repo
    memo: dict[str, str | None] = {}

    def fn(oid: str) -> str | None:
        if oid not in memo:
            new = rule(repo[oid].peel(pygit2.Blob).data)
            memo[oid] = None if new is None else str(repo.create_blob(new))
        return memo[oid]

    return fn


PLACEHOLDER = re.compile(rb"\[REDACTED by memsync \d{4}-\d{2}-\d{2}\]")


def is_redaction_of(git: GitRepo, old: str, new: str) -> bool:
    """Whether blob `new` is blob `old` with parts (or all of it) replaced by memsync's
    placeholder, and nothing else: what a redaction record may claim, and all it may claim."""
    repo = git._repo
    try:
        before = repo[old].peel(pygit2.Blob).data
        after = repo[new].peel(pygit2.Blob).data
    except (KeyError, ValueError, pygit2.GitError):
        return False
    pieces = PLACEHOLDER.split(after)
    if len(pieces) == 1:
        return False
    if pieces == [b"", b"\n"]:
        return True  # PATH mode: the whole content
    shape = b".+?".join(re.escape(p) for p in pieces)
    return re.fullmatch(shape, before, re.DOTALL) is not None


def paths_holding(git: GitRepo, commits: list[str], blobs: set[str]) -> list[str]:
    """The paths at which any of `commits` holds one of `blobs` (each tree is read once)."""
    repo = git._repo
    memo: dict[str, frozenset[str]] = {}

    def walk(oid: str) -> frozenset[str]:
        if oid not in memo:
            found: set[str] = set()
            for entry in repo[oid].peel(pygit2.Tree):
                name = entry.name or ""
                if entry.filemode == FileMode.TREE:
                    found.update(f"{name}/{p}" for p in walk(str(entry.id)))
                elif str(entry.id) in blobs:
                    found.add(name)
            memo[oid] = frozenset(found)
        return memo[oid]

    paths: set[str] = set()
    for commit in commits:
        paths.update(walk(str(repo[commit].peel(pygit2.Commit).tree_id)))
    return sorted(paths)


def blob_data(git: GitRepo, oid: str) -> bytes | None:
    try:
        return bytes(git._repo[oid].peel(pygit2.Blob).data)
    except (KeyError, ValueError, pygit2.GitError):
        return None


def create_blob(git: GitRepo, data: bytes) -> str:
    repo = git._repo
    return str(repo.create_blob(data))


def record(git: GitRepo, parent: str, message: str) -> str:
    """The redaction record: a commit on top with the same tree, by the operator."""
    sig = git.operator_signature()
    tree = git._repo[parent].peel(pygit2.Commit).tree_id
    return str(git._repo.create_commit(None, sig, sig, message, tree, [pygit2.Oid(hex=parent)]))


def move_to(git: GitRepo, branch: str, new: str, memory: str, max_file_size: int | None) -> None:
    """Check the rewritten version out (files equal to the old version are replaced; none of the
    user's changes is overwritten; the same checks as any hub version), then move the branch:
    the order integrate uses."""

    from memsync.git.integrate import _checkout  # only a rewrite checks out: status never needs it

    _checkout(git, new, memory, max_file_size)
    git.set_ref(f"refs/heads/{branch}", new, "memsync: redact")
    checkoutjournal.finish(git)


def set_hub_ref(hub: Path, ref: str, new: str, expected: str) -> None:
    """Compare-and-swap of a local bare hub's branch (caller holds the hub's lock): a forced
    update the hub's receive.denyNonFastForwards would refuse over a transport."""
    try:
        repo = engine.repository(hub)
        current = repo.references.get(ref)
        if current is None or str(current.target) != expected:
            raise RepoError(f"the hub's {ref} moved meanwhile", "run the command again")
        repo.references.create(ref, pygit2.Oid(hex=new), force=True)
    except pygit2.GitError as exc:
        raise RepoError(f"cannot update {ref} in {hub}: {exc}") from exc


def delete_ref(git_dir: Path, ref: str) -> None:
    repo = engine.repository(git_dir)
    found = repo.references.get(ref)
    if found is not None:
        found.delete()


def purge(git_dir: Path) -> bool:
    """Drop reflogs and unreachable objects now (`git reflog expire` + `git gc --prune=now`), so a
    redacted blob is gone from this repository. Needs the git command; False without it."""
    import shutil
    import subprocess

    exe = shutil.which("git")
    if exe is None:
        return False
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_") or k.startswith("GIT_CONFIG")}
    base = [exe, "--git-dir", str(git_dir), "-c", "gc.autoDetach=false"]
    try:
        for args in (["reflog", "expire", "--expire=now", "--expire-unreachable=now", "--all"],
                     ["gc", "--prune=now", "--quiet"]):
            subprocess.run(base + args, env=env, check=True, capture_output=True, timeout=600)
    except (OSError, subprocess.SubprocessError):
        return False
    return True


def same_but_tree(git: GitRepo, old: str, new: str, tree: str) -> bool:
    """Whether commit `new` is commit `old` with the tree `tree`: the same message (and encoding),
    author and committer with their dates. False when `new` is not a commit here."""
    repo = git._repo
    try:
        o = repo[old].peel(pygit2.Commit)
        n = repo[new].peel(pygit2.Commit)
    except (KeyError, ValueError, pygit2.GitError):
        return False

    def who(sig: pygit2.Signature) -> tuple[str, str, int, int]:
        return (sig.name, sig.email, sig.time, sig.offset)

    return (str(n.tree_id) == tree and n.message == o.message and n.message_encoding == o.message_encoding
            and who(n.author) == who(o.author) and who(n.committer) == who(o.committer))


def reaches(git: GitRepo, tip: str, oid: str) -> bool:
    """Whether `oid` is `tip` or one of its ancestors (False if this repository lacks it)."""
    repo = git._repo
    if tip == oid:
        return True
    try:
        return bool(repo.descendant_of(pygit2.Oid(hex=tip), pygit2.Oid(hex=oid)))
    except (KeyError, ValueError, pygit2.GitError):
        return False


def blob_id_at(git: GitRepo, commit: str, path: str) -> str | None:
    repo = git._repo
    from memsync.git.repo import file_entry

    entry = file_entry(repo[commit].peel(pygit2.Commit).tree, path)
    return None if entry is None else str(entry.id)
