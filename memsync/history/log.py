"""`memsync log`: the versions of a memory, or of one file, newest first, from the local history.

Kept apart from forensics.py (diff, restore, revert), which needs the exchange with the hub:
`log` only reads, and a cold start should import no more than it uses.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from memsync.core.memory import Memory, open_memory
from memsync.errors import UsageError
from memsync.git import history
from memsync.git.history import VersionChanges
from memsync.git.hub import memsync_home
from memsync.git.trailers import every, first, parse, recorded_changes
from memsync.git.treediff import counts
from memsync.history.summaries import Summaries, Summary
from memsync.util.records import field, recordclass
from memsync.util.timefmt import rfc3339

REDACTION_BASE = "Memsync-Redaction-Base"  # (redaction.py's BASE, without importing pygit2's users)


@recordclass
class FileState:
    """A file at one version: `deleted` when the version removed it."""

    path: str
    state: str  # log: added | modified | deleted; restore/revert: restored | written | deleted
    size: int | None
    sha256: str | None


@recordclass
class LogEntry:
    version: str
    oid: str
    time: str
    actor: str  # run | operator | watch | git (a commit not made by memsync)
    run_id: str | None
    exit_code: int | None
    checkpoint: int | None
    merge: bool
    end: bool  # the run's closing version: its outcome (exit code, duration) is in its trailers
    subject: str
    files_changed: int
    bytes_added: int
    bytes_removed: int
    flags: list[str] = field(default_factory=list)
    policies: list[str] = field(default_factory=list)
    copies: list[str] = field(default_factory=list)  # conflict files this version made or added versions to
    restored_from: list[str] = field(default_factory=list)
    reverted: list[str] = field(default_factory=list)
    file: FileState | None = None
    accepted_proposal: str | None = None  # the proposal this version accepted (run_id: its run's)


@recordclass
class LogResult:
    memory: str
    path: str | None
    head: str | None
    versions: list[LogEntry]


# -- log -----------------------------------------------------------------------------------------
def log(start: Path, path: str | None = None, *, run_id: str | None = None, flagged: bool = False,
        limit: int | None = None, recorded: bool = True) -> LogResult:
    """The versions of a memory (or of one file), newest first, from the local history (a shallow
    clone fetches its older versions first when they are needed: shallow.py). `recorded=False`:
    every version's numbers counted from its diff, none read from its trailers (`_summary`)."""
    if limit is not None and limit < 0:
        raise UsageError("-n must be 0 or more")
    mem = open_memory(start)
    rel = (relative(mem, start, path) or None) if path else None
    head = mem.git.head_oid()
    found: list[LogEntry] = []
    if head is None or limit == 0:
        return LogResult(mem.name, rel, head, found)
    cache = _Counted(memsync_home() / "cache" / "versions.db", recorded)
    try:
        found = _versions(mem, head, cache, rel, run_id, flagged, limit)
        if (limit is None or len(found) < limit) and mem.git.is_shallow:
            from memsync.sync import shallow  # the hub's transport: imported only for a shallow clone

            if shallow.complete(mem):  # the versions older than the clone were asked for
                found = _versions(mem, head, cache, rel, run_id, flagged, limit)
        if run_id is not None and not found and ((rel is None and not flagged)
                                                 or not _versions(mem, head, cache, None, run_id, False, 1)):
            raise UsageError(f"no run with the id {run_id!r} in this memory's history",
                             "`memsync log` lists the runs (`memsync pull` first fetches newer ones)")
        if flagged and rel is None and run_id is None:
            found = (_refused_redaction(mem, cache) + found)[:limit]
    finally:
        cache.close()
    return LogResult(mem.name, rel, head, found)


def _refused_redaction(mem: Memory, cache: _Counted) -> list[LogEntry]:
    """The hub's redaction this clone refused (not in its history): shown first, flagged."""
    from memsync.sync import redaction_log

    pending = redaction_log.refused(mem)
    if pending is None or not mem.git.has_object(pending.record):
        return []
    entry = _entry(mem, pending.record, cache, None)
    entry.flags.insert(0, f"redaction refused (not followed): {pending.summary()}")
    return [entry]


def _versions(mem: Memory, head: str, cache: _Counted, rel: str | None, run_id: str | None,
              flagged: bool, limit: int | None) -> list[LogEntry]:
    repo = mem.git
    found: list[LogEntry] = []
    for oid, _, message in history.messages(repo, head, stream=True):
        trailers = parse(message)
        if run_id is not None and first(trailers, "Memsync-Run-Id") != run_id:
            continue
        if flagged and not (every(trailers, "Memsync-Flag") or every(trailers, "Memsync-Policy")
                            or first(trailers, REDACTION_BASE)):
            continue
        if rel is not None and not history.touches(repo, oid, rel):
            continue
        found.append(_entry(mem, oid, cache, rel))
        if limit is not None and len(found) >= limit:
            break
    return found


