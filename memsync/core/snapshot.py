"""Commit settled changes: the one pipeline behind push, run, checkpoints and watch.

One scan of the work tree; each changed file is read once and exactly those bytes are checked
(size limit, secrets, protect policies, integrity guard) and committed, so what was checked is what
is stored. Files still being written (changed within `settle` seconds) wait for the next snapshot.

A file no protect rule names is checked and written into the object database as soon as it is
read, and its bytes dropped: a snapshot holds one file's bytes at a time (plus the few files
protect rules name, which may have to be put back), so its memory follows the largest file, not
the size of the change (a first push of a whole memory).

Staged at once (`stage_at_once`, the default): when the memory has no protect rules, a file
`_store` wrote goes into the index there and then, and the snapshot keeps only its change (the
scan's own record). The invariant: without protect rules nothing after `_store` can change what
is committed at a stored path (`_apply_policies` keeps every item as it is, the integrity flag
was taken when it was stored), so staging it then or after the walk puts the same entry in the
index, provided the changes are staged in the scan's order (a deletion's `unstage` drops
everything under its path too); a path libgit2 refuses is kept out and named the same way.
Kept per file until staging otherwise (`_Staged`: blob id, stat stamp): ~270 bytes, 27 MB at
100,000 new files (docs/PERFORMANCE.md "A first push that fits a small sandbox").
"""

from __future__ import annotations

import contextlib
import os
import stat
import time
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from memsync.checks import guard, protect
from memsync.checks.merge_policy import is_rule_file
from memsync.checks.pathnames import refused_path
from memsync.core import gitlookalikes
from memsync.core.attribution import Attribution, change_trailers
from memsync.core.memory import Memory
from memsync.git import engine, ownership
from memsync.git.native import release_free_heap
from memsync.git.repo import LINK_MODE, ChangeKind, UnstorablePath, WorkChange, file_mode, stat_stamp
from memsync.git.scan import ScanResult, scan
from memsync.git.trailers import compose, quote_path
from memsync.util.dirfd import Tree, is_outside, special_kind
from memsync.util.names import conflict_copy_name
from memsync.util.records import field, recordclass, replace

if TYPE_CHECKING:  # the scanner's patterns are compiled on first use, not at start-up
    from memsync.checks import secrets as secretscan


@recordclass(frozen=True)
class Skipped:
    path: str
    reason: str


@recordclass
class Snapshot:
    commit: str | None = None
    changes: list[WorkChange] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)
    flags: list[guard.Flag] = field(default_factory=list)
    violations: list[protect.Violation] = field(default_factory=list)
    secrets: list[secretscan.Finding] = field(default_factory=list)
    blocked: list[str] = field(default_factory=list)  # kept out by `secrets: block` or a refused name; printable
    refused: list[Skipped] = field(default_factory=list)  # a name no version may hold (checks/pathnames.py)
    for_review: list[str] = field(default_factory=list)  # a run's changes to `mode: review` paths, kept out
    run_flags: list[str] = field(default_factory=list)  # flags about the run as a whole (run/record.py)
    ignored: list[str] = field(default_factory=list)  # new files hidden by ignore rules (.gitignore)
    outside_links: list[tuple[str, str]] = field(default_factory=list)  # (path, target) of symlinks leaving the memory
    rule_files: list[str] = field(default_factory=list)  # .gitattributes/.gitignore this commit changes
    # a run's: new files only a .gitignore in the tree hides, committed all the same (git/localignores.py);
    # `ignored` then holds what the operator's own rules (.git/info/exclude, core.excludesFile) kept out
    unhidden: list[str] = field(default_factory=list)
    # (path, "skip-worktree"...): index flags that hid a file from git, cleared before a run's scan
    index_flags: list[tuple[str, str]] = field(default_factory=list)

    @property
    def left_out(self) -> int:
        """Files in the tree this snapshot did not commit (reported, never silent)."""
        return len(self.skipped) + len(self.ignored) + len(self.blocked)

    @contextmanager
    def folded(self, above: int | None = None) -> Iterator[None]:
        """`changes` held as strings meanwhile (a push's exchange): a first push's records were
        under the pack builder's peak (docs/PERFORMANCE.md, figures). Given back afterwards, on a heap
        whose free pages went back to the system first (native.release_free_heap). Only past
        `above` changed files (FOLD_ABOVE): below, the list is small beside everything else held."""
        if len(self.changes) <= (FOLD_ABOVE if above is None else above):
            yield
            return
        changes, self.changes = self.changes, []
        parts = []  # a string per _FOLD_PART changes, each folded as its records are let go
        while changes:
            part = changes[-_FOLD_PART:]
            del changes[-_FOLD_PART:]
            parts.append("\0".join(f"{_KINDS.index(c.kind)}{c.path}" for c in part))
        del part
        try:
            yield
        finally:
            release_free_heap()
            self.changes = [WorkChange(item[1:], _KINDS[int(item[0])])
                            for folded in reversed(parts) for item in folded.split("\0")]


