"""The secret scanner's rules are compiled on first use, and a rule whose literal a text does not
hold is not run on it (util/lazyre.py): checked here for what it skips (a command line with
nothing secret compiles nothing) and for what it must never skip (every rule's needles cover
every way its pattern can start, read from the pattern itself)."""

from __future__ import annotations

import re
from itertools import product
from typing import Any

import pytest

import memsync.checks.secret_rules as rules
from memsync.util.lazyre import LazyRe

_parser: Any = getattr(re, "_parser", None)  # re's own parser (Python 3.11+)
_LIMIT = 256  # prefixes spelled out per pattern


def _prefixes(items: Any) -> tuple[set[str], bool]:
    """Every literal string a match of the parsed pattern `items` starts with, as far as the
    pattern is a chain of literals, small character sets, groups, alternatives and optional
    parts (zero-width assertions are passed over), and whether that was the whole pattern."""
    found = {""}
    for op, arg in items:
        name = str(op)
        if name in ("AT", "ASSERT", "ASSERT_NOT"):
            continue
        whole = True
        if name == "LITERAL":
            step: set[str] | None = {chr(arg)}
        elif name == "IN":
            step = _charset(arg)
        elif name == "SUBPATTERN":
            step, whole = _prefixes(arg[-1])
        elif name == "BRANCH":
            step = set()
            for branch in arg[1]:
                sub, sub_whole = _prefixes(branch)
                step, whole = step | sub, whole and sub_whole
        elif name == "MAX_REPEAT" and arg[0] == 0 and arg[1] == 1:
            sub, whole = _prefixes(arg[2])
            step = sub | {""} if whole else None
        else:
            step = None
        if step is None or len(found) * len(step) > _LIMIT:
            return found, False
        found = {a + b for a, b in product(found, step)}
        if not whole:
            return found, False
    return found, True


def _charset(items: Any) -> set[str] | None:
    chars: set[str] = set()
    for op, arg in items:
        if str(op) == "LITERAL":
            chars.add(chr(arg))
        elif str(op) == "RANGE" and arg[1] - arg[0] < 8:
            chars |= {chr(c) for c in range(arg[0], arg[1] + 1)}
        else:
            return None
    return chars


def _needled() -> list[tuple[str, LazyRe[str]]]:
    found = [(f"{rule} #{i}", regex) for i, (rule, regex, _need) in enumerate(rules._TOKEN_RULES)]
    found += [(f"keyword #{i}", kw) for i, (kw, _tail, _min) in enumerate(rules._KEYWORD_RES)]
    found += [(name, value) for name, value in vars(rules).items() if isinstance(value, LazyRe) and value.needles]
    return found


@pytest.mark.skipif(_parser is None, reason="needs re._parser (Python 3.11+)")
@pytest.mark.parametrize(("label", "lazy"), _needled(), ids=[label for label, _ in _needled()])
def test_every_way_a_rule_starts_holds_one_of_its_needles(label: str, lazy: LazyRe[str]) -> None:
    assert lazy.needles, label
    starts, _whole = _prefixes(_parser.parse(lazy.source, lazy.flags))
    assert starts and all(starts), (label, starts)
    missing = sorted(s for s in starts if not any(needle in s for needle in lazy.needles))
    assert not missing, f"{label}: a match may start with {missing[:5]}, which holds none of {lazy.needles}"


def test_the_prefix_reader_sees_a_needle_that_does_not_cover_the_pattern() -> None:
    """The check above can fail: a needle list missing one spelling is caught."""
    wrong = LazyRe(r"gh[pousr]_(?P<body>[A-Za-z0-9]{36})", "ghp_", "gho_", "ghu_", "ghs_")
    starts, _whole = _prefixes(_parser.parse(wrong.source))
    assert "ghr_" in starts
    assert not any(needle in "ghr_" for needle in wrong.needles)


def test_a_text_without_the_needle_is_not_searched_and_compiles_nothing() -> None:
    lazy = LazyRe(r"tok_(?P<body>[0-9]{4})", "tok_")
    assert list(lazy.finditer("nothing here")) == [] and lazy.search("tok-1234") is None
    assert not lazy.compiled
    assert [m["body"] for m in lazy.finditer("a tok_1234 b")] == ["1234"] and lazy.compiled
    assert LazyRe(r"a+").sub("b", "xaay") == "xby"
    assert LazyRe(rb"a+", b"a").match(b"zzz") is None
