"""Commit messages with git trailers that `git interpret-trailers --parse` reads.

Messages are split on "\\n" only, as git splits them: a value holding U+2028, \\x0b, \\x1c or \\x85
(which `str.splitlines` treats as line ends) can neither end a trailer block early nor hide the
trailers before it. Paths inside values are quoted (`quote_path`) when they would not survive.
"""

from __future__ import annotations

import re

from memsync.util.lazyre import LazyRe

_TRAILER_RE: LazyRe[str] = LazyRe(r"^([A-Za-z0-9-]+): (.*)$", flags=re.DOTALL)
# Characters folded out of a one-line value: ASCII controls, DEL, and what other tools take for
# a line end (NEL, LINE SEPARATOR, PARAGRAPH SEPARATOR).
_FOLD_RE: LazyRe[str] = LazyRe("[\x00-\x1f\x7f\x85\u2028\u2029]+")
_C_ESCAPES = {"\n": "\\n", "\t": "\\t", "\r": "\\r", '"': '\\"', "\\": "\\\\", "\a": "\\a", "\b": "\\b",
              "\f": "\\f", "\v": "\\v"}
_C_UNESCAPES = {v[1]: k for k, v in _C_ESCAPES.items()}
_UNSAFE = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})


def clean_value(value: object) -> str:
    """A trailer value is one line: fold newlines, control characters and line separators."""
    return _FOLD_RE.sub(" ", str(value)).strip()


def _unsafe(c: str) -> bool:
    """A control, format, surrogate or line/paragraph separator: never printable ASCII, so only a
    path with other characters loads the Unicode tables."""
    if c.isascii() and c.isprintable():
        return False
    import unicodedata

    return unicodedata.category(c) in _UNSAFE


def quote_path(path: str) -> str:
    """A path as it may stand inside a one-line trailer value: as is when plain, else C-quoted
    like git's quotePath (`"a\\nb.md"`, `"x\\342\\200\\250y.md"` for U+2028; non-ASCII letters
    stay as they are). A path with a space is quoted too, so the value's other words stay apart."""
    needs = (not path or path.startswith('"') or " " in path or ":" in path
             or any(c in _C_ESCAPES or _unsafe(c) for c in path))
    if not needs:
        return path
    out = []
    for c in path:
        if c in _C_ESCAPES:
            out.append(_C_ESCAPES[c])
        elif _unsafe(c):
            out.append("".join(f"\\{b:03o}" for b in c.encode("utf-8", "surrogateescape")))
        else:
            out.append(c)
    return '"' + "".join(out) + '"'


def unquote_path(text: str) -> tuple[str, str]:
    """(path, rest of the text) for a value that starts with a path written by `quote_path`:
    a quoted path is read up to its closing quote, a plain one up to the first space."""
    if not text.startswith('"'):
        head, _, rest = text.partition(" ")
        return head, rest
    raw = bytearray()
    i = 1
    while i < len(text):
        c = text[i]
        if c == '"':
            return raw.decode("utf-8", "surrogateescape"), text[i + 1:].lstrip(" ")
        if c == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt in "01234567" and re.fullmatch(r"[0-7]{3}", text[i + 1:i + 4]):
                raw.append(int(text[i + 1:i + 4], 8))
                i += 4
                continue
            raw += _C_UNESCAPES.get(nxt, nxt).encode()
            i += 2
            continue
        raw += c.encode("utf-8", "surrogateescape")
        i += 1
    raise ValueError(f"unterminated quoted path: {text!r}")


def compose(subject: str, trailers: list[tuple[str, str]], body: str = "") -> str:
    parts = [clean_value(subject) or "memsync commit"]
    if body.strip():
        parts.append(body.strip())
    if trailers:
        parts.append("\n".join(f"{key}: {clean_value(value)}" for key, value in trailers))
    return "\n\n".join(parts) + "\n"


def parse(message: str) -> list[tuple[str, str]]:
    """Trailers of a message: the `Key: value` lines of its last paragraph (lines split on "\\n"
    only, as git does)."""
    paragraphs = [p for p in message.strip("\n \t").split("\n\n") if p.strip("\n \t")]
    if len(paragraphs) < 2:
        return []
    found: list[tuple[str, str]] = []
    for line in paragraphs[-1].split("\n"):
        match = _TRAILER_RE.match(line.strip(" \t\r"))
        if not match:
            return []
        found.append((match.group(1), match.group(2)))
    return found


def append(message: str, extra: list[tuple[str, str]]) -> str:
    """`message` (made by `compose`, so it ends in its trailer block) with `extra` trailers added
    to that block; a message without trailers gets them as a block of their own."""
    if not extra:
        return message
    lines = "\n".join(f"{key}: {clean_value(value)}" for key, value in extra)
    body = message.rstrip("\n")
    return f"{body}\n{lines}\n" if parse(message) else f"{body}\n\n{lines}\n"


# -- what a version changed, recorded when it is made (memsync log reads it instead of a diff) ----
CHANGES = "Memsync-Changes"
COPY = "Memsync-Copy"
_CHANGES_RE: LazyRe[str] = LazyRe(
    r"files=(\d{1,9}) added=(\d{1,15}) removed=(\d{1,15}) tree=([0-9a-f]{40,64}) parent-tree=([0-9a-f]{40,64}|-)")


def changes_value(files: int, added: int, removed: int, tree: str, parent_tree: str | None) -> str:
    """The `Memsync-Changes` value: the counts a log line shows, and the two trees they were
    counted between (the version's and its first parent's), so that a copy of the message on
    another tree (a rewrite, a commit given new parents) is never read as this version's."""
    return f"files={files} added={added} removed={removed} tree={tree} parent-tree={parent_tree or '-'}"


def recorded_changes(trailers: list[tuple[str, str]], tree: str,
                     parent_tree: str | None) -> tuple[int, int, int, list[str]] | None:
    """(files changed, bytes added, bytes removed, conflict copies made) as the version recorded
    them, if it did, between exactly `tree` and `parent_tree`; None: count them from the diff."""
    values = every(trailers, CHANGES)
    if len(values) != 1:
        return None
    match = _CHANGES_RE.fullmatch(values[0])
    if match is None or match.group(4) != tree or match.group(5) != (parent_tree or "-"):
        return None
    copies: list[str] = []
    for value in every(trailers, COPY):
        try:
            path, rest = unquote_path(value)
        except ValueError:
            return None
        if rest or not path:
            return None
        copies.append(path)
    return int(match.group(1)), int(match.group(2)), int(match.group(3)), copies


def memsync_keys(message: str) -> list[str]:
    """The Memsync-* trailer keys a message carries (each once, in order)."""
    keys: list[str] = []
    for key, _ in parse(message):
        if key.lower().startswith("memsync-") and key not in keys:
            keys.append(key)
    return keys


def first(trailers: list[tuple[str, str]], key: str) -> str | None:
    for k, v in trailers:
        if k.lower() == key.lower():
            return v
    return None


def every(trailers: list[tuple[str, str]], key: str) -> list[str]:
    return [v for k, v in trailers if k.lower() == key.lower()]
