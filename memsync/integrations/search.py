"""grep over a memory: its current files, and optionally the lines its past versions held that the
current files no longer do (what was overwritten or deleted, and in which version).

The pattern comes from an agent, so a search has a budget: a pattern of at most MAX_PATTERN_CHARS,
MAX_SCAN_BYTES of text and TIME_BUDGET seconds. Python's `re` cannot be interrupted and holds the
GIL while it backtracks (`(a|aa)+$` on a 41-character line runs for minutes and stops every thread
of the MCP server with it), so patterns run on the `regex` module, which takes a timeout and lets
other threads run. A search that runs out of budget is refused, never answered with a partial
"no matches": an agent told its notes do not exist is the failure this tool exists to prevent.
"""

from __future__ import annotations

import stat
import time
from collections.abc import Iterator

import regex

from memsync.core.memory import Memory
from memsync.errors import UsageError
from memsync.git import history
from memsync.integrations.memtree import MemoryTree
from memsync.util.records import field, recordclass

MAX_BLOB_BYTES = 64_000_000  # a past version bigger than this is not searched (git hands it over whole)
PAGE_BYTES = 1 << 20  # a current file is read this much at a time, whatever its size
MAX_LINE_CHARS = 400  # a matching line is shown cut to this
MAX_VERSIONS = 500  # history search looks at most this far back
MAX_PATTERN_CHARS = 1_000
MAX_UNROLLED = 100_000  # what compiling a pattern may unroll (nested counted repetition)
MAX_SCAN_BYTES = 200_000_000  # text one search reads, current files and past versions together
TIME_BUDGET = 5.0  # seconds one search may take


class OverBudget(UsageError):
    """The search ran out of time or of text to read before it finished."""


@recordclass(frozen=True)
class Hit:
    path: str
    line: int
    text: str
    version: str | None = None  # None: the current file; else the past version that held the line


@recordclass
class Found:
    """What a search found, whether `limit` cut it, and what it did not look at (so that an empty
    `hits` is "no matches" only when `unsearched` is empty too)."""

    hits: list[Hit] = field(default_factory=list)
    cut: bool = False
    unsearched: list[str] = field(default_factory=list)


class _Budget:
    def __init__(self, seconds: float, max_bytes: int) -> None:
        self.seconds = seconds
        self.deadline = time.monotonic() + seconds
        self.left = max_bytes

    def read(self, path: str, size: int) -> None:
        self.left -= size
        if self.left < 0:
            raise OverBudget(f"search stopped: it would read more than {MAX_SCAN_BYTES:,} bytes (at {path}), "
                             "so it cannot say what the rest holds",
                             "narrow it with `path`, or search without history")

    def timeout(self, path: str) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise self.expired(path)
        return left

    def expired(self, path: str) -> OverBudget:
        return OverBudget(f"search stopped after {self.seconds:g} s (at {path}) before it finished, so it cannot "
                          "say what the rest holds; the pattern may backtrack without end (nested repetition "
                          "such as (a|aa)+ or (a+)+)",
                          "simplify the pattern (a plain word finds most notes), or narrow it with `path`")


_COUNT = regex.compile(r"\{(\d*)(?:,\d*)?\}")


def unrolled(pattern: str) -> int:
    """About how many items compiling `pattern` makes: the `regex` module unrolls a repetition's
    minimum count, so `(?:(?:a{100}){100}){100}`, 26 characters, takes 2 GB and 14 s to compile
    (the match timeout does not cover compiling). Each item counts 1; a group counts 1 plus its
    content; a count {n} or {n,m} multiplies what it repeats by n."""
    stack: list[int] = []
    total = last = 0
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            last, i = 1, i + 2
        elif ch == "[":
            j = i + 1 + (pattern[i + 1:i + 2] == "^")
            j += pattern[j:j + 1] == "]"
            while j < len(pattern) and pattern[j] != "]":
                j += 2 if pattern[j] == "\\" else 1
            last, i = 1, j + 1
        elif ch == "(":
            stack.append(total)
            total, last, i = 0, 0, i + 1
            continue
        elif ch == ")" and stack:
            last = 1 + total
            total, i = stack.pop(), i + 1
        elif ch == "{" and (m := _COUNT.match(pattern, i)) is not None:
            total += last * (max(1, int(m.group(1) or 0)) - 1)
            last, i = last * max(1, int(m.group(1) or 0)), m.end()
            continue
        else:
            last, i = 1, i + 1
        total += last
    return total + sum(stack)