FOLD_ABOVE = 10_000
_FOLD_PART = 4096  # records folded into one string at once: one join of them all was a spike of its own
_KINDS: tuple[ChangeKind, ...] = ("added", "modified", "deleted")


@recordclass(slots=True)  # one per changed file: a first push holds 100,000 of them
class _Staged:
    change: WorkChange
    data: bytes | None
    mode: int
    old: bytes | None
    st: os.stat_result | None = None  # the file's stat for the index (see _cacheable_stat)
    blob: str | None = None  # already checked and stored (_store): `data` and `old` are dropped
    stamp: bytes | None = None  # then `st` is dropped too: repo.stat_stamp(st), a tenth of its size
    judged: bool = False  # its integrity flag, if any, was taken when it was stored

    @property
    def present(self) -> bool:
        """A file or symlink to commit (not a deletion)."""
        return self.data is not None or self.blob is not None


def take(mem: Memory, who: Attribution, *, settle: float = 0.0, allow_empty: bool = False,
         run_base: str | None = None, only: Collection[str] | None = None,
         check_integrity: bool = True,
         run_flags: Callable[[str, list[guard.Flag]], list[str]] | None = None, full_scan: bool = False,
         stage_at_once: bool = True) -> Snapshot:
    """Commit what changed as `who`; caller holds the memory's lock.

    `only`: just these paths (restore and revert commit exactly the files they wrote).
    `check_integrity=False`: no guard flags, for deliberate operator rewrites (a restore or a
    revert is recorded by its own trailers; flagging it would bury the damage it repairs).
    `run_flags(tree, flags)`: further flags for the tree about to be committed (a run's record,
    see run/record.py); a commit is made to carry them even if no file changed.
    `full_scan`: never narrowed by a change tracker's hint (a merge found the tree other than the
    tracker said: a change no file event reported, through a memory map or a hard link).
    `stage_at_once=False`: every change is staged after the walk (the module's docstring)."""
    snap = Snapshot()
    staged: list[_Staged] = []
    at_once: list[WorkChange] = []  # stored and staged already (stage_at_once)
    now = time.time()
    # An agent's `.GIT/` is invisible to libgit2's walk: looked for beside it, named below.
    lookalikes = gitlookalikes.beside(mem.root) if who.actor == "run" and only is None else None
    # commit_index writes the index once. An agent's record (a run's checkpoints and closing
    # version) sees every change however it was written: never a tracker-narrowed scan.
    # Nor can a .gitignore in the tree hide an agent's files (git/localignores.py).
    scanned = scan(mem.git, write_index=False, full=who.actor == "run" or full_scan, tree_ignores=who.actor != "run",
                   meanwhile=None if mem.config.secrets == "off" else _load_scanner)
    found = scanned.changes
    snap.index_flags = [(h.path, h.what) for h in scanned.unhidden_flags]
    snap.skipped += _released_fifos(mem.root)
    rules = protect.parse_protect(mem.config.protect) if mem.config.protect else []
    stored_flags: list[guard.Flag] = []
    judge = (lambda c: guard.integrity_flags([c], who.actor)) if check_integrity else None
    # a run's changes to `mode: review` paths wait for review: kept out here, proposed at its end
    reviewed = who.actor == "run" and not mem.branch.startswith("proposals/") and \
        any(r.mode == "review" for r in rules)
    with Tree(mem.root) as tree:
        for change in found:
            if only is not None and change.path not in only:
                continue
            if change.kind != "deleted" and _refused(change.path, snap):
                continue
            if reviewed and protect.for_review(change.path, rules):
                snap.for_review.append(change.path)
                continue
            item = _read(mem, tree, change, now, settle, snap)
            if item is None or _secret_blocked(mem, item, snap):
                continue
            if not any(rule.matches(item.change.path) for rule in rules):
                item = _store(mem, item, run_base, judge, stored_flags)
                if stage_at_once and not rules:
                    if _stage_now(mem, item, snap):
                        at_once.append(item.change)
                    continue
            staged.append(item)
    if only is None:
        snap.skipped += [Skipped(f"{d}/", "it holds its own .git (a nested repository); its files are "
                                 "not committed") for d in scanned.nested]
        snap.ignored = list(scanned.ignored)
        for folder in lookalikes() if lookalikes is not None else []:
            _refused(folder + "/", snap)
    with Tree(mem.root) as tree:
        staged = _apply_policies(mem, tree, who, staged, snap, rules)
    changes = [guard.FileChange(s.change.path, s.old, s.data,
                                created_in_same_run=_created_since(mem, s.change.path, run_base))
               for s in staged if not s.judged]
    snap.flags = sorted(stored_flags + guard.integrity_flags(changes, who.actor), key=lambda f: (f.path, f.kind)) \
        if check_integrity else []
    for item in staged:
        if not item.present:
            mem.git.unstage(item.change.path)
    staged = [item for item in staged if _staged(mem, item, snap)]
    # A file kept out (blocked, too large, still being written) keeps HEAD's version in the
    # index, even if someone `git add`ed it: only what was checked is committed.
    taken = {s.change.path for s in staged}  # one set of paths: a first push holds 100,000 of them
    taken.update(c.path for c in at_once)
    kept_out = sorted({c.path for c in found if (only is None or c.path in only) and c.path not in taken})
    del taken
    if kept_out:
        ownership.reset_entries(mem.git, kept_out)
    if run_flags is not None:
        snap.run_flags = run_flags(mem.git.index_tree(), snap.flags)
    # the reads' buffers, freed, stay resident in glibc's heap: given back before the tree is
    # written, under the commit's own peak (a small commit reads /proc only)
    release_free_heap()
    _commit(mem, who, snap, scanned, _in_order(at_once, staged), allow_empty)
    return snap


