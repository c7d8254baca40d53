"""A memory's local repository: scan the work tree once, stage exact bytes, commit, inspect.

Memories are ordinary git work trees, so plain `git log` / `git diff` keep working; memsync keeps
its local branch named like the hub branch (`memory/research`) with `origin` configured for it.
"""

from __future__ import annotations

import contextlib
import os
import re
import struct
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Literal

import pygit2
from pygit2.enums import DeltaStatus, DiffOption, FileMode, Option, RepositoryState

from memsync.errors import RepoError
from memsync.git import earlyscan, engine, hints, indexflags, packguard
from memsync.git.hub import safe_url
from memsync.git.hubtree import tree_totals
from memsync.git.trailers import append as trailer_append
from memsync.git.workdiff import diff_to_workdir, scan_flags
from memsync.util.fs import atomic_write, read_private, write_private
from memsync.util.names import operator_identity
from memsync.util.records import dataclass

ChangeKind = Literal["added", "modified", "deleted"]

# Files that must never be committed: memsync's config and half-written editor/temp files.
EXCLUDES = """\
# memsync: local configuration, never committed
/.vm0/
# memsync: editor swap files and write-then-rename temp files are never committed half-written
*.swp
*.swo
*.swx
.*.sw?
*~
.#*
\\#*#
4913
.tmp.*
*.tmp
.memsync-*
"""
MADE_LEDGER = "memsync-made"
_EXCLUDE_MARK = "# memsync: local configuration, never committed"
_OWN_NAMES = tuple(line.replace("\\", "") for line in EXCLUDES.splitlines()
                   if line and not line.startswith(("#", "/")))


def own_exclude(path: str) -> bool:
    """Whether memsync's own exclude rules (EXCLUDES) hide `path`: those are not news to report."""
    import fnmatch

    path = path.rstrip("/")
    if path == ".vm0" or path.startswith(".vm0/"):
        return True
    name = path.rsplit("/", 1)[-1]
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in _OWN_NAMES)


