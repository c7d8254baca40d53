"""What each page shows, as records: read from a hub's history, never printed, never HTML
(the templates render them, escaped). Every list is a page of at most `per` rows."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

from memsync.errors import UsageError
from memsync.git import history
from memsync.git.hub import memsync_home
from memsync.git.repo import GitRepo
from memsync.git.trailers import every, first, parse
from memsync.history.log import summarize
from memsync.history.summaries import Summaries, Summary
from memsync.sync.hubs import last_run
from memsync.ui.hubview import HubView, NotFound
from memsync.util.names import is_conflict_copy, is_gathered
from memsync.util.records import field, recordclass
from memsync.util.timefmt import rfc3339

PER_PAGE = 50
PROPOSAL_TRAILER = "Memsync-Accepted-Proposal"
RECENT = 200  # versions looked at for a memory's flag count on the first page


@recordclass
class MemoryRow:
    name: str
    type: str
    version: str
    files: int
    size: int
    updated: str
    last_run: str | None
    last_exit: int | None
    flagged: int  # flagged versions among the last RECENT
    proposals: int = 0  # open proposals on the hub


@recordclass
class Row:
    """One version on a timeline, a file's history or a run."""

    oid: str
    time: str
    actor: str  # run | operator | watch | git
    run_id: str | None
    operator: str | None  # who, for a version not made by a run
    proposal: str | None  # the proposal this version accepted
    exit_code: int | None
    checkpoint: int | None
    merge: bool
    subject: str
    files_changed: int
    bytes_added: int
    bytes_removed: int
    flags: list[str] = field(default_factory=list)
    policies: list[str] = field(default_factory=list)
    size: int | None = None  # a file's history: its size at this version (None: deleted)
    state: str | None = None  # a file's history: added | modified | deleted

    @property
    def short(self) -> str:
        return self.oid[:8]


@recordclass
class Page:
    rows: list[Row]
    page: int
    more: bool


def _summaries() -> Summaries:
    return Summaries(memsync_home() / "cache" / "versions.db")


@recordclass
class Listed:
    """A page of a list that is not versions (memories, conflict files, a run's files)."""

    items: list[Any]
    page: int
    more: bool


def cut(items: list[Any], page: int, per: int = PER_PAGE) -> Listed:
    return Listed(items[page * per:(page + 1) * per], page, len(items) > (page + 1) * per)


def memories(view: HubView, page: int) -> Listed:
    """A page of the memories, by name; only the page's own trees are read."""
    view.refresh()
    shown = cut(view.memories(), page)
    found = []
    for name, kind, oid in shown.items:
        files, size = view.git.tree_stats(oid)
        run = last_run(view.git, oid)
        flagged = sum(1 for _, _, message in _head(history.messages(view.git, oid, stream=True), RECENT)
                      if every(parse(message), "Memsync-Flag"))
        found.append(MemoryRow(name, kind, oid[:8], files, size, rfc3339(view.git.commit_info(oid).time),
                               run.run_id if run else None, run.exit_code if run else None, flagged,
                               view.open_proposals(name)))
    return Listed(found, page, shown.more)


def _head(it: Iterator[tuple[str, int, str]], n: int) -> Iterator[tuple[str, int, str]]:
    for i, item in enumerate(it):
        if i >= n:
            return
        yield item


def summary(git: GitRepo, oid: str, cache: Summaries) -> Summary:
    found = cache.get(oid)
    if found is None:
        found = summarize(history.changes(git, oid))
        cache.put(oid, found)
    return found


def row(git: GitRepo, oid: str, message: str, cache: Summaries) -> Row:
    info = git.commit_info(oid)
    trailers = parse(message)
    actor = first(trailers, "Memsync-Actor") or "git"
    s = summary(git, oid, cache)
    host = first(trailers, "Memsync-Host")
    who = None if actor == "run" else (info.author_name + (f" on {host}" if host else ""))
    return Row(oid, rfc3339(info.time), actor, first(trailers, "Memsync-Run-Id"), who,
               first(trailers, PROPOSAL_TRAILER), _int(first(trailers, "Memsync-Exit-Code")),
               _int(first(trailers, "Memsync-Checkpoint")), len(info.parents) > 1,
               message.split("\n", 1)[0].strip(), s.files_changed, s.bytes_added, s.bytes_removed,
               every(trailers, "Memsync-Flag"), every(trailers, "Memsync-Policy"))


def timeline(git: GitRepo, tip: str, page: int, per: int = PER_PAGE) -> Page:
    """One row per version, newest first (as `memsync log` orders them when streaming)."""
    rows: list[Row] = []
    skip = page * per
    cache = _summaries()
    try:
        for n, (oid, _, message) in enumerate(history.messages(git, tip, stream=True)):
            if n < skip:
                continue
            if len(rows) == per:
                return Page(rows, page, True)
            rows.append(row(git, oid, message, cache))
    finally:
        cache.close()
    return Page(rows, page, False)


def check_path(path: str) -> str:
    """A path a page names, as a tree would hold it: relative, no empty, `.` or `..` part."""
    parts = path.split("/")
    if not path or "\0" in path or any(p in ("", ".", "..") for p in parts) or len(path) > 4096:
        raise NotFound(f"{path!r} is not a path in a memory", "the timeline and diffs link to every file")
    return path