def _commit(mem: Memory, who: Attribution, snap: Snapshot, scanned: ScanResult, changes: list[WorkChange],
            allow_empty: bool) -> None:
    """The version of what `take` staged, its trailers saying what was flagged, refused and cleared."""
    snap.rule_files = [c.path for c in changes if is_rule_file(c.path)]
    trailers = who.trailers([f.trailer() for f in snap.flags] + snap.run_flags
                            + [f"rule-file-changed {quote_path(p)}" for p in snap.rule_files]
                            + [f"index-flag-cleared {quote_path(h.path)} {h.what}" for h in scanned.unhidden_flags])
    trailers += [("Memsync-Policy", f"{quote_path(v.path)}: {v.reason}") for v in snap.violations]
    message = compose(who.subject, trailers)
    # A large version's trees, read back by libgit2 for the index's tree cache and again for
    # the change counts, are not kept in its object cache, at the commit's peak
    # (docs/PERFORMANCE.md, figures)
    with engine.uncached() if len(changes) > FOLD_ABOVE else contextlib.nullcontext():
        snap.commit = mem.git.commit_index(mem.branch, message, who.author(),
                                           allow_empty=allow_empty or bool(snap.run_flags),
                                           describe=lambda tree, parent: change_trailers(mem.git, tree, parent))
    if snap.commit is not None:
        snap.changes = changes
        if scanned.unhidden:
            committed = {c.path for c in changes}
            snap.unhidden = [p for p in scanned.unhidden if p in committed]