def compile_pattern(pattern: str, ignore_case: bool) -> regex.Pattern[str]:
    if len(pattern) > MAX_PATTERN_CHARS:
        raise UsageError(f"the pattern is {len(pattern):,} characters long, more than {MAX_PATTERN_CHARS:,}",
                         "search for a shorter part of the text")
    if unrolled(pattern) > MAX_UNROLLED:
        raise UsageError(f"the pattern repeats too much to compile (counts that multiply past {MAX_UNROLLED:,}, "
                         "such as (?:(?:a{100}){100}){100})", "use + or * rather than large nested counts")
    try:
        return regex.compile(pattern, regex.V0 | (regex.IGNORECASE if ignore_case else 0))
    except (regex.error, OverflowError, RecursionError, ValueError) as exc:
        raise UsageError(f"bad regular expression {pattern[:200]!r}: {exc}", "write a Python `re` pattern") from None


def search(mem: Memory, pattern: str, *, under: str = "", past: bool = False, ignore_case: bool = False,
           limit: int = 50, seconds: float = TIME_BUDGET, max_bytes: int = MAX_SCAN_BYTES,
           max_versions: int = MAX_VERSIONS, root_id: tuple[int, int] | None = None) -> Found:
    """Matching lines (current files first, then past versions, newest first), and what was not
    searched (past versions over MAX_BLOB_BYTES, versions past `max_versions` or never fetched).
    Current files are read in pages through the memory's folder descriptors, never through a
    symlink (memtree.py), whatever their size; `root_id`: the (device, inode) the memory's folder
    must still have (a session's).
    OverBudget when the pattern, the time or the text read exceeds the budget."""
    rx = compile_pattern(pattern, ignore_case)
    budget = _Budget(seconds, max_bytes)
    found = Found()
    hits = found.hits
    current: set[tuple[str, str]] = set()
    big: list[str] = []
    with MemoryTree(mem.root, root_id) as tree:
        for rel in _work_files(tree, under):
            for no, line in _paged_matches(rx, tree, rel, budget):
                current.add((rel, line))
                if len(hits) >= limit:
                    found.cut = True
                    return _noted(found, big)
                hits.append(Hit(rel, no, _cut(line)))
    if not past:
        return _noted(found, big)
    head = mem.git.head_oid()
    if head is None:
        return _noted(found, big)
    from memsync.git.repo import GitRepo
    from memsync.sync import shallow
    from memsync.util.records import replace

    # A repository object of its own: the session's may have read this history while it was still
    # shallow (another tool completed it since), and would stop the walk where the clone stopped.
    mem = replace(mem, git=GitRepo.open(mem.root))
    if not shallow.complete(mem):  # a shallow clone's older versions are searched too
        found.unsearched.append(f"the versions before {(shallow.roots(mem) or ['?'])[0][:8]} (the clone left "
                                "them out and the hub could not give them)")
    seen = set(current)
    for count, version in enumerate(history.walk(mem.git, head)):
        if count >= max_versions:
            found.unsearched.append(f"versions older than the newest {max_versions} (from {version.oid[:8]} back)")
            break
        for delta in version.deltas:
            if delta.kind == "deleted" or not _under(delta.path, under):
                continue
            blob = history.blob_at(mem.git, version.oid, delta.path)
            if blob is None:
                continue
            if len(blob[0]) > MAX_BLOB_BYTES:
                big.append(f"{delta.path} in {version.oid[:8]}")
                continue
            for no, line in _matches(rx, blob[0], f"{delta.path} in {version.oid[:8]}", budget):
                if (delta.path, line) in seen:
                    continue
                seen.add((delta.path, line))
                if len(hits) >= limit:
                    found.cut = True
                    return _noted(found, big)
                hits.append(Hit(delta.path, no, _cut(line), version.oid[:8]))
    return _noted(found, big)


