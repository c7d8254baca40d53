"""Text from a hub or an agent, made safe to show on a terminal.

Paths, commit messages, trailers, author names and server messages come from the hub, so they may
hold terminal escapes (ESC sequences that recolour, move the cursor or retitle the window), CR or
backspace that overwrite what was printed, BEL, C1 controls (U+009B is a one-character CSI) and
bidi overrides that make text read differently from what it is. They are escaped as git escapes
them (core.quotePath): C-style `\\t`, `\\r`, ..., octal `\\033` for other bytes of the character,
and a path that needs any of that is shown whole in double quotes. --json output is not touched:
JSON escaping is already exact and safe.
"""

from __future__ import annotations

import re

from memsync.util.lazyre import LazyRe

# DEL, C1 controls, the bidi embeddings, overrides, isolates and marks, lone surrogates (undecodable
# bytes in a path: printing one would also fail). C0 controls are listed per pattern below. Compiled
# on first use: the usual text, printable ASCII, never needs them (`_plain`).
_OTHERS = "\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff"
_UNSAFE_PATH: LazyRe[str] = LazyRe(f'[\x00-\x1f{_OTHERS}"\\\\]')
_UNSAFE_TEXT: LazyRe[str] = LazyRe(f"[\x00-\x1f{_OTHERS}]")
_ONE_LINE: LazyRe[str] = LazyRe(f"[\x00-\x08\x0a-\x1f{_OTHERS}]")  # tabs stay
_MULTILINE: LazyRe[str] = LazyRe(f"[\x00-\x08\x0b-\x1f{_OTHERS}]")  # tabs and newlines stay
_NAMED = {"\a": "\\a", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\v": "\\v", "\f": "\\f", "\r": "\\r",
          '"': '\\"', "\\": "\\\\"}


def _escape(match: re.Match[str]) -> str:
    ch = match.group(0)
    named = _NAMED.get(ch)
    if named is not None:
        return named
    try:
        raw = ch.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        raw = ch.encode("utf-8", "surrogatepass")
    return "".join(f"\\{b:03o}" for b in raw)


def _plain(text: str) -> bool:
    """Printable ASCII only (no C0 control, no DEL, no tab or newline): nothing to escape."""
    return text.isascii() and text.isprintable()


def display_path(path: str) -> str:
    """A path as git shows it: unchanged if harmless, else C-quoted inside double quotes."""
    if (_plain(path) and '"' not in path and "\\" not in path) or _UNSAFE_PATH.search(path) is None:
        return path
    return '"' + _UNSAFE_PATH.sub(_escape, path) + '"'


def clean(text: str) -> str:
    """One line of free text (a message, a trailer, a name, a server line): every control and
    bidi character escaped in place, tabs included; nothing else changes."""
    return text if _plain(text) else _UNSAFE_TEXT.sub(_escape, text)


def terminal(text: str, *, newlines: bool = False) -> str:
    """The last line of defence before a terminal: anything not escaped by its renderer is escaped here.
    Tabs stay; newlines stay only when the text is meant to span lines (`newlines=True`)."""
    if _plain(text):
        return text
    pattern = _MULTILINE if newlines else _ONE_LINE
    return text if pattern.search(text) is None else pattern.sub(_escape, text)


__all__ = ["clean", "display_path", "terminal"]
