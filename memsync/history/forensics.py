"""log / diff / restore / revert: find the damage, see it, undo it (BRIEF story 4).

Functions return dataclasses and never print. restore and revert never rewrite history: they
write the files, commit exactly those files as the operator through the snapshot pipeline (so the
integrity guard and protect policies see them like any other change) and push like `push` does.

`run:<id>` means what that run itself changed: from the first parent of its first version to its
last version. When the run merged other versions in between (a checkpoint pushed to a hub that
had moved on), each of its own versions is replayed onto that base instead, so neither the diff
nor the revert of a run includes work it merged from others.
"""

from __future__ import annotations

import hashlib
import stat
from collections.abc import Iterable
from pathlib import Path

from memsync.core.attribution import Attribution, acting, operator
from memsync.core.memory import Memory, open_memory, refuse_during_run
from memsync.core.snapshot import Snapshot, take
from memsync.errors import RemoteError, RepoError, UnsavedWork, UsageError
from memsync.git import history
from memsync.git.history import FilePatch
from memsync.git.merge import ConflictCopy
from memsync.git.scan import scan
from memsync.git.trailers import first, parse, quote_path
from memsync.history import conflicts
from memsync.history.log import FileState, LogEntry, LogResult, log, relative
from memsync.sync import shallow
from memsync.sync.exchange import Exchange, converge, unpushed
from memsync.sync.hubs import ready_to_exchange
from memsync.util.fs import in_the_way
from memsync.util.records import field, recordclass

RUN_PREFIX = "run:"


class DirtyPaths(UsageError):
    """restore/revert would overwrite files that have uncommitted changes."""

    def __init__(self, verb: str, paths: list[str], hint: str) -> None:
        shown = ", ".join(paths[:5]) + (f" and {len(paths) - 5} more" if len(paths) > 5 else "")
        super().__init__(f"not {verb}: {shown} has uncommitted changes that would be overwritten", hint)
        self.paths = paths


@recordclass
class DiffResult:
    old: str  # what the left side is: a version, "empty", or a description
    new: str
    patches: list[FilePatch]


@recordclass
class Outcome:
    """What restore or revert did."""

    source: str  # the version restored from / reverted (or run:<id>)
    version: str | None  # the new version; None if nothing needed changing
    files: list[FileState] = field(default_factory=list)
    saved_first: str | None = None  # uncommitted work committed before a --force restore
    conflicts: list[ConflictCopy] = field(default_factory=list)
    kept_modified: list[str] = field(default_factory=list)
    snapshot: Snapshot = field(default_factory=Snapshot)
    pushed: bool = False
    merged: int = 0


# -- revisions -----------------------------------------------------------------------------------
def run_versions(mem: Memory, run_id: str) -> list[str]:
    """The versions a run made itself (checkpoints and final, not its merges), oldest first."""
    head = mem.git.head_oid()
    found = []
    if head is not None:
        for oid, parents, message in history.messages(mem.git, head):
            if parents <= 1 and first(parse(message), "Memsync-Run-Id") == run_id:
                found.append(oid)
    if not found:
        raise UsageError(f"run {run_id!r} made no version in this memory's history",
                         "`memsync pull` fetches newer runs; "
                         "`memsync log` lists the runs")
    return found[::-1]


def _span(mem: Memory, spec: str) -> tuple[str, str]:
    """(base tree, result tree) of what a version or a run changed."""
    if spec.startswith(RUN_PREFIX):
        return history.own_result(mem.git, run_versions(mem, _run_id(spec)))
    repo = mem.git
    oid = history.resolve(repo, spec)
    return history.tree_of(repo, history.first_parent(repo, oid)), history.tree_of(repo, oid)


def _point(mem: Memory, spec: str) -> str:
    """A version: run:<id> as a single point is the run's last version."""
    if spec.startswith(RUN_PREFIX):
        return run_versions(mem, _run_id(spec))[-1]
    return history.resolve(mem.git, spec)


