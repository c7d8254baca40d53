"""A memory's local repository: open it, read and move refs, stage exact bytes, commit.

Memories are ordinary git work trees, so plain `git log` / `git diff` keep working; memsync keeps
its local branch named like the hub branch (`memory/research`) with `origin` configured for it.
The work-tree scan is scan.py's; reading versions and their ancestry, versions.py's.
"""

from __future__ import annotations

import contextlib
import os
import re
import struct
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Literal

import pygit2
from pygit2.enums import FileMode, Option, RepositoryState

from memsync.errors import RepoError
from memsync.git import earlyscan, engine, packcheck
from memsync.git.hub import safe_url
from memsync.git.trailers import append as trailer_append
from memsync.git.versions import VersionReading
from memsync.util.fs import atomic_write
from memsync.util.names import operator_identity
from memsync.util.records import recordclass

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




class UnstorablePath(RepoError):
    """libgit2 refuses a path in the index (`.git.`, `git~1`...): that file alone is kept out."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"cannot store {path}: {reason}")
        self.path = path
        self.reason = reason


# Index entries past which a push or a repack lets go of the index first (GitRepo.let_go)
LET_GO_ABOVE = 10_000


@recordclass(frozen=True, slots=True)  # no __dict__: a first push holds one per file
class WorkChange:
    path: str
    kind: ChangeKind


class GitRepo(VersionReading):
    """One memory's repository. Methods assume the caller holds the memory's lock."""

    def __init__(self, repo: pygit2.Repository, root: Path) -> None:
        self._repo = repo
        self.root = root
        self._stats_memo: dict[str, tuple[int, int]] = {}
        self.object_bound = packcheck.bound()  # the largest object a fetch may make (the memory's max_file_size)
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

    def reopen(self) -> None:
        """A new libgit2 handle on the repository: libgit2 reads `.git/shallow` when it opens
        one and parses commits through it, so a handle opened before the file was written
        would give a shallow commit parents it does not have (fetchv2's clone writes it)."""
        self._index = None
        self._repo = engine.repository(self._repo.path)

    def let_go(self, above: int = LET_GO_ABOVE) -> None:
        """Let go of an index of more than `above` entries and of libgit2's caches before a pack
        is built (a push, a repack): their memory is given back (engine.for_packing), and the
        pack builder's peak does not come on top of it (docs/PERFORMANCE.md, figures). A smaller
        memory keeps them: the next scan would only parse the index again. `Repository.free()`
        drops them even while objects read through the handle are still held, and a new handle
        reads them again when needed (the freed one has also forgotten `.git/shallow`). An index
        with changes not yet written is kept."""
        if self._index_dirty or self._index is None or len(self._index) <= above:
            return
        self._repo.free()
        self.reopen()

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
            atomic_write(exclude, (current + sep + EXCLUDES).encode("utf-8"), keep_mode=True, durable=False)
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

    # -- what the scan (scan.py) keeps here --------------------------------------------------------
    @property
    def index_untouched(self) -> bool:
        """Nothing here has read, staged or changed the index yet (an early walk's rule)."""
        return self._index is None and not self._index_dirty

    def index_changed(self) -> None:
        """The index in memory differs from its file: commit_index (or the next scan) writes it."""
        self._index_dirty = True

    def write_changed_index(self) -> None:
        if self._index_dirty:
            with contextlib.suppress(pygit2.GitError):
                self.index.write()
                self._index_dirty = False

    def matched_head(self, head: str | None) -> None:
        """HEAD's id when a scan found the index and the work tree equal to it, else None."""
        self._matches_head = head

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
        snapshot._cacheable_stat), so the next scan trusts the entry instead of re-hashing the file."""
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
            tree = write_tree(index)
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
            return str(write_tree(self.index))
        except (pygit2.GitError, OSError) as exc:
            raise self._write_failed("cannot write the tree", exc) from exc

_HELD_FILE = "memsync-held-back.json"




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


def index_entry(index: pygit2.Index, path: str) -> pygit2.IndexEntry | None:
    try:
        return index[path]
    except KeyError:
        return None




_STRICT_LOCK = threading.Lock()


def write_tree(index: pygit2.Index) -> pygit2.Oid:
    """`index.write_tree()` without libgit2's strict object creation, which looks every entry
    of each rebuilt folder up in the object database again (most of the write's time:
    docs/PERFORMANCE.md). Each entry was checked when it entered the index:
    git_index_add checks its object exists, and the rest come from HEAD, a checkout or a
    read of the index git wrote."""
    with _STRICT_LOCK:
        pygit2.option(Option.ENABLE_STRICT_OBJECT_CREATION, 0)
        try:
            return index.write_tree()
        finally:
            pygit2.option(Option.ENABLE_STRICT_OBJECT_CREATION, 1)






def index_tree_cached(index: pygit2.Index) -> pygit2.Oid | None:
    """The tree the index holds, if its tree cache (the TREE extension) already knows it: asked
    of an empty repository, libgit2 answers from the cache and writes nothing, and fails
    (None) where it would have to build a tree."""
    try:
        return index.write_tree(pygit2.Repository())
    except (pygit2.GitError, ValueError, TypeError):
        return None


def _in_tree(tree: pygit2.Tree, path: str) -> bool:
    return file_entry(tree, path) is not None




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
