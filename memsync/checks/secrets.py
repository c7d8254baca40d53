"""Heuristic secret scanner run on changed memory files before memsync commits.

Agents sometimes paste credentials into their notes.  :func:`scan_bytes`
looks for a small, vetted set of well-known secret shapes (modelled on the
gitleaks / detect-secrets rule sets, re-implemented here without any
dependency) and returns :class:`Finding` objects that are safe to print: the
``preview`` field never holds more than the first four characters of a
secret, usually only a well-known prefix such as ``ghp_`` plus the length.
The rules, their thresholds and what they do not report are documented in
memsync/checks/secret_rules.py (``RULE_IDS``).

Pragma
------
A line containing ``memsync:allow-secret`` is never reported (for a private
key block, put the pragma on the ``-----BEGIN`` line)::

    db_password = "...value that really must be committed..."  # memsync:allow-secret

Input
-----
* Any size is scanned, in chunks of ``CHUNK_BYTES`` (1 MiB) that overlap by
  32 KiB, with 1 KiB of context before each: a secret shorter than 32 KiB is
  seen whole whatever its position, and each is reported once.  Memory does
  not grow with the file (:func:`scan_file` reads a chunk at a time).  The
  size limit is the memory's ``max_file_size``: larger files are not
  committed at all.
* UTF-16 and UTF-32 text is decoded: by its byte order mark, else by the
  pattern of NUL bytes mostly-ASCII text has in those encodings.  Other data
  (binary, invalid UTF-8) is decoded leniently, so ASCII tokens in it are
  found, and UTF-16LE strings inside binary data (16+ characters) are
  scanned too.  Compressed data (zip, gzip, PNG) is not unpacked.
* :func:`scan_path` scans a path itself; :func:`redact` replaces every
  likely secret in a text by ``<redacted>``.
* Only single-line values are inspected (apart from private key blocks).

Performance: every rule regex starts with a literal (boundary checks are
look-behinds placed *after* the literal) so CPython's ``re`` can use its
fast literal search, and the keyword search for the generic rule runs on a
lower-cased copy (``re.IGNORECASE`` would be ~10x slower) and already
requires an assignment with a long enough value, so prose never reaches
Python code.  Base64 runs and UTF-16 strings are found on byte masks
(``bytes.translate``) with ``find``, not with regexes (scan speeds and peak
memory: docs/PERFORMANCE.md).  Only small standard modules are imported (``re``, ``math``,
``binascii``, ``typing``) and memsync's ``util.records``; each regex is compiled
on its first use (``util.lazyre``).

Previews show the well-known prefix (at most 4 characters) and the length
for prefixed tokens (``ghp_…(40 chars)``), the key name and the value
length for assignments (``api_key=…(32 chars)``), scheme, password length
and host for URLs (``postgres://…:…(12 chars)@db:5432``; the user name is
hidden because it is sometimes a token), and the header for private keys.
"""

from collections.abc import Callable
from typing import BinaryIO

from memsync.checks.secret_rules import RULE_IDS, Candidate, candidates, secret_name
from memsync.util.lazyre import LazyRe
from memsync.util.records import recordclass

__all__ = ["CHUNK_BYTES", "PRAGMA", "RULE_IDS", "Finding", "mask", "scan_bytes", "scan_file", "scan_path",
           "secret_name"]

PRAGMA = "memsync:allow-secret"
"""Lines containing this marker are skipped."""


@recordclass(frozen=True)
class Finding:
    """A likely secret.  Every field is safe to print or log."""

    path: str  # as given to scan_bytes
    line: int  # 1-based
    rule: str  # one of RULE_IDS
    preview: str  # redacted hint, e.g. "ghp_…(40 chars)"


def _findings(path: str, text: str, own: tuple[int, int], first_line: int) -> list[Finding]:
    """Findings for candidates starting in ``text[own[0]:own[1]]``; ``first_line`` is the line
    number of ``text[0]``.  Lines holding the pragma are skipped; overlapping matches on a line
    are reported once, by the most specific rule."""
    cands = sorted((c for c in candidates(text) if own[0] <= c[0] < own[1]), key=lambda c: c[0])
    by_line: dict[int, list[Candidate]] = {}
    line_no = first_line
    counted_to = 0
    for cand in cands:
        pos = cand[0]
        line_no += text.count("\n", counted_to, pos)
        counted_to = pos
        line_start = text.rfind("\n", 0, pos) + 1
        line_end = text.find("\n", pos)
        if PRAGMA in text[line_start : line_end if line_end >= 0 else len(text)]:
            continue
        by_line.setdefault(line_no, []).append(cand)

    findings: list[Finding] = []
    for line, line_cands in by_line.items():
        kept: list[Candidate] = []
        for cand in sorted(line_cands, key=lambda c: (c[2], c[0])):
            if any(cand[0] < k[1] and k[0] < cand[1] for k in kept):
                continue
            kept.append(cand)
        kept.sort(key=lambda c: c[0])
        findings.extend(Finding(path, line, c[3], c[4]) for c in kept)
    return findings


# --------------------------------------------------------------------------
# Encodings and chunks.

CHUNK_BYTES = 1024 * 1024
"""Data is scanned in chunks of this size, whatever the file's size (memory stays flat)."""
_LOOKAHEAD = 32 * 1024  # a secret starting in a chunk is seen whole if it is shorter than this
_CONTEXT = 1024  # bytes before a chunk: look-behinds, key names, the line's pragma
_SNIFF_BYTES = 4096
# UTF-16LE text inside binary data: printable ASCII bytes ("a" in the mask) each followed by NUL ("z").
_UTF16_MASK = bytes(ord("a") if 0x20 <= i <= 0x7E else ord("z") if i == 0 else ord(" ") for i in range(256))
_UTF16_NEEDLE = b"az" * 16
_UTF16_RUN_RE = LazyRe(rb"(?:az)+")


