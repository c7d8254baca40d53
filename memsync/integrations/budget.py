"""How much of a model's context one tool result may take, in estimated tokens.

Clients cap a tool result in tokens, not characters (Claude Code warns past 10,000 and refuses
past 25,000 by default, MAX_MCP_OUTPUT_TOKENS). A character cap is far too loose for CJK text,
where one character is about one token, and needlessly tight for nothing. So every result is
bounded by an estimate that errs high: ASCII about 4 characters a token, CJK (Han, kana, Hangul,
full-width forms) one token a character, any other character half a token.
"""

from __future__ import annotations

import math
import re

MAX_RESULT_TOKENS = 15_000  # estimated; ASCII text: 60,000 characters, CJK text: 15,000
_CJK = re.compile("[\u1100-\u11ff\u2e80-\u9fff\ua960-\ua97f\uac00-\ud7ff\uf900-\ufaff\ufe30-\ufe4f"
                  "\uff00-\uffef\U00020000-\U0003ffff]")


def tokens(text: str) -> int:
    """The estimated token count of `text` (never below the true count for the scripts above)."""
    if text.isascii():
        return math.ceil(len(text) / 4)
    ascii_chars = len(text.encode("ascii", "ignore"))
    cjk = len(text) - len(_CJK.sub("", text))
    other = len(text) - ascii_chars - cjk
    return math.ceil(ascii_chars / 4 + cjk + other / 2)


def cut_to_tokens(text: str, budget: int) -> str:
    """The longest start of `text` whose estimate fits `budget`."""
    if tokens(text) <= budget:
        return text
    low, high = 0, min(len(text), budget * 4)
    while low < high:
        mid = (low + high + 1) // 2
        if tokens(text[:mid]) <= budget:
            low = mid
        else:
            high = mid - 1
    return text[:low]


def bound(text: str, hint: str = "ask for less") -> str:
    """Any tool result or error, cut to MAX_RESULT_TOKENS with a last line saying so and how to
    page (the hint)."""
    if tokens(text) <= MAX_RESULT_TOKENS:
        return text
    kept = cut_to_tokens(text, MAX_RESULT_TOKENS - 100)
    return kept + (f"\n… cut at {len(kept):,} of {len(text):,} characters (about {MAX_RESULT_TOKENS:,} tokens, "
                   f"what one result holds); {hint}")


__all__ = ["MAX_RESULT_TOKENS", "bound", "cut_to_tokens", "tokens"]