class UnstorablePath(RepoError):
    """libgit2 refuses a path in the index (`.git.`, `git~1`...): that file alone is kept out."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"cannot store {path}: {reason}")
        self.path = path
        self.reason = reason


@dataclass(frozen=True)
class WorkChange:
    path: str
    kind: ChangeKind


@dataclass(frozen=True)
class CommitInfo:
    oid: str
    parents: tuple[str, ...]
    message: str
    author_name: str
    author_email: str
    time: int
    offset: int

    @property
    def short(self) -> str:
        return self.oid[:8]


class GitRepo:
    """One memory's repository. Methods assume the caller holds the memory's lock."""

    def __init__(self, repo: pygit2.Repository, root: Path) -> None:
        self._repo = repo
        self.root = root
        self._stats_memo: dict[str, tuple[int, int]] = {}
        self.nested: list[str] = []  # directories with their own .git, seen by the last scan
        self.ignored: list[str] = []  # untracked files and dirs ("dir/") hidden by ignore rules, same scan
        self.object_bound = packguard.bound()  # the largest object a fetch may make (the memory's max_file_size)
        self.unhidden: list[str] = []  # new files only a .gitignore the operator's rules leave out hides: taken
        self.unhidden_flags: list[indexflags.Hiding] = []  # index flags the last full scan cleared
        self._stats_versions: dict[str, tuple[int, int]] | None = None
        self._index_dirty = False  # staged or unstaged since the last scan wrote the index
        # HEAD's id when the last scan found index and work tree equal to it (nothing staged since)
        self._matches_head: str | None = None
        self._held: dict[str, str] | None = None  # held_back(), re-read when the file changes
        self._held_stamp: tuple[int, int, int] | None = None
        self.made: set[str] = set()  # commits this process made (see git/ownership.py)
        # Whether a change tracker may narrow this repository's scans (git/hints.py). Off for
        # commands that overwrite or rewrite files on the strength of a scan (restore, revert,
        # redact): a change inotify could not see would be overwritten unsaved.
        self.narrow = True
        self._index: pygit2.Index | None = None

    @property
    def reader(self) -> pygit2.Repository:
        """The handle existing objects are read through."""
        return self._repo

    @property
    def index(self) -> pygit2.Index:
        """The repository's index. libgit2 keeps one per repository, parsed from disk once and
        re-read by `read(force=False)` only when the file changed (another process, git); each
        `Repository.index` made a new wrapper of it (12 in a push), so one wrapper serves the
        command. Nothing here swaps the repository's index for another. An early walk still
        refreshing the index is let finish first (git/earlyscan.py)."""
        if self._index is None:
            earlyscan.wait()
            self._index = self._repo.index
        return self._index

    # -- opening ---------------------------------------------------------------------------
    @classmethod
    def open(cls, root: Path) -> GitRepo:
        if not (root / ".git").exists():
            raise RepoError(f"{root} has no git repository", "run `memsync init` in it")
        try:
            repo = engine.repository(root / ".git")
        except pygit2.GitError as exc:
            raise open_refusal(exc, root) from exc
        workdir = repo.workdir
        if workdir is None or Path(workdir).resolve() != root.resolve():
            # `core.worktree` (or `core.bare`) would make every checkout write somewhere else.
            if workdir is None:
                raise RepoError(f"the repository in {root} says it has no work tree (core.bare); refusing to use it",
                                f"if that is a mistake: git -C {root} config core.bare false")
            raise RepoError(f"the repository in {root} puts its work tree at {workdir.rstrip('/')} "
                            "(core.worktree); refusing to use it",
                            f"if that is a mistake: git -C {root} config --unset core.worktree")
        return cls(repo, root)

    @classmethod
    def bare(cls, path: Path, *, create: bool = False) -> GitRepo:
        """A bare repository (a hub on this machine, a cache): opened, or created first when
        `create` and there is none. libgit2's refusals come out as pygit2.GitError for the
        caller's transport.translate (which knows the hub)."""
        if create and not (path / "HEAD").exists():
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            return cls(engine.create(path, bare=True), path)
        return cls(engine.repository(path), path)

    def refs_under(self, prefix: str) -> list[tuple[str, str]]:
        """(ref name, target id) of every direct reference whose name starts with `prefix`."""
        found = []
        for name in self._repo.references:
            if name.startswith(prefix):
                target = self._repo.references[name].target
                if isinstance(target, pygit2.Oid):
                    found.append((name, str(target)))
        return found

    @classmethod
    def init(cls, root: Path, branch: str) -> GitRepo:
        if (root / ".git").exists():
            return cls.open(root)
        try:
            repo = engine.create(root, bare=False, initial_head=branch)
        except pygit2.GitError as exc:
            from memsync.git.diskfull import explain

            raise explain(exc, [root]) or RepoError(f"cannot create a repository in {root}: {exc}") from exc
        return cls(repo, root)

    @property
    def is_shallow(self) -> bool:
        """Cloned without its older versions (`.git/shallow`)."""
        return bool(self._repo.is_shallow)

    def forget_cached(self) -> None:
        """Drop libgit2's caches: commits read while the repository was shallow are cached without
        their parents, and must be read again once it is not."""
        self._repo.free()

    def head_target(self) -> str | None:
        """The branch HEAD names (`refs/heads/...`), None when HEAD is detached or missing."""
        ref = self._repo.references.get("HEAD")
        target = ref.target if ref is not None else None
        return target if isinstance(target, str) else None

    @property
    def stats_memo(self) -> dict[str, tuple[int, int]]:
        """(files, bytes) of the trees counted by this process, by tree id (hubtree.tree_totals)."""
        return self._stats_memo

    @property
    def git_dir(self) -> Path:
        return Path(self._repo.path)

    def ensure_layout(self, branch: str, remote_url: str | None) -> list[str]:
        """Exclude memsync's files, put HEAD on the memory branch, point `origin` at the hub
        (unless the repository already has an `origin` of its own: memsync never needs it).
        Returns what was done to an existing repository that its owner should know."""
        notes: list[str] = []
        exclude = self.git_dir / "info" / "exclude"
        current = exclude.read_text(encoding="utf-8") if exclude.exists() else ""
        if _EXCLUDE_MARK not in current:
            exclude.parent.mkdir(parents=True, exist_ok=True)
            sep = "" if not current or current.endswith("\n") else "\n"
            exclude.write_text(current + sep + EXCLUDES, encoding="utf-8")
        ref = f"refs/heads/{branch}"
        if self._repo.head_is_unborn:
            self._repo.set_head(ref)
        elif self._repo.references.get("HEAD").target != ref:  # type: ignore[union-attr]
            if ref not in self._repo.references:
                previous = self._repo.head.shorthand
                self._repo.references.create(ref, self._repo.head.target)  # adopt existing history
                notes.append(f"adopted the history of branch {previous!r} as {branch!r} (HEAD is now on "
                             f"{branch!r}; {previous!r} is unchanged)")
            self._repo.set_head(ref)
        config = self._repo.config
        if remote_url:
            owned = _config_value(config, "remote.origin.url")
            if owned is None or owned == remote_url or _config_value(config, "memsync.origin") == "managed":
                config["remote.origin.url"] = remote_url
                config["remote.origin.fetch"] = f"+refs/heads/{branch}:refs/remotes/origin/{branch}"
                config[f"branch.{branch}.remote"] = "origin"
                config[f"branch.{branch}.merge"] = ref
                config["memsync.origin"] = "managed"
            else:
                notes.append(f"kept this repository's own remote 'origin' ({safe_url(owned)}); memsync syncs "
                             "with its hub directly")
        return notes

    def check_state(self, branch: str) -> None:
        state = self._repo.state()
        if state != RepositoryState.NONE:
            raise RepoError(
                f"a git {state.name.lower().replace('_', ' ')} is in progress in {self.root}",
                "finish it with `git commit`, or abandon it (`git merge --abort`), then retry",
            )
        head = self._repo.references.get("HEAD")
        target = head.target if head is not None else None
        if target != f"refs/heads/{branch}":
            raise RepoError(f"HEAD is on {target!s}, but this memory lives on {branch}",
                            self._branch_hint(str(target), branch))

    def _branch_hint(self, target: str, branch: str) -> str:
        if self._repo.references.get(f"refs/heads/{branch}") is not None:
            return f"switch back with `git switch {branch}`"
        # No such branch here: storage.yaml was renamed (or `branch:` changed) after this clone.
        current = target.removeprefix("refs/heads/")
        if target.startswith("refs/heads/"):
            return (f"storage.yaml now names {branch} but this repository holds {current}: put the old name back, "
                    f"or rename the branch with `git branch -m {current} {branch}` (the hub keeps {current})")
        return "check out the memory's branch again, or clone the memory anew with `memsync clone`"

    # -- identity -----------------------------------------------------------------------------
    def operator_signature(self) -> pygit2.Signature:
        try:
            return self._repo.default_signature
        except (KeyError, pygit2.GitError):
            name, email = operator_identity()
            return pygit2.Signature(name, email)

    # -- refs -----------------------------------------------------------------------------------
    def ref_oid(self, ref: str) -> str | None:
        found = self._repo.references.get(ref)
        if found is None:
            return None
        return str(found.resolve().target)

    def has_object(self, oid: str) -> bool:
        """Whether the object database holds `oid` (loose or packed)."""
        try:
            return oid in self._repo
        except (ValueError, pygit2.GitError):
            return False

    def set_ref(self, ref: str, oid: str, message: str) -> None:
        self._repo.references.create(ref, pygit2.Oid(hex=oid), force=True)

    def delete_ref(self, ref: str) -> None:
        found = self._repo.references.get(ref)
        if found is not None:
            found.delete()

    def reset_branch(self, branch: str, oid: str | None) -> None:
        """HEAD back on `branch` at `oid`, the index at its tree; the work tree is left alone
        (a read-only memory's undo: whatever the command committed or staged there is dropped)."""
        ref = f"refs/heads/{branch}"
        self._matches_head = None
        if oid is not None:
            self._repo.references.create(ref, pygit2.Oid(hex=oid), force=True)
        self._repo.set_head(ref)
        index = self.index
        if oid is None:
            index.clear()
        else:
            index.read_tree(self._repo[oid].peel(pygit2.Commit).tree)
        index.write()

    def head_oid(self) -> str | None:
        if self._repo.head_is_unborn:
            return None
        return str(self._repo.head.target)

    # -- the scan ------------------------------------------------------------------------------
    def scan(self, write_index: bool = True, full: bool = False, tree_ignores: bool = True,
             meanwhile: Callable[[], None] | None = None) -> list[WorkChange]:
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
        self.unhidden_flags = self._clear_hiding_flags() if full else []
        early = self._early_walk(flags, meanwhile)  # (before self.index: the walk's rule)
        index = self.index
        index.read(force=False)
        head = None if self._repo.head_is_unborn else self._repo.head.peel(pygit2.Commit).tree
        candidates: set[str] = set()
        staged_same = False  # the index holds exactly HEAD's tree
        if head is not None:
            staged_same = _index_tree_cached(index) == head.id
            if not staged_same:
                for delta in index.diff_to_tree(head).deltas:
                    candidates.update((delta.old_file.path, delta.new_file.path))
        else:
            candidates.update(entry.path for entry in index)
        staged = bool(candidates)  # the index differs from HEAD
        ignored: list[str] = []
        deltas = early if early is not None else self._workdir_deltas(index, flags, full)
        local = None
        unhidden: list[str] = []
        for delta in deltas:
            if delta.status == DeltaStatus.IGNORED:
                path = delta.new_file.path
                if own_exclude(path):
                    continue
                if local is None:
                    from memsync.git.localignores import LocalIgnores

                    local = LocalIgnores(self._repo, tree_rules=tree_ignores)
                if local.hides(path):
                    ignored.append(path)
                elif path.endswith("/"):
                    found, hidden = local.files_under(self.root, path, index)
                    unhidden += [p for p in found if not own_exclude(p)]
                    ignored += [p for p in hidden if not own_exclude(p)]
                else:
                    unhidden.append(path)
                continue
            candidates.update((delta.old_file.path, delta.new_file.path))
        self.ignored = sorted(ignored)
        self.unhidden = sorted(unhidden)
        candidates.update(unhidden)
        # (a refreshed entry was written by libgit2 from inside the diff: workdiff.py)
        if write_index and head is not None and not staged and _index_tree_cached(index) != head.id:
            # The index holds HEAD's tree, but its tree cache does not say so (a refreshed entry
            # or a checkout drops its folders from it): rebuild it from HEAD's trees, all
            # present, and keep it, so the next scan compares the index with HEAD for free.
            # Not when the caller commits next (write_index=False): a commit rebuilds it anyway,
            # and a pull's checkout would drop it again at once.
            with contextlib.suppress(pygit2.GitError, OSError):
                _write_tree(index)
                self._index_dirty = True  # commit_index writes it (again, and reports a failure)
        if write_index and self._index_dirty:
            with contextlib.suppress(pygit2.GitError):
                index.write()
                self._index_dirty = False
        self._matches_head = self.head_oid() if head is not None and not candidates else None
        # libgit2 reports a directory holding its own .git as one untracked "dir/" entry
        self.nested = sorted(p.rstrip("/") for p in candidates if p.endswith("/"))
        changes: list[WorkChange] = []
        held = self.held_back() if candidates else {}
        for path in sorted(candidates):
            entry = None if head is None else file_entry(head, path)
            on_disk = _is_file_or_link(self.root / path)
            if entry is not None and on_disk:
                changes.append(WorkChange(path, "modified"))
            elif entry is not None and held.get(path) == str(entry.id):  # held back: not a deletion
                if _keep_entry(index, path, entry):
                    self._index_dirty = True
            elif entry is not None:
                changes.append(WorkChange(path, "deleted"))
            elif on_disk:
                changes.append(WorkChange(path, "added"))
        return changes

    def _clear_hiding_flags(self) -> list[indexflags.Hiding]:
        """Clear assume-unchanged and skip-worktree on every index entry (git/indexflags.py): a
        scan that must see every change (an agent's record) cannot let one look away. The
        entries keep their blob and mode; their stat data goes, so the scan hashes those files."""
        try:
            with open(self.git_dir / "index", "rb") as fh:
                found = indexflags.hiding(fh.read())
        except OSError:
            return []
        if not found:
            return []
        index = self.index
        index.read(force=False)
        for flagged in found:
            entry = _entry(index, flagged.path)
            if entry is not None:
                index.remove(flagged.path)
                index.add(pygit2.IndexEntry(flagged.path, entry.id, entry.mode))
        self._index_dirty = True
        self._matches_head = None
        return found

    def _early_walk(self, flags: DiffOption,
                    meanwhile: Callable[[], None] | None = None) -> list[pygit2.DiffDelta] | None:
        """The deltas of the walk git/earlyscan.py began under the lock, if this is the scan it
        stands for: this repository's first look at its index (its rule, in that module)."""
        deltas = earlyscan.take(self.root, int(flags), meanwhile)
        if hints.source is not None or self._index is not None or self._index_dirty:
            return None
        return deltas

    def _workdir_deltas(self, index: pygit2.Index, flags: DiffOption, full: bool) -> list[pygit2.DiffDelta]:
        """The index-to-work-tree diff: of the paths a change tracker names, when one has a
        baseline this index can use (git/hints.py) and the caller allows it, else of everything.
        Its result is handed back as the next baseline."""
        link = hints.source
        root = os.path.realpath(self.root)
        since = None if link is None or self._repo.head_is_unborn else link.since(root)
        if link is None or since is None:
            return diff_to_workdir(self._repo, index, flags)
        cached = _index_tree_cached(index)
        if cached is None:  # the cache lost folders (a refresh, a commit not written back): rebuild it
            with contextlib.suppress(pygit2.GitError, OSError):
                cached = _write_tree(index)
                self._index_dirty = True  # and keep it, so the next scan has it for free
        tree = None if cached is None else str(cached)
        stamp = hints.fingerprint(self.git_dir, int(flags), self._config_paths("core.excludesFile",
                                                                              "core.attributesFile"))
        paths = None if full or not self.narrow else hints.narrowing(since, tree, stamp)
        if paths is not None and tree is not None and since.tree is not None and tree != since.tree:
            try:
                from memsync.git.treediff import paths_between

                moved = [p if kind != "deleted" else _first_gone(self._repo, tree, p)
                         for p, kind in paths_between(self._repo, since.tree, tree)]
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
        deltas = diff_to_workdir(self._repo, index, flags, asked)
        if tree is not None:
            found = {p for d in deltas for p in (d.old_file.path, d.new_file.path)}
            link.settled(root, since.token, tree, stamp, sorted(found), asked is None)
        return deltas

    def config_values(self, *keys: str) -> tuple[str | None, ...]:
        """These values of the repository's configuration (None where unset)."""
        return self._config_paths(*keys)

    def _config_paths(self, *keys: str) -> tuple[str | None, ...]:
        """These config values (None where unset), from one reading of the configuration."""
        try:
            config = self._repo.config
        except pygit2.GitError:
            return tuple(None for _ in keys)
        found: list[str | None] = []
        for key in keys:
            try:
                found.append(str(config[key]))
            except (KeyError, ValueError, pygit2.GitError):
                found.append(None)
        return tuple(found)

    # -- files held back from the work tree ---------------------------------------------------
    def held_back(self) -> dict[str, str]:
        """Paths of the current version not written to the work tree because their blob is over
        max_file_size (path -> blob id). Their index entry keeps the version's blob, and a scan
        does not count them as deleted, so later commits keep the hub's file."""
        target = self.git_dir / _HELD_FILE
        try:
            st = target.stat()
            stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
        except OSError:
            stamp = None
        if stamp != self._held_stamp or self._held is None:  # another process may have changed it
            self._held, self._held_stamp = {}, stamp
            with contextlib.suppress(OSError, ValueError, AttributeError):
                import json  # not every command reads or writes JSON: imported where it does
                loaded = json.loads(target.read_text(encoding="utf-8"))
                self._held = {str(path): str(oid) for path, oid in loaded.items()}
        return dict(self._held)

    def set_held_back(self, held: dict[str, str]) -> None:
        target = self.git_dir / _HELD_FILE
        self._held = None
        if not held:
            target.unlink(missing_ok=True)
            return
        import json
        atomic_write(target, json.dumps(held, sort_keys=True).encode("utf-8"))

    def head_blob(self, path: str) -> bytes | None:
        """The current version's bytes at `path` (the guard compares them); None for a file
        held back for its size, which is never read into memory."""
        repo = self._repo
        if repo.head_is_unborn or path in self.held_back():
            return None
        tree = repo.head.peel(pygit2.Commit).tree
        try:
            obj = tree[path]
        except KeyError:
            return None
        return obj.data if isinstance(obj, pygit2.Blob) else None

    def is_link(self, commit_oid: str, path: str) -> bool:
        entry = file_entry(self._repo[commit_oid].peel(pygit2.Commit).tree, path)
        return entry is not None and entry.filemode == FileMode.LINK

    def path_in(self, commit_oid: str, path: str) -> bool:
        tree = self._repo[commit_oid].peel(pygit2.Commit).tree
        return _in_tree(tree, path)

    # -- committing ----------------------------------------------------------------------------
    def stage(self, path: str, data: bytes, mode: int, st: os.stat_result | None = None) -> None:
        """Stage `data` at `path`. `st`: the file's stat when `data` was read (see
        snapshot._settled), so the next scan trusts the entry instead of re-hashing the file."""
        self.stage_stored(path, self.store_blob(path, data), mode, None if st is None else stat_stamp(st))

    def store_blob(self, path: str, data: bytes) -> str:
        """Write `data` (the content checked for `path`) into the object database, not yet into
        the index; its id. A snapshot stores each file as soon as it is checked, so that it holds
        one file's bytes at a time, not the whole change's."""
        try:
            return str(self._repo.create_blob(data))
        except (pygit2.GitError, OSError) as exc:
            raise self._write_failed(f"cannot store {path}", exc, len(data)) from exc

    def stage_stored(self, path: str, oid: str, mode: int, stamp: bytes | None = None) -> None:
        """Stage at `path` a blob `store_blob` wrote; `stamp`: `stat_stamp` of the stat `stage`
        takes."""
        self._index_dirty = True
        self._matches_head = None
        try:
            blob = pygit2.Oid(hex=oid)
            entry = (pygit2.IndexEntry(path, blob, FileMode(mode)) if stamp is None
                     else _StatEntry(path, blob, mode, stamp))
            self.index.add(entry)
        except (pygit2.GitError, OSError) as exc:
            if isinstance(exc, pygit2.GitError) and "invalid path" in str(exc):
                raise UnstorablePath(path, str(exc).splitlines()[0]) from exc
            raise self._write_failed(f"cannot store {path}", exc) from exc

    def _write_failed(self, what: str, exc: Exception, needed: int = 0) -> RepoError:
        """A failed object/index write (disk full, read-only file system) as a clear error.
        libgit2 sometimes reports a stale message then ("failed to find pack entry" once the
        object it was writing is cut short and removed), so the free space is checked too,
        against what was being written (`needed` bytes)."""
        try:
            st = os.statvfs(self.git_dir)
            free = st.f_bavail * st.f_frsize
        except OSError:
            free = -1
        text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        full = 0 <= free < max(1024 * 1024, needed) or "no space left" in text.lower()
        reason = "the disk is full" if full else text
        return RepoError(f"{what} in {self.git_dir}: {reason}",
                         "free some disk space (or fix permissions) and run the command again; "
                         "nothing was committed and your files are untouched")

    def unstage(self, path: str) -> None:
        self._index_dirty = True
        self._matches_head = None
        index = self.index
        with contextlib.suppress(OSError, pygit2.GitError):
            index.remove(path)
        with contextlib.suppress(OSError, pygit2.GitError):
            index.remove_directory(path)

    def commit_index(self, branch: str, message: str, author: tuple[str, str] | None,
                     allow_empty: bool = False,
                     describe: Callable[[str, str | None], list[tuple[str, str]]] | None = None) -> str | None:
        """Write the index as a commit on `branch`; None if it equals the parent's tree.
        `author` is (name, email); None means the operator. `describe(tree, parent's tree)`:
        trailers added to `message` once the tree is known (what the version changes)."""
        index = self.index
        if self._matches_head is not None and not allow_empty and self._matches_head == self.head_oid():
            # the scan found nothing to commit and nothing was staged since: the tree is HEAD's
            try:
                if self._index_dirty:
                    index.write()
                    self._index_dirty = False
            except (pygit2.GitError, OSError) as exc:
                raise self._write_failed("cannot write the commit", exc) from exc
            return None
        try:
            tree = _write_tree(index)
            parent = self.head_oid()
            if parent is not None and not allow_empty and self._repo[parent].peel(pygit2.Commit).tree_id == tree:
                if self._index_dirty:  # else the scan just wrote it
                    index.write()
                    self._index_dirty = False
                return None
            if self._index_dirty or self._matches_head is None or self._matches_head != parent:
                index.write()  # (an empty commit, e.g. a run's record, leaves an unchanged index alone)
                self._index_dirty = False
            if describe is not None:
                parent_tree = None if parent is None else str(self._repo[parent].peel(pygit2.Commit).tree_id)
                message = trailer_append(message, describe(str(tree), parent_tree))
            committer = self.operator_signature()
            signature = pygit2.Signature(*author) if author else committer
            parents = [pygit2.Oid(hex=parent)] if parent else []
            oid = self._repo.create_commit(f"refs/heads/{branch}", signature, committer, message, tree,
                                          parents)
        except (pygit2.GitError, OSError) as exc:
            raise self._write_failed("cannot write the commit", exc) from exc
        self.note_made(str(oid))
        return str(oid)

    def reparent(self, oid: str, parents: list[str]) -> str:
        """The same commit (tree, author, committer, message) with other parents; refs untouched.
        Used only for commits that never left this repository."""
        c = self._repo[oid].peel(pygit2.Commit)
        try:
            new = self._repo.create_commit(None, c.author, c.committer, c.message, c.tree_id,
                                          [pygit2.Oid(hex=p) for p in parents])
        except (pygit2.GitError, OSError) as exc:
            raise self._write_failed("cannot write the commit", exc) from exc
        return str(new)

    def note_made(self, oid: str) -> None:
        """Record a commit memsync made: in this process, and in .git/memsync-made for later
        commands (`push` tells them from commits it did not make)."""
        self.made.add(oid)
        with contextlib.suppress(OSError), open(self.git_dir / MADE_LEDGER, "a", encoding="ascii") as fh:
            fh.write(oid + "\n")

    def index_tree(self) -> str:
        """The tree the index would commit now."""
        try:
            return str(_write_tree(self.index))
        except (pygit2.GitError, OSError) as exc:
            raise self._write_failed("cannot write the tree", exc) from exc

    # -- reading history -----------------------------------------------------------------------
    def commit_info(self, oid: str) -> CommitInfo:
        c = self._repo[oid].peel(pygit2.Commit)
        return CommitInfo(str(c.id), tuple(str(p) for p in c.parent_ids), c.message,
                          c.author.name, c.author.email, c.commit_time, c.commit_time_offset)

    def walk(self, tip: str, hide: str | None = None) -> Iterator[CommitInfo]:
        """History from `tip`, newest first, without what `hide` can reach."""
        walker = self._repo.walk(pygit2.Oid(hex=tip), pygit2.enums.SortMode.NONE)  # streamed: TIME reads all first
        if hide is not None:
            walker.hide(pygit2.Oid(hex=hide))
        for c in walker:
            yield CommitInfo(str(c.id), tuple(str(p) for p in c.parent_ids), c.message,
                             c.author.name, c.author.email, c.commit_time, c.commit_time_offset)

    def ahead_behind(self, local: str, upstream: str) -> tuple[int, int]:
        a, b = self._repo.ahead_behind(pygit2.Oid(hex=local), pygit2.Oid(hex=upstream))
        return int(a), int(b)

    def merge_base(self, one: str, two: str) -> str | None:
        base = self._repo.merge_base(pygit2.Oid(hex=one), pygit2.Oid(hex=two))
        return None if base is None else str(base)

    def is_ancestor(self, ancestor: str, descendant: str) -> bool:
        if ancestor == descendant:
            return True
        return bool(self._repo.descendant_of(pygit2.Oid(hex=descendant), pygit2.Oid(hex=ancestor)))

    def tree_counts(self, parent_tree: str | None, tree: str) -> tuple[int, int, int, list[str]]:
        """What `tree` changes against `parent_tree` (None: a first version), as `log` shows it:
        files changed, bytes added, bytes removed, conflict copies made (treediff.counts, taken as
        the walk goes: treediff.tally)."""
        from memsync.git import treediff

        old = None if parent_tree is None else pygit2.Oid(hex=parent_tree)
        return treediff.tally(self._repo, old, pygit2.Oid(hex=tree))

    def tree_stats(self, commit_oid: str) -> tuple[int, int]:
        """(files, bytes) of a version, reading object headers only. Versions already counted
        are remembered in .git/memsync-tree-stats.json; a new one is its nearest counted
        ancestor adjusted by a tree diff, so the cost follows what changed, not the memory's size."""
        cache = self._stats_cache()
        if commit_oid in cache:
            return cache[commit_oid]
        repo = self._repo
        commit = repo[commit_oid].peel(pygit2.Commit)
        stats = _stats_from_ancestor(repo, commit, cache)
        if stats is None:
            stats = tree_totals(repo, commit.tree, self._stats_memo, version=commit_oid)
        cache[commit_oid] = stats
        self._save_stats_cache(cache)
        return stats

    def _stats_cache(self) -> dict[str, tuple[int, int]]:
        if self._stats_versions is None:
            self._stats_versions = {}
            with contextlib.suppress(OSError, ValueError, TypeError):
                import json
                loaded = json.loads(read_private(self.git_dir / _STATS_FILE))
                self._stats_versions = {str(k): (int(v[0]), int(v[1])) for k, v in loaded.items()}
        return self._stats_versions

    def _save_stats_cache(self, cache: dict[str, tuple[int, int]]) -> None:
        keep = dict(list(cache.items())[-_STATS_KEEP:])
        with contextlib.suppress(OSError):  # only a cache: a read-only hub just recounts
            import json
            write_private(self.git_dir / _STATS_FILE, json.dumps({k: list(v) for k, v in keep.items()}).encode())

    def tracked_paths(self) -> list[str]:
        return [entry.path for entry in self.index]

    def tracked_paths_containing(self, needle: str) -> list[str]:
        """Tracked paths containing `needle`. Iterating a 100k-entry index in Python takes
        ~1.5 s, so the index file is searched for the bytes first: paths are stored whole (or,
        in index v4, share a prefix with an earlier entry), so no match means no such path."""
        index_file = self.git_dir / "index"
        try:
            raw = index_file.read_bytes()
        except OSError:
            raw = None
        if raw is not None and needle.encode() not in raw and not any(self.git_dir.glob("sharedindex.*")):
            return []
        return [path for path in self.tracked_paths() if needle in path]

    def tree_changes(self, old: str | None, new: str) -> dict[str, str | None]:
        """Paths whose content differs between two versions: path -> blob id in `new` (None if
        gone). Compares trees only; the work tree is not read."""
        new_tree = self._repo[new].peel(pygit2.Commit).tree
        if old is None:
            diff = new_tree.diff_to_tree(swap=True)
        else:
            diff = self._repo[old].peel(pygit2.Commit).tree.diff_to_tree(new_tree)
        found: dict[str, str | None] = {}
        for delta in diff.deltas:
            found.setdefault(delta.old_file.path, None)
            if delta.status != pygit2.enums.DeltaStatus.DELETED:
                found[delta.new_file.path] = str(delta.new_file.id)
        return found