def _stage_now(mem: Memory, item: _Staged, snap: Snapshot) -> bool:
    """Stage a stored change at once (`stage_at_once`): a deletion leaves the index, a file or
    symlink enters it; False if libgit2 refuses its path. In the scan's order, by path, as after
    the walk: a file replaced by a folder leaves before the files under that folder enter."""
    if not item.present:
        mem.git.unstage(item.change.path)
        return True
    return _staged(mem, item, snap)


def _in_order(at_once: list[WorkChange], staged: list[_Staged]) -> list[WorkChange]:
    """Every change committed: those staged at once, then the rest, in the scan's order (by path;
    only a snapshot without protect rules stages at once, and then `staged` keeps that order)."""
    if not at_once:
        return [s.change for s in staged]
    at_once += [s.change for s in staged]
    at_once.sort(key=lambda c: c.path)
    return at_once


def _read(mem: Memory, tree: Tree, change: WorkChange, now: float, settle: float, snap: Snapshot) -> _Staged | None:
    """The change's bytes, reached through the tree's folder descriptors (dirfd.py): a folder
    swapped for a symlink while memsync reads (an agent racing it) makes the path a deleted one,
    never a read of what the symlink names."""
    path = change.path
    old = mem.git.head_blob(path) if change.kind != "added" else None
    try:
        st = tree.lstat(path)
    except OSError as exc:
        if change.kind == "deleted":
            return _Staged(change, None, 0, old)
        if is_outside(exc):
            return _Staged(WorkChange(path, "deleted"), None, 0, old) if old is not None else None
        snap.skipped.append(Skipped(path, f"cannot read: {exc.strerror}"))
        return None
    special = special_kind(st.st_mode)
    if special is not None:  # libgit2 calls it deleted; it is there, never opened: the version stays
        snap.skipped.append(Skipped(path, f"{special}, not a regular file: never read"))
        return None
    if change.kind == "deleted" or stat.S_ISDIR(st.st_mode):
        return _Staged(WorkChange(path, "deleted"), None, 0, old) if old is not None else None
    if settle and now - st.st_mtime < settle:
        snap.pending.append(path)
        return None
    if not (stat.S_ISLNK(st.st_mode) or stat.S_ISREG(st.st_mode)):
        snap.skipped.append(Skipped(path, "not a regular file"))
        return None
    if st.st_size > mem.config.max_file_size:
        snap.skipped.append(Skipped(path, f"{st.st_size} bytes, larger than max_file_size "
                                          f"({mem.config.max_file_size})"))
        return None
    try:
        if stat.S_ISLNK(st.st_mode):
            target = tree.readlink(path)
            if _leaves(mem.root, mem.root / path, target):
                snap.outside_links.append((path, os.fsdecode(target)))
            return _Staged(change, target, file_mode(st), old, _cacheable_stat(st, _lstat(tree, path)))
        got = tree.read(path, mem.config.max_file_size)
    except OSError as exc:
        if is_outside(exc):  # replaced by a symlink (ELOOP) or removed since the lstat
            return _Staged(WorkChange(path, "deleted"), None, 0, old) if old is not None else None
        snap.skipped.append(Skipped(path, f"cannot read: {exc.strerror}"))
        return None
    if got is None:
        snap.skipped.append(Skipped(path, "not a regular file, or it grew past max_file_size while read"))
        return None
    data, after = got
    return _Staged(change, data, file_mode(after), old, _cacheable_stat(st, after))


def _refused(path: str, snap: Snapshot, reason: str | None = None) -> bool:
    """A path no version may hold (checks/pathnames.py: what every clone refuses) or libgit2
    cannot store: kept out and named, exit 9 like `secrets: block`; the rest is committed."""
    reason = reason or refused_path(path)
    if reason is None:
        return False
    snap.blocked.append(_shown(path))
    snap.refused.append(Skipped(path, reason))
    return True


def _staged(mem: Memory, item: _Staged, snap: Snapshot) -> bool:
    """Put a checked change into the index; False if libgit2 refuses its path (kept out)."""
    try:
        if item.blob is not None:
            mem.git.stage_stored(item.change.path, item.blob, item.mode, item.stamp)
        elif item.data is not None:
            mem.git.stage(item.change.path, item.data, item.mode, item.st)
    except UnstorablePath as exc:
        mem.git.unstage(item.change.path)
        return not _refused(item.change.path, snap, f"git cannot store this path ({exc.reason})")
    return True


