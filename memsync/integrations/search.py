"""grep over a memory: its current files, and optionally the lines its past versions held that the
current files no longer do (what was overwritten or deleted, and in which version)."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from memsync.core.memory import Memory
from memsync.errors import UsageError
from memsync.git import history

MAX_FILE_BYTES = 2_000_000  # bigger files are not searched
MAX_LINE_CHARS = 400  # a matching line is shown cut to this
MAX_VERSIONS = 500  # history search looks at most this far back


@dataclass(frozen=True)
class Hit:
    path: str
    line: int
    text: str
    version: str | None = None  # None: the current file; else the past version that held the line


def compile_pattern(pattern: str, ignore_case: bool) -> re.Pattern[str]:
    try:
        return re.compile(pattern, re.IGNORECASE if ignore_case else 0)
    except re.error as exc:
        raise UsageError(f"bad regular expression {pattern!r}: {exc}", "write a Python `re` pattern") from None


def search(mem: Memory, pattern: str, *, under: str = "", past: bool = False, ignore_case: bool = False,
           limit: int = 50) -> tuple[list[Hit], bool]:
    """Matching lines (current files first, then past versions, newest first); True if cut at `limit`."""
    rx = compile_pattern(pattern, ignore_case)
    hits: list[Hit] = []
    current: set[tuple[str, str]] = set()
    for rel in _work_files(mem.root, under):
        for no, line in _matches(rx, _read(mem.root / rel)):
            current.add((rel, line))
            if len(hits) >= limit:
                return hits, True
            hits.append(Hit(rel, no, _cut(line)))
    if not past:
        return hits, False
    head = mem.git.head_oid()
    if head is None:
        return hits, False
    from memsync.sync import shallow

    shallow.complete(mem)  # a shallow clone's older versions are searched too
    seen = set(current)
    for count, version in enumerate(history.walk(mem.git, head)):
        if count >= MAX_VERSIONS:
            break
        for delta in version.deltas:
            if delta.kind == "deleted" or not _under(delta.path, under):
                continue
            blob = history.blob_at(mem.git, version.oid, delta.path)
            if blob is None or len(blob[0]) > MAX_FILE_BYTES:
                continue
            for no, line in _matches(rx, blob[0]):
                if (delta.path, line) in seen:
                    continue
                seen.add((delta.path, line))
                if len(hits) >= limit:
                    return hits, True
                hits.append(Hit(delta.path, no, _cut(line), version.oid[:8]))
    return hits, False


def _work_files(root: Path, under: str) -> list[str]:
    start = root / under if under else root
    if start.is_file():
        return [under]
    found: list[str] = []
    for dirpath, dirnames, filenames in os.walk(start):
        rel_dir = Path(dirpath).relative_to(root).as_posix()
        dirnames[:] = sorted(d for d in dirnames if not (rel_dir == "." and d in (".git", ".vm0")) and d != ".git")
        for name in sorted(filenames):
            path = Path(dirpath) / name
            if not path.is_symlink():
                found.append(path.relative_to(root).as_posix())
    return found


def _under(path: str, under: str) -> bool:
    return not under or path == under or path.startswith(under.rstrip("/") + "/")


def _read(path: Path) -> bytes:
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            return b""
        return path.read_bytes()
    except OSError:
        return b""


def _matches(rx: re.Pattern[str], data: bytes) -> list[tuple[int, str]]:
    if b"\0" in data[:8192]:
        return []
    text = data.decode("utf-8", errors="replace")
    return [(no, line) for no, line in enumerate(text.splitlines(), 1) if rx.search(line)]


def _cut(line: str) -> str:
    return line if len(line) <= MAX_LINE_CHARS else line[:MAX_LINE_CHARS] + "…"


__all__ = ["Hit", "search"]