def _run_id(spec: str) -> str:
    rid = spec[len(RUN_PREFIX):]
    if not rid:
        raise UsageError("run: needs a run id, e.g. run:20261122T101500Z-3f9a1c", history.REV_HINT)
    return rid


# -- diff ----------------------------------------------------------------------------------------
def diff(start: Path, revs: list[str], paths: list[str] | None = None) -> DiffResult:
    """No REV: uncommitted changes. One: what that version (or run:<id>) changed. Two: from the
    first to the second (a run:<id> there stands for the run's last version)."""
    if len(revs) > 2:
        raise UsageError("diff takes at most two versions", "put paths after --: memsync diff REV -- PATH")
    mem = open_memory(start)
    rels = [relative(mem, start, p) for p in paths or []]
    if not revs:
        repo = mem.git
        old = history.tree_of(repo, mem.git.head_oid())
        return DiffResult(_label(mem.git.head_oid()), "work tree", history.diff(repo, old, None, rels))
    shallow.complete(mem)  # a version's parent may be older than a shallow clone
    repo = mem.git
    if len(revs) == 1:
        old, new = _span(mem, revs[0])
        return DiffResult(f"before {revs[0]}", revs[0], history.diff(repo, old, new, rels))
    a, b = _point(mem, revs[0]), _point(mem, revs[1])
    patches = history.diff(repo, history.tree_of(repo, a), history.tree_of(repo, b), rels)
    return DiffResult(a[:8], b[:8], patches)


def _label(oid: str | None) -> str:
    return oid[:8] if oid else "empty"


# -- restore -------------------------------------------------------------------------------------
def restore(start: Path, paths: list[str], at: str | None, *, force: bool = False,
            remote: str | None = None, run_id: str | None = None, conflict: str | None = None) -> Outcome:
    """Put files back byte for byte as they were at `at`, as a new operator version, pushed.
    `run_id`: an agent restores (the MCP server): the version is the run's, not the operator's.
    `conflict`: instead of `at`, the id of a losing version in the one PATH's gathered conflict
    file (history/conflicts.py)."""
    if not paths:
        raise UsageError("nothing to restore", "name the files: memsync restore PATH... --at REV")
    if (at is None) == (conflict is None):
        raise UsageError("restore needs --at REV or --conflict ID (one of them)",
                         "memsync restore PATH --at REV, or memsync restore PATH --conflict ID")
    if conflict is not None and len(paths) != 1:
        raise UsageError("--conflict restores one file", "memsync restore PATH --conflict ID")
    mem = open_memory(start, remote)
    mem.git.narrow = False  # it overwrites files: every local change must be seen, and saved first
    shallow.complete(mem)
    with mem.locked():
        refuse_during_run(mem, "restore", as_run=run_id)
        ready_to_exchange(mem)
        wanted: dict[str, tuple[bytes, int]] = {}
        loser = None
        if conflict is not None:
            loser = conflicts.find(mem, relative(mem, start, paths[0]), conflict)
            rev = loser.version or _head(mem)
            wanted[loser.path] = (loser.data, 0o100644)
        else:
            assert at is not None
            rev = _point(mem, at)
        for rel in (relative(mem, start, p) for p in paths if conflict is None):
            found = history.files_under(mem.git, rev, rel)
            if not found:
                raise UsageError(f"{rel} does not exist at version {rev[:8]}",
                                 f"`memsync log {rel}` lists the versions that have it")
            for f in found:
                blob = history.blob_at(mem.git, rev, f)
                assert blob is not None
                wanted[f] = blob
        _refuse_unsafe(wanted, rev, mem)
        for f in wanted:
            _safe(mem.root, f)  # all refused before any is written
        result = Outcome(source=rev, version=None)
        dirty = sorted(set(wanted) & {c.path for c in scan(mem.git).changes})
        if dirty and not force:
            raise DirtyPaths("restored", dirty, "save them first with `memsync push`, or pass --force "
                             "(your uncommitted version is then committed first, so it stays in history)")
        if dirty:
            saved = take(mem, acting(run_id, f"Save uncommitted {_names(dirty)} before restoring"), only=set(dirty))
            result.saved_first = saved.commit
        changed = [p for p, (data, mode) in wanted.items() if history.blob_at(mem.git, _head(mem), p)
                   != (data, mode)]
        for p in changed:
            _write(mem.root, p, *wanted[p])
        result.files = [FileState(p, "restored", len(d), hashlib.sha256(d).hexdigest())
                        for p, (d, _) in sorted(wanted.items())]
        if not changed:
            return _deliver(mem, result, acting(run_id, "Restore"), "restore") if result.saved_first else result
        subject = (f"Restore {_names(changed)} as at {rev[:8]}" if loser is None else
                   f"Restore {loser.path} as its version {loser.id} in {loser.gathered_in}")
        sources = [] if loser is not None and loser.version is None else sorted(changed)
        who = acting(run_id, subject, *[("Memsync-Restored-From", f"{rev} {quote_path(p)}") for p in sources])
        result.snapshot = take(mem, who, only=set(changed), check_integrity=False)
        result.version = result.snapshot.commit
        return _deliver(mem, result, who, "restore")