_STATS_FILE = "memsync-tree-stats.json"
_HELD_FILE = "memsync-held-back.json"
_STATS_KEEP = 256
_STATS_MAX_HOPS = 64


def _stats_from_ancestor(repo: pygit2.Repository, commit: pygit2.Commit,
                         cache: dict[str, tuple[int, int]]) -> tuple[int, int] | None:
    """Stats of `commit` from the nearest counted first-parent ancestor plus a tree diff."""
    base = commit
    for _ in range(_STATS_MAX_HOPS):
        if not base.parent_ids:
            return None
        base = repo[base.parent_ids[0]].peel(pygit2.Commit)
        if str(base.id) in cache:
            break
    else:
        return None
    files, size = cache[str(base.id)]
    for delta in base.tree.diff_to_tree(commit.tree).deltas:
        for side, sign in ((delta.old_file, -1), (delta.new_file, 1)):
            if side.mode in (0, int(FileMode.TREE), int(FileMode.COMMIT)) or side.id.raw == _ZERO_OID:
                continue
            files += sign
            size += sign * repo.odb.read_header(side.id)[1]
    return files, size


_ZERO_OID = bytes(20)
# ctime and mtime (ns), rdev, inode, uid, gid, size: what an index entry records of a file's stat
_STAMP = struct.Struct("<qqQQQQQ")


