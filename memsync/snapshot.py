"""Commit settled changes: the one pipeline behind push, run, checkpoints and watch.

One scan of the work tree; each changed file is read once and exactly those bytes are checked
(size limit, secrets, protect policies, integrity guard) and committed, so what was checked is what
is stored. Files still being written (changed within `settle` seconds) wait for the next snapshot.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from memsync import guard
from memsync.attribution import Attribution
from memsync.git.repo import WorkChange, file_mode
from memsync.git.trailers import compose
from memsync.memory import Memory
from memsync.names import conflict_copy_name, is_conflict_copy

_LINK_MODE = 0o120000  # git's mode for a symlink: its target is not scanned for secrets

if TYPE_CHECKING:  # the scanner's patterns are compiled on first use, not at start-up
    from memsync import secrets as secretscan


@dataclass(frozen=True)
class Skipped:
    path: str
    reason: str


@dataclass
class Snapshot:
    commit: str | None = None
    changes: list[WorkChange] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)
    flags: list[guard.Flag] = field(default_factory=list)
    violations: list[guard.Violation] = field(default_factory=list)
    secrets: list[secretscan.Finding] = field(default_factory=list)
    blocked: list[str] = field(default_factory=list)  # kept out by `secrets: block`
    ignored: list[str] = field(default_factory=list)  # new files hidden by ignore rules (.gitignore)

    @property
    def left_out(self) -> int:
        """Files in the tree this snapshot did not commit (reported, never silent)."""
        return len(self.skipped) + len(self.ignored) + len(self.blocked)


@dataclass
class _Staged:
    change: WorkChange
    data: bytes | None
    mode: int
    old: bytes | None
    st: os.stat_result | None = None  # the file's stat for the index (see _settled)


def take(mem: Memory, who: Attribution, *, settle: float = 0.0, allow_empty: bool = False,
         run_base: str | None = None, only: Collection[str] | None = None,
         check_integrity: bool = True) -> Snapshot:
    """Commit what changed as `who`; caller holds the memory's lock.

    `only`: just these paths (restore and revert commit exactly the files they wrote).
    `check_integrity=False`: no guard flags, for deliberate operator rewrites (a restore or a
    revert is recorded by its own trailers; flagging it would bury the damage it repairs)."""
    snap = Snapshot()
    staged: list[_Staged] = []
    now = time.time()
    for change in mem.git.scan(write_index=False):  # commit_index writes the index once
        if only is not None and change.path not in only:
            continue
        item = _read(mem, change, now, settle, snap)
        if item is not None:
            staged.append(item)
    if only is None:
        snap.skipped += [Skipped(f"{d}/", "it holds its own .git (a nested repository); its files are "
                                 "not committed") for d in mem.git.nested]
        snap.ignored = list(mem.git.ignored)
    _scan_secrets(mem, staged, snap)
    staged = _apply_policies(mem, who, staged, snap)
    changes = [guard.FileChange(s.change.path, s.old, s.data,
                                created_in_same_run=_created_since(mem, s.change.path, run_base))
               for s in staged]
    snap.flags = guard.integrity_flags(changes, who.actor) if check_integrity else []
    for item in staged:
        if item.data is None:
            mem.git.unstage(item.change.path)
    for item in staged:
        if item.data is not None:
            mem.git.stage(item.change.path, item.data, item.mode, item.st)
    trailers = who.trailers([f.trailer() for f in snap.flags])
    trailers += [("Memsync-Policy", f"{v.path}: {v.reason}") for v in snap.violations]
    message = compose(who.subject, trailers)
    snap.commit = mem.git.commit_index(mem.branch, message, who.author(), allow_empty=allow_empty)
    if snap.commit is not None:
        snap.changes = [s.change for s in staged]
    return snap


def _read(mem: Memory, change: WorkChange, now: float, settle: float, snap: Snapshot) -> _Staged | None:
    path = change.path
    old = mem.git.head_blob(path) if change.kind != "added" else None
    if change.kind == "deleted":
        return _Staged(change, None, 0, old)
    full = mem.root / path
    try:
        st = full.lstat()
    except FileNotFoundError:
        return _Staged(WorkChange(path, "deleted"), None, 0, old) if old is not None else None
    except OSError as exc:
        snap.skipped.append(Skipped(path, f"cannot read: {exc.strerror}"))
        return None
    if settle and now - st.st_mtime < settle:
        snap.pending.append(path)
        return None
    if stat.S_ISLNK(st.st_mode):
        target = os.fsencode(os.readlink(full))
        return _Staged(change, target, file_mode(st), old, _settled(st, _lstat(full)))
    if not stat.S_ISREG(st.st_mode):
        snap.skipped.append(Skipped(path, "not a regular file"))
        return None
    if st.st_size > mem.config.max_file_size:
        snap.skipped.append(Skipped(path, f"{st.st_size} bytes, larger than max_file_size "
                                          f"({mem.config.max_file_size})"))
        return None
    try:
        with open(full, "rb") as fh:
            data = fh.read()
            after = os.fstat(fh.fileno())
    except OSError as exc:
        snap.skipped.append(Skipped(path, f"cannot read: {exc.strerror}"))
        return None
    return _Staged(change, data, file_mode(st), old, _settled(st, after))


# A file last changed this long ago gets a later timestamp from any further write, even on file
# systems with 1-2 s timestamps, so its stat data can vouch for the bytes just read.
_SETTLED_NS = 2_000_000_000


def _settled(before: os.stat_result, after: os.stat_result | None) -> os.stat_result | None:
    """`before` if it still describes the file after the read and the file is not fresh; else
    None, and the next scan re-hashes the file rather than trust a stat a same-tick write
    could leave unchanged (git's "racy clean" problem)."""
    if after is None or (before.st_ino, before.st_size, before.st_mtime_ns, before.st_ctime_ns) != (
            after.st_ino, after.st_size, after.st_mtime_ns, after.st_ctime_ns):
        return None
    if time.time_ns() - max(after.st_mtime_ns, after.st_ctime_ns) < _SETTLED_NS:
        return None
    return before


def _lstat(path: Path) -> os.stat_result | None:
    try:
        return path.lstat()
    except OSError:
        return None


def _scan_secrets(mem: Memory, staged: list[_Staged], snap: Snapshot) -> None:
    if mem.config.secrets == "off":
        return
    if not staged:
        return
    from memsync import secrets as secretscan

    for item in staged:
        if item.data is None or item.mode == _LINK_MODE:
            continue
        found = secretscan.scan_bytes(item.change.path, item.data)
        snap.secrets.extend(found)
        if found and mem.config.secrets == "block":
            snap.blocked.append(item.change.path)
    if snap.blocked:
        blocked = set(snap.blocked)
        staged[:] = [s for s in staged if s.change.path not in blocked]



def _apply_policies(mem: Memory, who: Attribution, staged: list[_Staged], snap: Snapshot) -> list[_Staged]:
    """A change that breaks a protect rule keeps the previous content at its path; the new
    version is kept beside it as a conflict-style copy. Nothing is lost either way."""
    rules = guard.parse_protect(mem.config.protect) if mem.config.protect else []
    if not rules:
        return staged
    changes = [guard.FileChange(s.change.path, s.old, s.data) for s in staged
               if not is_conflict_copy(s.change.path)]
    violations = guard.policy_violations(changes, rules)
    if not violations:
        return staged
    snap.violations = violations
    bad = {v.path for v in violations}
    tag = who.run_id or who.actor
    kept: list[_Staged] = []
    for item in staged:
        path = item.change.path
        if path not in bad:
            kept.append(item)
            continue
        full = mem.root / path
        if item.data is not None:
            copy = conflict_copy_name(path, tag)
            (mem.root / copy).parent.mkdir(parents=True, exist_ok=True)
            (mem.root / copy).write_bytes(item.data)
            kept.append(_Staged(WorkChange(copy, "added"), item.data, item.mode, None))
        if item.old is not None:
            full.parent.mkdir(parents=True, exist_ok=True)
            if full.is_symlink():
                full.unlink()
            full.write_bytes(item.old)
        elif full.exists() or full.is_symlink():
            full.unlink()
    return kept



def _created_since(mem: Memory, path: str, run_base: str | None) -> bool:
    if run_base is None:
        return False
    return not mem.git.path_in(run_base, path)


SHOWN_PATHS = 10


def ignored_line(paths: list[str]) -> str:
    """`not committed: 3 new files ignored by .gitignore rules: a.log, b.log, build/`"""
    from memsync.textsafe import quote_path

    shown = ", ".join(quote_path(p) for p in paths[:SHOWN_PATHS])
    more = f" and {len(paths) - SHOWN_PATHS} more" if len(paths) > SHOWN_PATHS else ""
    noun = "new file or folder" if len(paths) == 1 else "new files or folders"
    return (f"not committed: {len(paths)} {noun} ignored by .gitignore rules: {shown}{more} "
            "(`git check-ignore -v PATH` names the rule)")


def describe(snap: Snapshot) -> list[str]:
    """What a snapshot has to tell its user, one line each (callers add `warning:` and context)."""
    from memsync.textsafe import clean, quote_path

    lines = [f"not committed: {quote_path(item.path)} ({item.reason})" for item in snap.skipped]
    if snap.ignored:
        lines.append(ignored_line(snap.ignored))
    for finding in snap.secrets:
        verb = "kept out of the commit" if finding.path in snap.blocked else "committed"
        lines.append(f"possible secret ({finding.rule}) in {quote_path(finding.path)}:{finding.line}, {verb}: "
                     f"{clean(finding.preview)}")
    lines += [f"integrity flag: {clean(flag.trailer())}" for flag in snap.flags]
    lines += [f"policy: {quote_path(v.path)}: {v.reason}; the new version was kept beside it"
              for v in snap.violations]
    return lines