def summarize(v: VersionChanges) -> Summary:
    """The numbers a log line shows for a version, counted from its diff (summaries.py keeps them)."""
    files, added, removed, copies = counts(v.deltas, v.created if len(v.parents) > 1 else None)
    return Summary(files, added, removed, tuple(copies))


class _Counted(Summaries):
    """The kept summaries, and whether a version's own record of its numbers is read first."""

    def __init__(self, path: Path, recorded: bool) -> None:
        super().__init__(path)
        self.recorded = recorded


def _summary(mem: Memory, oid: str, cache: _Counted) -> tuple[VersionChanges, Summary]:
    """The version and its numbers: as it recorded them when it was made (git/trailers.py,
    `Memsync-Changes`), else from the cache, else counted from its diff (a version made by plain
    git, an older memsync, a merge, or one whose message was copied onto other trees)."""
    v = history.changes(mem.git, oid, deltas=False)
    recorded = recorded_changes(parse(v.message), v.tree, v.parent_tree) if cache.recorded else None
    if recorded is not None:
        files, added, removed, copies = recorded
        return v, Summary(files, added, removed, tuple(copies))
    summary = cache.get(oid)
    if summary is None:
        v = history.changes(mem.git, oid)
        summary = summarize(v)
        cache.put(oid, summary)
    return v, summary


def _entry(mem: Memory, oid: str, cache: _Counted, rel: str | None) -> LogEntry:
    v, summary = _summary(mem, oid, cache)
    trailers = parse(v.message)
    actor = first(trailers, "Memsync-Actor") or "git"
    merge = len(v.parents) > 1
    entry = LogEntry(
        version=v.oid[:8], oid=v.oid, time=rfc3339(v.time), actor=actor,
        run_id=first(trailers, "Memsync-Run-Id"),
        exit_code=_int(first(trailers, "Memsync-Exit-Code")),
        checkpoint=_int(first(trailers, "Memsync-Checkpoint")),
        merge=merge, end=actor == "run" and not merge and first(trailers, "Memsync-Exit-Code") is not None,
        subject=v.message.split("\n", 1)[0].strip(),
        files_changed=summary.files_changed, bytes_added=summary.bytes_added, bytes_removed=summary.bytes_removed,
        flags=every(trailers, "Memsync-Flag"), policies=every(trailers, "Memsync-Policy"),
        copies=list(summary.copies), restored_from=every(trailers, "Memsync-Restored-From"),
        reverted=every(trailers, "Memsync-Reverted"),
        accepted_proposal=first(trailers, "Memsync-Accepted-Proposal"),
    )
    if first(trailers, REDACTION_BASE):  # a redaction record: history below it was rewritten
        what = first(trailers, "Memsync-Redacted") or "content"
        entry.flags.append(f"redaction of {what}: {len(every(trailers, 'Memsync-Rewritten'))} version(s) rewritten")
    if rel is not None:
        entry.file = _file_state(mem, v, rel)
    return entry


def _file_state(mem: Memory, v: VersionChanges, rel: str) -> FileState:
    blob = history.blob_at(mem.git, v.oid, rel)
    if blob is None:
        return FileState(rel, "deleted", None, None)
    parent = v.parents[0] if v.parents else None
    existed = parent is not None and history.blob_at(mem.git, parent, rel) is not None
    data = blob[0]
    return FileState(rel, "modified" if existed else "added", len(data), hashlib.sha256(data).hexdigest())


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def relative(mem: Memory, start: Path, path: str) -> str:
    """A user's PATH (relative to where they are) as a path inside the memory."""
    root = mem.root.resolve()
    full = Path(os.path.normpath(start.resolve() / path))
    try:
        rel = full.relative_to(root)
    except ValueError:
        raise UsageError(f"{path} is outside the memory {mem.name!r} ({root})",
                         "give a path inside the memory directory") from None
    text = rel.as_posix()
    if text in ("", ".") or text == ".git" or text.startswith((".git/", ".vm0")):
        if text in ("", "."):
            return ""
        raise UsageError(f"{path} is memsync's own data, not part of the memory")
    return text


__all__ = ["FileState", "LogEntry", "LogResult", "log", "relative"]