def _noted(found: Found, big: list[str]) -> Found:
    if big:
        more = f" and {len(big) - 3} more" if len(big) > 3 else ""
        found.unsearched.append(f"past versions over {MAX_BLOB_BYTES:,} bytes: {', '.join(big[:3])}{more}")
    return found


def _work_files(tree: MemoryTree, under: str) -> list[str]:
    """The regular files at or below `under` ('' for all), never through a symlink; memsync's own
    folders are left out."""
    st = tree.lstat(under) if under else None
    if st is not None and stat.S_ISREG(st.st_mode):
        return [under]
    if under and (st is None or not stat.S_ISDIR(st.st_mode)):
        return []
    found = []
    for rel in tree.files_under(under):
        if rel.split("/")[0] in (".git", ".vm0"):
            continue
        st = tree.lstat(rel)
        if st is not None and stat.S_ISREG(st.st_mode):
            found.append(rel)
    return found


def _under(path: str, under: str) -> bool:
    return not under or path == under or path.startswith(under.rstrip("/") + "/")


def _lines(pages: Iterator[bytes]) -> Iterator[bytes]:
    """The lines of a file read page by page (a line split between two pages comes whole)."""
    carry = b""
    for page in pages:
        parts = (carry + page).split(b"\n")
        carry = parts.pop()
        yield from parts
    if carry:
        yield carry


def _paged_matches(rx: regex.Pattern[str], tree: MemoryTree, rel: str,
                   budget: _Budget) -> Iterator[tuple[int, str]]:
    """Matching lines of a current file, read PAGE_BYTES at a time (binary files are skipped)."""
    try:
        pages = tree.chunks(rel, PAGE_BYTES)
        first = next(pages, b"")
    except OSError:  # gone, or a symlink now: not the memory's file
        return
    if b"\0" in first[:8192]:
        return

    def all_pages() -> Iterator[bytes]:
        budget.read(rel, len(first))
        yield first
        for page in pages:
            budget.read(rel, len(page))
            yield page

    try:
        for no, raw in enumerate(_lines(all_pages()), 1):
            line = raw.decode("utf-8", errors="replace").rstrip("\r")
            if _hit(rx, line, f"{rel}:{no}", budget):
                yield no, line
    except OSError:
        return


def _hit(rx: regex.Pattern[str], line: str, where: str, budget: _Budget) -> bool:
    try:  # concurrent: the GIL is released, so the server's other threads run meanwhile
        return rx.search(line, timeout=budget.timeout(where), concurrent=True) is not None
    except TimeoutError:
        raise budget.expired(where) from None


def _matches(rx: regex.Pattern[str], data: bytes, where: str, budget: _Budget) -> list[tuple[int, str]]:
    if b"\0" in data[:8192]:
        return []
    budget.read(where, len(data))
    text = data.decode("utf-8", errors="replace")
    found = []
    for no, line in enumerate(text.splitlines(), 1):
        try:  # concurrent: the GIL is released, so the server's other threads run meanwhile
            if rx.search(line, timeout=budget.timeout(where), concurrent=True):
                found.append((no, line))
        except TimeoutError:
            raise budget.expired(f"{where}:{no}") from None
    return found


def _cut(line: str) -> str:
    return line if len(line) <= MAX_LINE_CHARS else line[:MAX_LINE_CHARS] + "…"


__all__ = ["MAX_PATTERN_CHARS", "TIME_BUDGET", "Found", "Hit", "OverBudget", "search"]