def file_history(git: GitRepo, tip: str, path: str, page: int, per: int = PER_PAGE) -> Page:
    """The versions that changed `path`, with its size after each; flags naming it stay on the row."""
    check_path(path)
    rows: list[Row] = []
    skip = page * per
    seen = 0
    cache = _summaries()
    try:
        for oid, _, message in history.messages(git, tip, stream=True):
            if not history.touches(git, oid, path):
                continue
            seen += 1
            if seen <= skip:
                continue
            if len(rows) == per:
                return Page(rows, page, True)
            r = row(git, oid, message, cache)
            blob = history.blob_at(git, oid, path)
            parents = git.commit_info(oid).parents
            existed = bool(parents) and history.blob_at(git, parents[0], path) is not None
            r.size = None if blob is None else len(blob[0])
            r.state = "deleted" if blob is None else ("modified" if existed else "added")
            rows.append(r)
    finally:
        cache.close()
    if not rows and page == 0 and history.blob_at(git, tip, path) is None:
        raise NotFound(f"no file {path!r} in this memory's history", "the timeline lists what each version changed")
    return Page(rows, page, False)


def flags_naming(r: Row, path: str) -> list[str]:
    return [f for f in r.flags if path in f.split()]


@recordclass
class RunView:
    run_id: str
    rows: list[Row]
    base: str  # tree before the run's first version
    result: str | None  # tree after its last, when its versions are one chain (else None)


def run(git: GitRepo, tip: str, run_id: str) -> RunView:
    """The versions a run made itself (not its merges), oldest first; with one chain of them,
    the trees its whole change goes between."""
    found: list[tuple[str, str]] = []
    for oid, parents, message in history.messages(git, tip):
        if parents <= 1 and first(parse(message), "Memsync-Run-Id") == run_id:
            found.append((oid, message))
    if not found:
        raise NotFound(f"run {run_id!r} made no version in this memory", "the timeline lists the runs")
    found.reverse()
    cache = _summaries()
    try:
        rows = [row(git, oid, message, cache) for oid, message in found]
    finally:
        cache.close()
    oids = [oid for oid, _ in found]
    chained = all(history.first_parent(git, b) == a for a, b in itertools.pairwise(oids))
    base = history.tree_of(git, history.first_parent(git, oids[0]))
    return RunView(run_id, rows, base, history.tree_of(git, oids[-1]) if chained else None)


@recordclass
class Version:
    row: Row
    message: str
    trailers: list[tuple[str, str]]
    parents: list[str]
    patches: list[history.FilePatch]
    page: int
    more: bool
    total: int


FILES_PER_PAGE = 40


def version(git: GitRepo, spec: str, page: int) -> Version:
    oid = resolve(git, spec)
    info = git.commit_info(oid)
    cache = _summaries()
    try:
        r = row(git, oid, info.message, cache)
    finally:
        cache.close()
    parent = info.parents[0] if info.parents else None
    patches = history.diff(git, history.tree_of(git, parent), history.tree_of(git, oid))
    shown = patches[page * FILES_PER_PAGE:(page + 1) * FILES_PER_PAGE]
    return Version(r, info.message, parse(info.message), list(info.parents), shown, page,
                   len(patches) > (page + 1) * FILES_PER_PAGE, len(patches))


def resolve(git: GitRepo, spec: str) -> str:
    """A version named by a page: hex digits only (no ref or revision syntax from a URL)."""
    if not (4 <= len(spec) <= 40) or any(c not in "0123456789abcdef" for c in spec):
        raise NotFound(f"{spec!r} is not a version", "versions are hex digits, as the timeline shows them")
    try:
        return history.resolve(git, spec)
    except UsageError as exc:
        raise NotFound(exc.message, exc.hint) from None


MAX_SHOWN = 1024 * 1024  # bytes of a file's content a page shows


@recordclass
class Content:
    path: str
    oid: str
    text: str | None  # None: binary (holds a NUL byte)
    size: int
    cut: bool = False  # only the first MAX_SHOWN bytes are in `text`


def content(git: GitRepo, spec: str, path: str) -> Content:
    oid = resolve(git, spec)
    blob = history.blob_at(git, oid, check_path(path))
    if blob is None:
        raise NotFound(f"{path!r} is not a file at version {oid[:8]}", "its history lists the versions that have it")
    data = blob[0]
    text = None if b"\0" in data else data[:MAX_SHOWN].decode("utf-8", errors="replace")
    return Content(path, oid, text, len(data), len(data) > MAX_SHOWN)


@recordclass
class ConflictEntry:
    id: str
    path: str | None  # the file it is a losing version of
    run: str | None
    version: str | None
    size: int | None


@recordclass
class ConflictFile:
    path: str  # the gathered file, or an old-style conflict copy
    of: str | None  # an old-style copy: the path it is a version of
    entries: list[ConflictEntry]


def conflicts(git: GitRepo, tip: str) -> list[ConflictFile]:
    """Gathered conflict files (and old-style copies) in the memory's newest version: what is
    waiting to be folded."""
    from memsync.checks import gathered
    from memsync.util.names import conflict_copy_source

    found = []
    for path, (blob, _) in sorted(history.tree_files(git, history.tree_of(git, tip)).items()):
        if is_gathered(path):
            parsed = gathered.parse(history.read_blob(git, blob))
            entries = [ConflictEntry(e.id, e.path, e.field("run"), e.field("version"), e.size)
                       for e in parsed.entries.values()]
            found.append(ConflictFile(path, None, entries))
        elif is_conflict_copy(path):
            found.append(ConflictFile(path, conflict_copy_source(path), []))
    return found


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None