def _released_fifos(root: Path) -> list[Skipped]:
    """FIFOs git's own reads met in this tree (swapped in while it read: util/fiforelease.py)."""
    from memsync.util import fiforelease

    base = os.path.realpath(root) + os.sep
    return [Skipped(path[len(base):], "a FIFO swapped in while git read the tree: released, never read")
            for path in fiforelease.drain() if path.startswith(base)]


def _leaves(root: Path, link: Path, target: bytes) -> bool:
    """Whether a symlink points outside the memory (/etc/passwd, ../../secrets): git commits the
    link itself, never its target's content, so a clone elsewhere gets a link to whatever is
    there. Said, never silent (docs/SECURITY.md)."""
    where = Path(os.fsdecode(target))
    resolved = os.path.normpath(where if where.is_absolute() else link.parent / where)
    base = os.path.normpath(root)
    return resolved != base and not resolved.startswith(base + os.sep)


# A file last changed this long ago gets a later timestamp from any further write, even on file
# systems with 1-2 s timestamps, so its stat data can vouch for the bytes just read.
FRESH_NS = 2_000_000_000


def _cacheable_stat(before: os.stat_result, after: os.stat_result | None) -> os.stat_result | None:
    """`before` if it still describes the file after the read and the file is not fresh; else
    None, and the next scan re-hashes the file rather than trust a stat a same-tick write
    could leave unchanged (git's "racy clean" problem)."""
    if after is None or (before.st_ino, before.st_size, before.st_mtime_ns, before.st_ctime_ns) != (
            after.st_ino, after.st_size, after.st_mtime_ns, after.st_ctime_ns):
        return None
    if time.time_ns() - max(after.st_mtime_ns, after.st_ctime_ns) < FRESH_NS:
        return None
    return before


def _lstat(tree: Tree, path: str) -> os.stat_result | None:
    try:
        return tree.lstat(path)
    except OSError:
        return None


def _load_scanner() -> None:
    """Import the secret scanner while a scan waits for its early walk anyway."""
    from memsync.checks import secrets  # noqa: F401


def _secret_blocked(mem: Memory, item: _Staged, snap: Snapshot) -> bool:
    """Everything a commit would hold is scanned: the path itself, the content at any size and
    encoding (chunked, UTF-16/32, binary) and a symlink's target. A path holding a secret is
    shown redacted in every finding and in `snap.blocked`. True: `secrets: block` keeps it out."""
    if mem.config.secrets == "off" or item.data is None:
        return False
    from memsync.checks import secrets as secretscan

    path = item.change.path
    found = secretscan.scan_path(path)
    shown = found[0].path if found else path
    found += secretscan.scan_bytes(shown, item.data)  # a symlink's data is its target
    snap.secrets.extend(found)
    if found and mem.config.secrets == "block":
        snap.blocked.append(shown)
        return True
    return False


def _store(mem: Memory, item: _Staged, run_base: str | None,
           judge: Callable[[guard.FileChange], list[guard.Flag]] | None, flags: list[guard.Flag]) -> _Staged:
    """A checked change no protect rule names: its integrity flag taken now (`judge`, None when
    the snapshot takes none), its bytes written into the object database and dropped. Only a
    protect rule can still change what is committed at its path, and none names it."""
    path = item.change.path
    if judge is not None:
        flags += judge(guard.FileChange(path, item.old, item.data,
                                        created_in_same_run=_created_since(mem, path, run_base)))
    blob = None if item.data is None else mem.git.store_blob(path, item.data)
    stamp = None if item.st is None else stat_stamp(item.st)
    return replace(item, data=None, old=None, st=None, blob=blob, stamp=stamp, judged=True)


