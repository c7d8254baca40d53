"""The gathered conflict file: every losing version of one path in one Markdown file.

When two writers change the same file and no merge can keep both changes at the path, the local
version stays there and the other one is added to `gathered_name(path)` (names.py), e.g.
`notes/summary.md` -> `notes/summary.conflicts.md`. However many runs conflict, a path has at most
that one file beside it, and it only grows by entries. Each entry is a block of its own:

    <!-- memsync-conflict 1f2e3d4c-9a8b7c6d 20261126T024012Z -->
    ## notes/summary.md, version 1f2e3d4c of run 20261126T024011123Z-3f9a1c0b7e2d
    ...a list: path, run, version, time, blob, size, how to restore it...
    ````text
    the losing version, byte for byte (fenced with more backticks than it ever holds in a row)
    ````

Text that is not UTF-8, or holds NUL bytes, is not inlined: the entry names its blob, which the
restore command reads from the memory's history. An entry's id (the version's and the blob's first
8 hex digits) is the same whoever writes it, so two runs that gather at once merge by a union of
entries (`merge3`), in a stable order (time, then id), and a file never splits in two.
"""

from __future__ import annotations

import re
from datetime import datetime

from memsync.util.records import recordclass

MARK_RE = re.compile(r"^<!-- memsync-conflict (?P<id>[0-9a-z-]{1,40}) (?P<time>\d{8}T\d{6}Z) -->$", re.M)
_FIELD_RE = re.compile(r"^- (?P<key>[a-z ]+): `(?P<value>[^`\n]*)`", re.M)
_SIZE_RE = re.compile(r"^- size: (?P<size>\d+) bytes", re.M)


@recordclass(frozen=True)
class Loser:
    """One losing version, as the merge found it."""

    path: str
    data: bytes
    blob: str  # its git blob id (40 hex)
    run: str  # the run id (or host, or "revert") of the side it came from
    version: str | None  # the commit it came from; None when it is not one (a revert's undone side)
    when: datetime

    @property
    def id(self) -> str:
        return f"{(self.version or 'none')[:8]}-{self.blob[:8]}"


@recordclass(frozen=True)
class Entry:
    """One entry read back from a gathered file."""

    id: str
    time: str
    text: str  # the whole block, from its marker to the next one

    def field(self, key: str) -> str | None:
        m = next((m for m in _FIELD_RE.finditer(self.text) if m.group("key") == key), None)
        return m.group("value") if m else None

    @property
    def path(self) -> str | None:
        return self.field("path")

    @property
    def blob(self) -> str | None:
        return self.field("blob")

    @property
    def size(self) -> int | None:
        m = _SIZE_RE.search(self.text)
        return int(m.group("size")) if m else None

    def inline(self) -> bytes | None:
        """The content as written in the entry, or None when it was not inlined. The fence adds
        a last newline to content that has none: the recorded size says whether to take it off."""
        m = re.search(r"^(?P<fence>`{3,})text\n", self.text, re.M)
        if m is None:
            return None
        fence = m.group("fence")
        end = self.text.find("\n" + fence + "\n", m.end() - 1)
        if end < 0:
            return None
        data = self.text[m.end():end + 1].encode("utf-8")
        if data == b"\n" and self.size == 0:
            return b""
        if self.size is not None and len(data) == self.size + 1:
            return data[:-1]
        return data


@recordclass(frozen=True)
class Gathered:
    preamble: str
    entries: dict[str, Entry]


def header(path: str) -> str:
    name = path.rsplit("/", 1)[-1]
    return (f"# Versions of {path} that lost a concurrent edit\n\n"
            f"Another writer changed `{path}` at the same time; the version now at `{name}` won, and\n"
            "every other version is kept below, each with the run and version it came from.\n"
            f"Fold what is worth keeping into `{name}`, then delete this file (deleting it is how\n"
            "the next writer knows it was folded; a version added meanwhile is kept).\n"
            f"One version back exactly: `memsync restore {path} --conflict ID`.\n\n")


def can_name(path: str) -> bool:
    """Whether an entry can name `path` in its one-line fields: a path holding a backtick or a line
    break keeps the old sibling copy instead (git allows both in names)."""
    return not any(c in path for c in "`\n\r")