def stat_stamp(st: os.stat_result) -> bytes:
    """The stat fields an index entry records, packed: ~90 bytes where an os.stat_result holds
    ~600, for a snapshot that keeps one per file of a 100,000-file first push until it stages them."""
    return _STAMP.pack(st.st_ctime_ns, st.st_mtime_ns, st.st_rdev, st.st_ino, st.st_uid, st.st_gid, st.st_size)


class _StatEntry(pygit2.IndexEntry):
    """An index entry with the file's stat data filled in as libgit2 itself records it
    (git_index_entry__init_from_stat). pygit2's IndexEntry carries none, and an entry without
    it is re-hashed by every scan until one refreshes it (8-12 s once after a 100,000-file
    first push). Relies on pygit2 1.21's IndexEntry._to_c; any surprise there falls back to a
    plain entry, which is only slower."""

    def __init__(self, path: str, oid: pygit2.Oid, mode: int, stamp: bytes) -> None:
        super().__init__(path, oid, FileMode(mode))
        self.stamp = stamp

    def _to_c(self) -> tuple[object, object]:
        centry, keep = super()._to_c()
        try:
            ctime_ns, mtime_ns, rdev, ino, uid, gid, size = _STAMP.unpack(self.stamp)
            u32 = 0xFFFFFFFF
            centry.ctime.seconds = _int32(ctime_ns // 1_000_000_000)
            centry.ctime.nanoseconds = ctime_ns % 1_000_000_000
            centry.mtime.seconds = _int32(mtime_ns // 1_000_000_000)
            centry.mtime.nanoseconds = mtime_ns % 1_000_000_000
            centry.dev = rdev & u32
            centry.ino = ino & u32
            centry.uid = uid & u32
            centry.gid = gid & u32
            centry.file_size = size & u32
        except (AttributeError, TypeError, OverflowError, struct.error):
            return super()._to_c()
        return centry, keep


def open_refusal(exc: pygit2.GitError, root: Path) -> RepoError:
    """libgit2's refusal to open a repository, in git's words when it is about ownership."""
    text = str(exc)
    if "not owned by current user" in text:
        found = re.search(r"'([^']+)'", text)
        where = found.group(1).rstrip("/") if found else str(root)
        return RepoError(f"detected dubious ownership in repository at '{where}' (owned by another user)",
                         "if you trust the repository and its .git/config, add an exception: "
                         f"git config --global --add safe.directory {where}")
    return RepoError(f"cannot open the repository in {root}: {exc}", "check .git is intact (`git fsck`)")


def _int32(value: int) -> int:
    """C's (int32_t) cast, as libgit2 stores seconds."""
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def _config_value(config: pygit2.Config, key: str) -> str | None:
    try:
        return str(config[key])
    except KeyError:
        return None


def file_entry(tree: pygit2.Tree, path: str) -> pygit2.Object | None:
    """The tree entry of the file (or symlink) at `path`; None if absent or not a file."""
    try:
        entry = tree[path]
    except KeyError:
        return None
    return None if entry.filemode in (FileMode.TREE, FileMode.COMMIT) else entry


def _entry(index: pygit2.Index, path: str) -> pygit2.IndexEntry | None:
    try:
        return index[path]
    except KeyError:
        return None


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


_STRICT_LOCK = threading.Lock()


def _write_tree(index: pygit2.Index) -> pygit2.Oid:
    """`index.write_tree()` without libgit2's strict object creation, which looks every entry
    of each rebuilt folder up in the object database again (~10 ms for 10 changed files in a
    10,000-file memory, 1 ms without). Each entry was checked when it entered the index:
    git_index_add checks its object exists, and the rest come from HEAD, a checkout or a
    read of the index git wrote."""
    with _STRICT_LOCK:
        pygit2.option(Option.ENABLE_STRICT_OBJECT_CREATION, 0)
        try:
            return index.write_tree()
        finally:
            pygit2.option(Option.ENABLE_STRICT_OBJECT_CREATION, 1)


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


def _index_tree_cached(index: pygit2.Index) -> pygit2.Oid | None:
    """The tree the index holds, if its tree cache (the TREE extension) already knows it: asked
    of an empty repository, libgit2 answers from the cache and writes nothing, and fails
    (None) where it would have to build a tree."""
    try:
        return index.write_tree(pygit2.Repository())
    except (pygit2.GitError, ValueError, TypeError):
        return None


def _in_tree(tree: pygit2.Tree, path: str) -> bool:
    return file_entry(tree, path) is not None


def _is_file_or_link(path: Path) -> bool:
    import stat

    try:
        mode = path.lstat().st_mode
    except OSError:
        return False
    return stat.S_ISREG(mode) or stat.S_ISLNK(mode)


def file_blob_id(path: Path) -> str | None:
    """The blob id git would give the file (or symlink) at `path` now; None if absent."""
    try:
        if path.is_symlink():
            return str(pygit2.hash(os.fsencode(os.readlink(path))))
        return str(pygit2.hashfile(str(path)))
    except (OSError, pygit2.GitError):
        return None


def tree_blob_id(root: Path, rel: str) -> str | None:
    """file_blob_id for `rel` under a work tree someone else may be writing: reached through
    folder descriptors (memsync.dirfd), never through a symlink; None if absent or not a file."""
    import stat

    from memsync.util.dirfd import Tree

    try:
        with Tree(root) as tree:
            if stat.S_ISLNK(tree.lstat(rel).st_mode):
                return str(pygit2.hash(tree.readlink(rel)))
            got = tree.read(rel, 1 << 40)
    except OSError:
        return None
    return None if got is None else str(pygit2.hash(got[0]))


LINK_MODE = int(FileMode.LINK)  # git's mode for a symlink: the blob holds its target


def file_mode(st: os.stat_result) -> int:
    import stat

    if stat.S_ISLNK(st.st_mode):
        return int(FileMode.LINK)
    if st.st_mode & 0o111:
        return int(FileMode.BLOB_EXECUTABLE)
    return int(FileMode.BLOB)


class IgnoreRules:
    """git's ignore rules for a work tree, with its own repository handle (thread-safe use)."""

    def __init__(self, root: Path) -> None:
        self._repo = engine.repository(root / ".git")
        self._lock = threading.Lock()

    def is_ignored(self, rel: str) -> bool:
        with self._lock:
            try:
                return bool(self._repo.path_is_ignored(rel))
            except pygit2.GitError:
                return False