def _apply_policies(mem: Memory, tree: Tree, who: Attribution, staged: list[_Staged],
                    snap: Snapshot, rules: list[protect.ProtectRule]) -> list[_Staged]:
    """A change that breaks a protect rule keeps the previous content at its path; the new
    version is kept beside it as a conflict-style copy. Nothing is lost either way. A file named
    like a conflict copy is checked like any other; a protected folder replaced by a file or a
    symlink is the deletion of everything under it, and that file or symlink is kept as a copy.
    Nothing is ever written through a symlink. Items `_store` already wrote are named by no rule
    (their `data` and `old` are gone): they only move aside with a folder or stay as they are."""
    if not rules:
        return staged
    changes = [guard.FileChange(s.change.path, s.old, s.data) for s in staged]
    violations = protect.policy_violations(changes, rules)
    if who.actor == "operator" and any(v.reason == protect.SEEDING_REASON for v in violations):
        violations = protect.allow_seeding(violations, mem.git.tracked_paths())
    if not violations:
        return staged
    violations += _in_the_way(staged, violations)
    violations.sort(key=lambda v: v.path)
    snap.violations = violations
    bad = {v.path for v in violations}
    tag = who.run_id or who.actor
    for item in list(staged):
        if item.change.path in bad and item.old is not None:
            _folder_aside(tree, item.change.path, tag, staged)
    kept: list[_Staged] = []
    # what stands where a folder must be (shorter paths) is moved before anything goes back under it
    for item in sorted(staged, key=lambda s: (s.change.path not in bad, s.change.path.count("/"), s.change.path)):
        path = item.change.path
        if path not in bad:
            kept.append(item)
            continue
        if item.present:
            copy = conflict_copy_name(path, tag)
            data = item.data if item.data is not None else _stored_bytes(mem, item)
            if _write_inside(tree, copy, data, item.mode):
                kept.append(_Staged(WorkChange(copy, "added"), data, item.mode, None))
            else:
                snap.skipped.append(Skipped(path, _IN_THE_WAY))
                continue
        if item.old is not None:
            if not _write_inside(tree, path, item.old, _old_mode(mem, path)):
                snap.skipped.append(Skipped(path, _IN_THE_WAY))
        else:
            _remove_file(tree, path)
    return kept


def _stored_bytes(mem: Memory, item: _Staged) -> bytes:
    """The bytes `_store` wrote for an item that must be put aside after all (a new file where a
    protected folder was: `_in_the_way`)."""
    from memsync.git.history import read_blob

    assert item.blob is not None
    return read_blob(mem.git, item.blob)


_IN_THE_WAY = "a symlink, file or folder stands in the way of the previous version; nothing written through it"


def _old_mode(mem: Memory, path: str) -> int:
    from memsync.git.history import blob_at

    head = mem.git.head_oid()
    found = blob_at(mem.git, head, path) if head else None
    return found[1] if found else 0o100644


def _in_the_way(staged: list[_Staged], violations: list[protect.Violation]) -> list[protect.Violation]:
    """A new file or symlink at a path where a protected folder was (its files come back)."""
    restored = [v for v in violations if any(s.change.path == v.path and s.old is not None for s in staged)]
    extra: list[protect.Violation] = []
    flagged = {v.path for v in violations}
    for item in staged:
        path = item.change.path
        if path in flagged or not item.present:
            continue
        under = next((v for v in restored if v.path.startswith(path + "/")), None)
        if under is not None:
            kind = "a symlink" if item.mode == LINK_MODE else "a file"
            extra.append(protect.Violation(path, under.rule, f"{under.rule.mode}: protected folder replaced by {kind}"))
    return extra


def _folder_aside(tree: Tree, path: str, tag: str, staged: list[_Staged]) -> None:
    """A protected file replaced by a folder: the folder is renamed as a conflict copy of the file
    (what it holds is committed there), so the file can come back at its path."""
    try:
        if not stat.S_ISDIR(tree.lstat(path).st_mode):
            return
        copy = conflict_copy_name(path, tag)
        tree.rename(path, copy)
    except OSError:
        return
    for i, item in enumerate(staged):
        if item.change.path.startswith(path + "/"):
            staged[i] = replace(item, change=WorkChange(copy + item.change.path[len(path):], "added"),
                                            old=None, st=None, stamp=None)