def text_of(data: bytes) -> str | None:
    """`data` as text when it can be inlined byte for byte; None for binary or non-UTF-8 bytes."""
    if b"\0" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def entry_for(loser: Loser) -> Entry:
    stamp = f"{loser.when:%Y%m%dT%H%M%SZ}"
    version = loser.version or "none (not a committed version)"
    lines = [f"<!-- memsync-conflict {loser.id} {stamp} -->",
             f"## {loser.path}: version {loser.version[:8] if loser.version else '-'} of {loser.run}",
             "",
             f"- id: `{loser.id}`",
             f"- path: `{loser.path}`",
             f"- run: `{loser.run}`",
             f"- version: `{version}`",
             f"- time: `{loser.when:%Y-%m-%dT%H:%M:%SZ}`",
             f"- blob: `{loser.blob}`",
             f"- size: {len(loser.data)} bytes",
             f"- restore: `memsync restore {loser.path} --conflict {loser.id}`"]
    text = text_of(loser.data)
    if text is None:
        lines += ["", "Not text (binary or not UTF-8): not shown here. The restore command above reads it "
                  f"from the memory's history (`git cat-file blob {loser.blob}` does too).", ""]
    else:
        longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
        fence = "`" * max(3, longest + 1)
        body = text if text.endswith("\n") else text + "\n"
        lines += ["", f"{fence}text", body + fence, ""]
    return Entry(loser.id, stamp, "\n".join(lines) + "\n")


def parse(data: bytes) -> Gathered:
    """Never fails: text before the first marker is the preamble; a block runs from its marker to
    the next one, so whatever an agent wrote between entries stays with the entry above it."""
    text = data.decode("utf-8", errors="surrogateescape")
    marks = _marks(text)
    preamble = text[:marks[0].start()] if marks else text
    entries: dict[str, Entry] = {}
    for i, m in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(text)
        entries.setdefault(m.group("id"), Entry(m.group("id"), m.group("time"), text[m.start():end]))
    return Gathered(preamble, entries)


def _marks(text: str) -> list[re.Match[str]]:
    """Entry markers outside fenced content (a losing version may itself quote a marker)."""
    found: list[re.Match[str]] = []
    fence: str | None = None
    pos = 0
    for bare in text.split("\n"):
        if fence is None:
            opening = re.match(r"^(`{3,})text$", bare)
            if opening:
                fence = opening.group(1)
            else:
                m = MARK_RE.match(text, pos, pos + len(bare))
                if m:
                    found.append(m)
        elif bare == fence:
            fence = None
        pos += len(bare) + 1
    return found


def render(gathered: Gathered) -> bytes:
    """The file: its preamble (the header, when it has none), then the entries by (time, id)."""
    entries = sorted(gathered.entries.values(), key=lambda e: (e.time, e.id))
    blocks = [e.text if e.text.endswith("\n") else e.text + "\n" for e in entries]
    preamble = gathered.preamble or header(next((e.path for e in entries if e.path), "the file beside it"))
    return (preamble + "".join(blocks)).encode("utf-8", errors="surrogateescape")


def add(existing: bytes | None, losers: list[Loser]) -> bytes:
    """`existing` (or a new file) with `losers` added; one already there is not added twice."""
    current = parse(existing) if existing is not None else Gathered("", {})
    entries = dict(current.entries)
    for loser in losers:
        entries.setdefault(loser.id, entry_for(loser))
    return render(Gathered(current.preamble, entries))


def merge3(base: bytes | None, ours: bytes | None, theirs: bytes | None) -> bytes | None:
    """Three-way merge of a gathered file, entry by entry (None: the file is deleted).

    An entry either side added is kept; one a side removed (folded) that the other left as it
    was is removed; one a side removed that the other changed is kept (a modification beats a
    deletion); one both changed keeps ours. Deleting the whole file is removing every entry it
    had: it wins over a side that changed nothing, and entries the other side added meanwhile
    survive in a new file."""
    b, o, t = (parse(x) if x is not None else None for x in (base, ours, theirs))
    base_e = b.entries if b else {}
    ours_e = o.entries if o else {}
    theirs_e = t.entries if t else {}
    merged: dict[str, Entry] = {}
    for key in sorted(set(base_e) | set(ours_e) | set(theirs_e)):
        was, mine, other = base_e.get(key), ours_e.get(key), theirs_e.get(key)
        kept = _pick(was, mine, other)
        if kept is not None:
            merged[key] = kept
    preamble = _pick_text(b.preamble if b else None, o.preamble if o else None, t.preamble if t else None)
    if not merged and (o is None or t is None):
        return None
    return render(Gathered(preamble or "", merged))


def _pick(was: Entry | None, mine: Entry | None, other: Entry | None) -> Entry | None:
    if was is None:
        return mine or other
    if mine is None and other is None:
        return None
    if mine is None:
        return None if other == was else other
    if other is None:
        return None if mine == was else mine
    return other if mine == was else mine


def _pick_text(was: str | None, mine: str | None, other: str | None) -> str | None:
    if mine is None or (mine == was and other is not None):
        return other
    return mine
