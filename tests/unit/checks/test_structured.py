"""checks/structured: JSON, JSON lines and YAML merged key by key; a result that would not parse
is never produced (None: both sides are kept)."""

from __future__ import annotations

import json

import yaml

from memsync.checks import structured


def test_kinds_come_from_the_extension() -> None:
    assert structured.kind_of("a/b.JSON") == "json" and structured.kind_of("x.ndjson") == "jsonl"
    assert structured.kind_of("c.yml") == "yaml" and structured.kind_of("notes.md") is None
    assert structured.kind_of(".json") is None  # a dot file, not an extension


def test_different_keys_merge_and_the_same_key_changed_twice_conflicts() -> None:
    base = b'{"a": 1, "b": 2}\n'
    merged = structured.merge("json", "structured", base, b'{"a": 10, "b": 2}\n', b'{"a": 1, "b": 2, "c": 3}\n', None)
    assert merged is not None and json.loads(merged) == {"a": 10, "b": 2, "c": 3}
    assert structured.merge("json", "structured", base, b'{"a": 10, "b": 2}\n', b'{"a": 11, "b": 2}\n', None) is None


def test_the_line_merges_text_is_kept_when_it_means_the_same() -> None:
    base, theirs = b'{\n  "a": 1,\n  "b": 2\n}\n', b'{\n  "a": 1,\n  "b": 7\n}\n'
    ours = b'{\n  "a":   5,\n  "b": 2\n}\n'
    text = b'{\n  "a":   5,\n  "b": 7\n}\n'  # the writers' own spacing
    assert structured.merge("json", "structured", base, ours, theirs, text) == text
    rebuilt = structured.merge("yaml", "structured", b"a: 1\nb: 2\n", b"a: 5\nb: 2\n", b"a: 1\nb: 7\n", None)
    assert rebuilt is not None and yaml.safe_load(rebuilt) == {"a": 5, "b": 7}


def test_an_unparsable_side_or_result_keeps_both() -> None:
    assert structured.merge("json", "structured", b"{}", b"{broken", b"{}", None) is None
    assert structured.merge("json", "union", b"{}", b'{"a": 1}', b'{"b": 2}', b'{"a": 1}{"b": 2}') is None
    assert not structured.parses("json", b'{"a": 1, "a": 2}')  # a repeated key is not a document to merge
    assert structured.parses("yaml", b"a: 1\n")


def test_json_lines_keep_every_line_of_both_sides_once() -> None:
    base = b'{"n": 0}\n'
    ours, theirs = base + b'{"n": 1}\n', base + b'{"n": 2}\n'
    merged = structured.merge("jsonl", "append", base, ours, theirs, None)
    assert merged is not None and [json.loads(x)["n"] for x in merged.splitlines()] == [0, 1, 2]
    assert structured.merge("jsonl", "keep-both", base, ours, theirs, None) is None