def _head(mem: Memory) -> str:
    head = mem.git.head_oid()
    if head is None:
        raise UsageError("this memory has no versions yet", "`memsync push` makes the first one")
    return head


# -- revert --------------------------------------------------------------------------------------
def revert(start: Path, spec: str, *, remote: str | None = None) -> Outcome:
    """Undo a version or a whole run as one new operator version, pushed; never rewrites history.
    Where later versions touched the same lines, the current content stays at the path and the
    undone content is added to the path's gathered conflict file (NAME.conflicts.md, run `revert`)."""
    mem = open_memory(start, remote)
    mem.git.narrow = False  # it overwrites files: every local change must be seen, and saved first
    shallow.complete(mem)
    with mem.locked():
        refuse_during_run(mem, "revert")
        ready_to_exchange(mem)
        head = _head(mem)
        repo = mem.git
        if spec.startswith(RUN_PREFIX):
            own = run_versions(mem, _run_id(spec))
            base, done = history.own_result(repo, own)
            trailers = [("Memsync-Reverted-Run", _run_id(spec))] + [("Memsync-Reverted", o) for o in own]
            subject = f"Revert run {_run_id(spec)}"
            source = spec
        else:
            oid = history.resolve(repo, spec)
            base, done = history.tree_of(repo, history.first_parent(repo, oid)), history.tree_of(repo, oid)
            trailers, subject, source = [("Memsync-Reverted", oid)], f"Revert {oid[:8]}", oid
        undone = history.undo(repo, base, done, head, "revert")
        result = Outcome(source=source, version=None, conflicts=undone.conflicts,
                         kept_modified=undone.kept_modified)
        now = history.tree_files(repo, history.tree_of(repo, head))
        after = history.tree_files(repo, undone.tree)
        changed = sorted(p for p in set(now) | set(after) if now.get(p) != after.get(p))
        if not changed:
            return result
        _refuse_unsafe(after.keys() & set(changed), source, mem)
        dirty = sorted(set(changed) & {c.path for c in scan(mem.git).changes})
        if dirty:
            raise DirtyPaths("reverted", dirty, "save them first with `memsync push`, then revert")
        for p in changed:
            if p in after:
                _write(mem.root, p, history.read_blob(repo, after[p][0]), after[p][1])
            else:
                _remove(mem.root, p)
        result.files = [_state_after(mem, p, after) for p in changed]
        who = operator(subject, *trailers)
        result.snapshot = take(mem, who, only=set(changed), check_integrity=False)
        result.version = result.snapshot.commit
        return _deliver(mem, result, who, "revert")


