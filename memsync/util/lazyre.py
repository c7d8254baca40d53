"""Regular expressions compiled on first use, and not run at all on a text that cannot hold a
match. A cold memsync compiles nothing it does not use: compiling the secret scanner's ~50 rules
would be paid by every command that masks a command line or scans a file (docs/PERFORMANCE.md),
where most texts hold none of the literals the rules start with (`ghp_`, `AKIA`, `://`,
`-----BEGIN`...).

`needles`: strings of which every match holds at least one (a rule's literal prefix, spelled
out). Until the pattern is compiled, a text that holds none of them is answered without
compiling or running it (`in` on a str or bytes is a fast substring search). Once compiled it
simply runs: its own literal-prefix search costs no more than the needles' on a large text.
No needles: the pattern always runs.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterator
from typing import AnyStr, Generic

__all__ = ["LazyRe"]


class LazyRe(Generic[AnyStr]):
    """A compiled pattern's match/search/fullmatch/finditer/sub, compiled when first needed."""

    __slots__ = ("_regex", "flags", "needles", "source")
    source: AnyStr
    needles: tuple[AnyStr, ...]

    def __init__(self, source: AnyStr, *needles: AnyStr, flags: int = 0) -> None:
        self.source = source
        self.needles = needles
        self.flags = flags
        self._regex: re.Pattern[AnyStr] | None = None

    @property
    def regex(self) -> re.Pattern[AnyStr]:
        regex = self._regex
        if regex is None:
            regex = self._regex = re.compile(self.source, self.flags)
        return regex

    @property
    def compiled(self) -> bool:
        return self._regex is not None

    def _cannot_match(self, text: AnyStr) -> bool:
        return self._regex is None and bool(self.needles) and not any(needle in text for needle in self.needles)

    def finditer(self, text: AnyStr, pos: int = 0, endpos: int = sys.maxsize) -> Iterator[re.Match[AnyStr]]:
        if self._cannot_match(text):
            return iter(())
        return self.regex.finditer(text, pos, endpos)

    def search(self, text: AnyStr, pos: int = 0, endpos: int = sys.maxsize) -> re.Match[AnyStr] | None:
        return None if self._cannot_match(text) else self.regex.search(text, pos, endpos)

    def match(self, text: AnyStr, pos: int = 0, endpos: int = sys.maxsize) -> re.Match[AnyStr] | None:
        return None if self._cannot_match(text) else self.regex.match(text, pos, endpos)

    def fullmatch(self, text: AnyStr, pos: int = 0, endpos: int = sys.maxsize) -> re.Match[AnyStr] | None:
        return None if self._cannot_match(text) else self.regex.fullmatch(text, pos, endpos)

    def sub(self, repl: AnyStr | Callable[[re.Match[AnyStr]], AnyStr], text: AnyStr) -> AnyStr:
        return text if self._cannot_match(text) else self.regex.sub(repl, text)
