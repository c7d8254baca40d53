"""What a proposed version would forget: every line of the current version that appears nowhere
in the proposed tree, grouped by file.

A consolidation folds many notes into few; what it keeps may move to another file and be
re-indented, so a line counts as kept when the same line (white space around it stripped)
appears in any text file of the proposed tree. Blank lines and lines without a letter or digit
(`---`, fences) are not counted. Exact for text files; a binary file (or one past the size
limit) is only checked as a whole (kept when the same bytes are somewhere in the proposed
tree), and the report says which files were judged so.
"""

from __future__ import annotations

from memsync.checks.guard import is_binary
from memsync.git import proposaltree
from memsync.git.repo import GitRepo
from memsync.util.records import field, recordclass

MAX_TEXT = 8 * 1024 * 1024  # a file larger than this is compared as a whole
MAX_SHOWN = 200  # forgotten lines kept per file in the report (counts are always whole)


@recordclass
class ForgottenFile:
    path: str
    count: int  # forgotten lines (all of them, when `exact`)
    total: int  # counted lines of the current file
    lines: list[str] = field(default_factory=list)  # the first MAX_SHOWN of them
    exact: bool = True  # False: a binary or too large file, judged as a whole
    gone: bool = False  # the file itself is not in the proposed tree


@recordclass
class ForgettingReport:
    current: str
    proposed: str
    files: list[ForgottenFile] = field(default_factory=list)
    lines: int = 0  # forgotten lines, all files
    total: int = 0  # counted lines of the current version's text files
    kept_files: int = 0  # current files whose every line is somewhere in the proposed tree
    inexact: list[str] = field(default_factory=list)  # files judged as a whole (binary, too large)

    @property
    def exact(self) -> bool:
        return not self.inexact


def _counted(line: bytes) -> bool:
    return any(c.isalnum() for c in line.decode("utf-8", "replace"))


def _lines(data: bytes) -> list[bytes]:
    return [s for s in map(bytes.strip, data.splitlines()) if s and _counted(s)]


def report(git: GitRepo, current: str, proposed: str) -> ForgettingReport:
    """The forgetting report of the version `proposed` against `current` (commit ids)."""
    result = ForgettingReport(current, proposed)
    proposed_blobs: set[str] = set()
    kept_lines: set[bytes] = set()
    for _path, oid, size in proposaltree.files(git, proposed):
        if oid in proposed_blobs:
            continue
        proposed_blobs.add(oid)
        if size <= MAX_TEXT:
            data = proposaltree.blob(git, oid)
            if not is_binary(data):
                kept_lines.update(_lines(data))
    proposed_paths = {path for path, _oid, _size in proposaltree.files(git, proposed)}
    for path, oid, size in sorted(proposaltree.files(git, current)):
        read = proposaltree.blob(git, oid) if size <= MAX_TEXT else None
        if read is None or is_binary(read):
            result.inexact.append(path)
            if oid not in proposed_blobs:
                result.files.append(ForgottenFile(path, 1, 1, exact=False, gone=path not in proposed_paths))
            continue
        lines = _lines(read)
        result.total += len(lines)
        if oid in proposed_blobs:
            result.kept_files += 1
            continue
        lost = [line for line in lines if line not in kept_lines]
        if not lost:
            result.kept_files += 1
            continue
        shown = [line.decode("utf-8", "replace") for line in lost[:MAX_SHOWN]]
        result.files.append(ForgottenFile(path, len(lost), len(lines), shown, gone=path not in proposed_paths))
        result.lines += len(lost)
    return result


__all__ = ["ForgettingReport", "ForgottenFile", "report"]