def _state_after(mem: Memory, path: str, after: dict[str, tuple[str, int]]) -> FileState:
    if path not in after:
        return FileState(path, "deleted", None, None)
    data = history.read_blob(mem.git, after[path][0])
    return FileState(path, "written", len(data), hashlib.sha256(data).hexdigest())


# -- shared --------------------------------------------------------------------------------------
def _refuse_unsafe(paths: Iterable[str], version: str, mem: Memory) -> None:
    """Restore and revert write files from any version, a hub's refused ones included: the same
    names a checkout refuses (`.vm0`, `.git` and their look-alikes) are refused here."""
    from memsync.git.hubtree import bad_path, refusal

    bad = sorted(p for p in paths if bad_path(p))
    if bad:
        raise refusal(version, mem.name, bad[0])


def _deliver(mem: Memory, result: Outcome, who: Attribution, verb: str) -> Outcome:
    """Push like `memsync push`; if that fails the new version stays local and the error says so."""
    try:
        exchange: Exchange = converge(mem, who, lambda: _save_local(mem))
    except RemoteError as exc:
        where = f" as version {result.version[:8]}" if result.version else ""
        raise UnsavedWork(f"{verb} committed locally{where}, but the push failed: {exc.message}",
                          unpushed(mem)) from exc
    result.pushed = exchange.pushed
    result.merged = len(exchange.merges)
    result.conflicts += exchange.conflicts
    return result


def _save_local(mem: Memory) -> None:
    take(mem, operator("Save local changes before merging"))


def _names(paths: list[str]) -> str:
    return ", ".join(paths[:3]) + (f" and {len(paths) - 3} more" if len(paths) > 3 else "")


def _safe(root: Path, rel: str) -> Path:
    """`root / rel`, refused when a folder on the way is a symlink (it could lead anywhere, outside
    the memory included) or a file; checked before anything is written, so nothing is created
    through it. A symlink at `rel` itself is replaced, never followed."""
    try:
        found = in_the_way(root, rel)
    except OSError as exc:
        raise RepoError(f"cannot write {rel}: {exc.strerror}", "check permissions") from exc
    if found is not None:
        shown, mode = found
        if stat.S_ISLNK(mode):
            raise RepoError(f"refusing to write {rel}: {shown} is a symlink, and memsync never writes through one",
                            f"remove the symlink {shown} (or move it aside), then retry")
        raise RepoError(f"cannot write {rel}: {shown} is a file now", "move it aside and retry")
    return root / rel


def _write(root: Path, rel: str, data: bytes, mode: int) -> None:
    """Write one file atomically (temp file + rename), exactly these bytes and this mode."""
    full = _safe(root, rel)
    from memsync.util.dirfd import Tree

    try:
        if full.is_dir() and not full.is_symlink():
            raise RepoError(f"cannot restore {rel}: a directory is there now", "move it aside and retry")
        # through folder descriptors, never following a link (a folder swapped meanwhile refuses);
        # a partial copy a killed memsync left beside the file goes
        with Tree(root) as tree:
            if not tree.place(rel, data, mode):
                raise RepoError(f"cannot write {rel}: a symlink, file or folder stands in the way now",
                                "move it aside and retry")
    except OSError as exc:
        raise RepoError(f"cannot write {rel}: {exc.strerror}", "check permissions and free space") from exc


def _remove(root: Path, rel: str) -> None:
    full = _safe(root, rel)
    try:
        if full.is_symlink() or (full.exists() and stat.S_ISREG(full.lstat().st_mode)):
            full.unlink()
    except OSError as exc:
        raise RepoError(f"cannot remove {rel}: {exc.strerror}", "check permissions") from exc


__all__ = ["DiffResult", "DirtyPaths", "FileState", "LogEntry", "LogResult", "Outcome", "diff", "log",
           "relative", "restore", "revert", "run_versions"]