def _write_inside(tree: Tree, rel: str, data: bytes, mode: int) -> bool:
    """Write `rel` (a file, or a symlink for git's link mode) without following any symlink:
    missing folders are created, a symlink or file where a folder should be refuses the write,
    and whatever is at `rel` itself is replaced, never written through. False: not written."""
    try:
        return tree.place(rel, data, mode)
    except OSError:
        return False


def _remove_file(tree: Tree, rel: str) -> None:
    """A new file that breaks a protect rule and had no previous version: removed (its bytes are
    kept in the conflict copy), if it is still a file or symlink inside the tree."""
    try:
        if not stat.S_ISDIR(tree.lstat(rel).st_mode):
            tree.unlink(rel)
    except OSError:
        return


def _created_since(mem: Memory, path: str, run_base: str | None) -> bool:
    if run_base is None:
        return False
    return not mem.git.path_in(run_base, path)


SHOWN_PATHS = 10


def ignored_line(paths: list[str]) -> str:
    """`not committed: 3 new files or folders ignored by the operator's ignore rules: a.log, build/`
    (only the operator's own rules hide files: localignores.py)."""
    noun = "new file or folder" if len(paths) == 1 else "new files or folders"
    rules = "the operator's ignore rules (.git/info/exclude, core.excludesFile, the operator's own .gitignore files)"
    return (f"not committed: {len(paths)} {noun} ignored by {rules}: {_listed(paths)} "
            "(`git check-ignore -v PATH` names the rule)")


def unhidden_line(paths: list[str]) -> str:
    noun = "file" if len(paths) == 1 else "files"
    return (f"committed {len(paths)} new {noun} that a .gitignore in the memory names: {_listed(paths)} "
            "(memsync follows only the operator's ignore rules: .git/info/exclude, core.excludesFile, "
            "and outside a run the .gitignore files that did not come from the hub)")


def _listed(paths: list[str]) -> str:
    from memsync.util.textsafe import display_path

    shown = ", ".join(display_path(p) for p in paths[:SHOWN_PATHS])
    return shown + (f" and {len(paths) - SHOWN_PATHS} more" if len(paths) > SHOWN_PATHS else "")


def describe(snap: Snapshot) -> list[str]:
    """What a snapshot has to tell its user, one line each (callers add `warning:` and context)."""
    from memsync.util.textsafe import clean, display_path

    lines = [f"not committed: {display_path(_shown(item.path))} ({item.reason})" for item in snap.skipped]
    lines += [f"kept out of the commit: {display_path(_shown(item.path))} ({clean(item.reason)}); "
              "rename it to keep it" for item in snap.refused]
    if snap.ignored:
        lines.append(ignored_line(snap.ignored))
    if snap.unhidden:
        lines.append(unhidden_line(snap.unhidden))
    for finding in snap.secrets:
        verb = "kept out of the commit" if finding.path in snap.blocked else "committed"
        shown = display_path(finding.path)
        where = f"the file name {shown}" if finding.line == 0 else f"{shown}:{finding.line}"
        lines.append(f"possible secret ({finding.rule}) in {where}, {verb}: {clean(finding.preview)}")
    lines += [f"{display_path(_shown(path))} is a symbolic link to {clean(_shown(target))}, outside the memory: "
              "committed as a link, not the content it points to" for path, target in snap.outside_links]
    lines += [f"integrity flag: {clean(flag.trailer())}" for flag in snap.flags]
    lines += [f"rule file changed: {display_path(p)} (flagged; memsync merges and ignores by the memory's "
              "storage.yaml and its defaults, never by this file)" for p in snap.rule_files]
    lines += [f"policy: {display_path(v.path)}: {v.reason}; the new version was kept beside it"
              for v in snap.violations]
    lines += [f"index flag cleared: {display_path(path)} was marked {what} (git then looks away from the "
              "file); a run's record sees every change" for path, what in snap.index_flags]
    return lines


def warn_each(snap: Snapshot, memory: str, say: Callable[[str], None]) -> None:
    """describe()'s lines as warnings naming the memory, each through `say` (run, watch)."""
    for line in describe(snap):
        say(f"warning: {memory}: {line}")


def _shown(path: str) -> str:
    """A path as it may be printed: a token used as a file name is redacted."""
    from memsync.checks.secrets import mask

    return mask(path)