def _encoding(head: bytes) -> tuple[str, int]:
    """(codec, length of the byte order mark) from a file's first bytes: a BOM, else the pattern
    of NUL bytes that UTF-16/32 gives mostly-ASCII text; anything else is read as UTF-8."""
    for bom, codec in (
        (b"\xff\xfe\x00\x00", "utf-32-le"),
        (b"\x00\x00\xfe\xff", "utf-32-be"),
        (b"\xff\xfe", "utf-16-le"),
        (b"\xfe\xff", "utf-16-be"),
        (b"\xef\xbb\xbf", "utf-8"),
    ):
        if head.startswith(bom):
            return codec, len(bom)
    n = len(head) - len(head) % 4
    if b"\x00" not in head or n == 0:
        return "utf-8", 0

    def nul(offset: int, step: int) -> float:
        part = head[offset:n:step]
        return part.count(0) / len(part)

    if nul(0, 4) < 0.1 and min(nul(1, 4), nul(2, 4), nul(3, 4)) > 0.9:
        return "utf-32-le", 0
    if nul(3, 4) < 0.1 and min(nul(0, 4), nul(1, 4), nul(2, 4)) > 0.9:
        return "utf-32-be", 0
    if nul(1, 2) > 0.6 and nul(0, 2) < 0.1:
        return "utf-16-le", 0
    if nul(0, 2) > 0.6 and nul(1, 2) < 0.1:
        return "utf-16-be", 0
    return "utf-8", 0  # binary: ASCII tokens survive a lenient UTF-8 decode


def _scan(path: str, size: int, read: Callable[[int, int], bytes]) -> list[Finding]:
    codec, bom = _encoding(read(0, _SNIFF_BYTES))
    findings: list[Finding] = []
    lines_before = byte_lines_before = 0  # newlines before own_start, decoded / as bytes
    own_start = bom
    while True:
        own_end = min(size, own_start + CHUNK_BYTES)
        start = max(bom, own_start - _CONTEXT)
        block = read(start, min(size, own_end + _LOOKAHEAD) - start)
        a, b = own_start - start, own_end - start
        before, own, after = (block[:a].decode(codec, "replace"), block[a:b].decode(codec, "replace"),
                              block[b:].decode(codec, "replace"))
        first_line = 1 + lines_before - before.count("\n")
        findings += _findings(path, before + own + after, (len(before), len(before) + len(own)), first_line)
        byte_first_line = 1 + byte_lines_before - block.count(b"\n", 0, a)
        if codec != "utf-8":  # ASCII in a file that only looked like UTF-16/32 at its start
            raw = block.decode("utf-8", "replace")
            own_chars = (len(block[:a].decode("utf-8", "replace")), len(block[:b].decode("utf-8", "replace")))
            findings += _findings(path, raw, own_chars, byte_first_line)
        elif b"\x00" in block:
            findings += _utf16_runs(path, block, (a, b), byte_first_line)
        lines_before += own.count("\n")
        byte_lines_before += block.count(b"\n", a, b)
        if own_end >= size:
            return findings
        own_start = own_end


def _utf16_runs(path: str, block: bytes, own: tuple[int, int], first_line: int) -> list[Finding]:
    """UTF-16LE strings inside binary data (Windows files, databases), as ``strings -el``."""
    found: list[Finding] = []
    counted_to, line = 0, first_line
    mask = block.translate(_UTF16_MASK)
    start = mask.find(_UTF16_NEEDLE, own[0])
    while 0 <= start < own[1]:
        match = _UTF16_RUN_RE.match(mask, start)
        assert match is not None
        if mask.endswith(b"az", 0, start):  # the run began before this chunk: the last one had it
            start = mask.find(_UTF16_NEEDLE, match.end())
            continue
        line += block.count(b"\n", counted_to, start)
        counted_to = start
        run = block[start : match.end()].decode("utf-16-le")
        found += _findings(path, run, (0, len(run)), line)
        start = mask.find(_UTF16_NEEDLE, match.end())
    return found


def scan_bytes(path: str, data: bytes) -> list[Finding]:
    """Return likely secrets in ``data`` (the content of ``path``), in order of position.

    Any size is scanned, chunk by chunk; UTF-16/32 text is decoded (BOM or NUL pattern); binary
    data is scanned as bytes, plus the UTF-16 strings inside it.  Lines containing
    ``memsync:allow-secret`` are skipped."""
    return _scan(path, len(data), lambda pos, n: data[pos : pos + n])


def scan_file(path: str, fh: BinaryIO) -> list[Finding]:
    """:func:`scan_bytes` for an open file, read a chunk at a time (memory does not grow with
    the file's size)."""
    size = fh.seek(0, 2)

    def read(pos: int, n: int) -> bytes:
        fh.seek(pos)
        return fh.read(n)

    return _scan(path, size, read)


def scan_path(path: str) -> list[Finding]:
    """Likely secrets in a file's path itself (a token used as a file or directory name).
    Findings have line 0 and, as their ``path``, the path with each secret replaced by
    ``<redacted>`` (safe to print)."""
    return [Finding(mask(path), 0, f.rule, f.preview) for f in _findings(path, path, (0, len(path)), 1)]


def mask(text: str) -> str:
    """``text`` with each likely secret replaced by ``<redacted>`` (the pragma does not apply)."""
    spans = sorted((c[0], c[1]) for c in candidates(text))
    if not spans:
        return text
    parts: list[str] = []
    pos = 0
    for start, end in spans:
        if end <= pos:
            continue
        parts.append(text[pos : max(pos, start)])
        parts.append("<redacted>")
        pos = end
    parts.append(text[pos:])
    return "".join(parts)
