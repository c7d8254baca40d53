"""Reading losing versions back out of gathered conflict files, for tests that used to look for
sibling `NAME.conflict-*` copies."""

from __future__ import annotations

from memsync.checks import gathered
from memsync.util.names import gathered_name


def losers(files: dict[str, bytes], path: str) -> list[bytes]:
    """The inlined losing versions of `path` in its gathered file in `files` (path -> bytes), in file order."""
    data = files.get(gathered_name(path))
    if data is None:
        return []
    return [e.inline() or b"" for e in gathered.parse(data).entries.values() if e.path == path]


def gathered_files(files: dict[str, bytes] | list[str]) -> list[str]:
    return sorted(p for p in files if p.endswith(".conflicts.md"))
