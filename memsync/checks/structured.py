"""Merging JSON, JSON lines and YAML files by their structure; a merge never yields one that does
not parse.

Pure: bytes in, bytes (or None) out. A line-based merge knows nothing of braces and commas: two
writers that rewrite `{"model": ...}` at once, merged line by line (or by a `merge=union` rule),
give two objects on two lines, which no JSON reader accepts. Here, when every side of such a
file parses:

* JSON and YAML merge three-way, key by key through nested objects: a key only one side changed
  takes that change; a key both sides changed to different values (or a changed list, a changed
  top-level value) is a real conflict, and the caller keeps both sides;
* JSON lines merge as a union of lines: the merging side's lines, then the lines the other side
  added, each once;
* whatever the line merge or the operator's `merge:` strategy produced is kept only if it parses
  (and, for the structured default, means the same as the structural merge); else the
  structural result is written, formatted like the merging side's file.

A side that does not parse, a file over MAX_BYTES, YAML with anchors/aliases or several
documents, an object with a duplicate key: None, the caller keeps both sides.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

__all__ = ["KINDS", "MAX_BYTES", "kind_of", "merge", "parses"]

KINDS = {".json": "json", ".jsonl": "jsonl", ".ndjson": "jsonl", ".yaml": "yaml", ".yml": "yaml"}
MAX_BYTES = 32 << 20  # a bigger file keeps both sides rather than being parsed three times


class _Unparsable(Exception):
    pass


class _Conflict(Exception):
    pass


_MISSING = object()


def kind_of(path: str) -> str | None:
    name = path.rsplit("/", 1)[-1].lower()
    dot = name.rfind(".")
    return KINDS.get(name[dot:]) if dot > 0 else None


def parses(kind: str, data: bytes) -> bool:
    try:
        _parse(kind, data)
    except _Unparsable:
        return False
    return True


def merge(kind: str, strategy: str, base: bytes | None, ours: bytes, theirs: bytes,
          text_result: bytes | None) -> bytes | None:
    """The merged file, or None when both sides must be kept.

    `strategy`: the path's merge policy ("structured" is the default for JSON and YAML);
    `text_result`: what the line merge (or the policy's favour) produced, None if it conflicted."""
    try:
        sides = [_parse(kind, data) for data in ((base,) if base is not None else ()) + (ours, theirs)]
    except _Unparsable:
        return None
    parsed_base = sides[0] if base is not None else _MISSING
    parsed_ours, parsed_theirs = sides[-2], sides[-1]
    result = _parsed_or_none(kind, text_result)
    if kind == "jsonl":
        if result is not None:
            return text_result
        return _line_union(base, ours, theirs) if strategy in ("append", "union", "structured") else None
    if strategy != "structured":
        return text_result if result is not None else None
    try:
        merged = _merge_values(parsed_base, parsed_ours, parsed_theirs)
    except _Conflict:
        return None
    if merged is _MISSING:
        return None  # both sides deleted everything: not a file any more (cannot happen for a file)
    if result is not None and _same(result[0], merged):
        return text_result  # the line merge's text: the writers' own formatting and comments
    return _render(kind, merged, ours)


def _parsed_or_none(kind: str, data: bytes | None) -> Any:
    if data is None:
        return None
    try:
        return (_parse(kind, data),)  # a tuple: a file holding `null` still counts as parsed
    except _Unparsable:
        return None


# -- parsing ---------------------------------------------------------------------------------------
def _parse(kind: str, data: bytes) -> Any:
    if len(data) > MAX_BYTES:
        raise _Unparsable
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _Unparsable from exc
    if kind == "json":
        return _json(text)
    if kind == "jsonl":
        return [_json(line) for line in text.splitlines() if line.strip()]
    return _yaml(text)


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            raise _Unparsable  # readers disagree on which one counts
        found[key] = value
    return found


def _json(text: str) -> Any:
    try:
        return json.loads(text, object_pairs_hook=_unique_keys)
    except (ValueError, RecursionError) as exc:
        raise _Unparsable from exc


def _yaml(text: str) -> Any:
    import yaml  # only when a YAML file is merged: a push with nothing to merge never loads it

    class StrictLoader(yaml.SafeLoader):
        """safe_load, with no aliases (a few bytes of them expand to gigabytes when compared or
        written out) and no duplicate keys."""

        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                raise _Unparsable
            return super().compose_node(parent, index)

        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            if isinstance(node, yaml.MappingNode):
                keys = [k.value for k, _ in node.value if isinstance(k, yaml.ScalarNode)]
                if len(keys) != len(set(keys)):
                    raise _Unparsable
            return super().construct_mapping(node, deep=deep)

    try:
        return yaml.load(text, Loader=StrictLoader)  # a SafeLoader subclass
    except (yaml.YAMLError, RecursionError, ValueError, TypeError) as exc:
        raise _Unparsable from exc


# -- merging ---------------------------------------------------------------------------------------
def _key(value: Any) -> str:
    """Equality that tells 1, 1.0 and true apart (Python's == does not)."""
    return json.dumps(value, sort_keys=True, default=repr)


def _same(a: Any, b: Any) -> bool:
    if a is _MISSING or b is _MISSING:
        return a is b
    return _key(a) == _key(b)


def _merge_values(base: Any, ours: Any, theirs: Any) -> Any:
    if _same(ours, theirs):
        return ours
    if _same(ours, base):
        return theirs
    if _same(theirs, base):
        return ours
    if ours is _MISSING:
        return theirs  # a modification beats a deletion
    if theirs is _MISSING:
        return ours
    if isinstance(ours, dict) and isinstance(theirs, dict):
        return _merge_objects(base if isinstance(base, dict) else {}, ours, theirs)
    raise _Conflict


def _merge_objects(base: dict[Any, Any], ours: dict[Any, Any], theirs: dict[Any, Any]) -> dict[Any, Any]:
    merged: dict[Any, Any] = {}
    for key in [*ours, *(k for k in theirs if k not in ours), *(k for k in base if k not in ours and k not in theirs)]:
        value = _merge_values(base.get(key, _MISSING), ours.get(key, _MISSING), theirs.get(key, _MISSING))
        if value is not _MISSING:
            merged[key] = value
    return merged


def _line_union(base: bytes | None, ours: bytes, theirs: bytes) -> bytes:
    """Our lines, then each line the other side added (as many times as it added it)."""
    mine = [line for line in ours.splitlines() if line.strip()]
    old = Counter(line for line in (base or b"").splitlines() if line.strip())
    added = Counter(line for line in theirs.splitlines() if line.strip()) - old
    added -= Counter(mine) - old  # added on both sides: the same line, once
    lines = list(mine)
    for line in theirs.splitlines():
        if added[line] > 0:
            lines.append(line)
            added[line] -= 1
    return b"".join(line + b"\n" for line in lines)


# -- writing ---------------------------------------------------------------------------------------
_INDENT = re.compile(rb"\n([ \t]+)\S")


def _render(kind: str, value: Any, like: bytes) -> bytes:
    """The merged value, formatted as the merging side's file was."""
    newline = b"\n" if like.endswith(b"\n") or not like else b""
    if kind == "yaml":
        import yaml

        text = yaml.safe_dump(value, sort_keys=False, allow_unicode=True, default_flow_style=False)
        return text.encode("utf-8")
    found = _INDENT.search(like.strip())
    indent: str | None = found.group(1).decode() if found else None
    ascii_only = b"\\u" in like and like.isascii()
    text = json.dumps(value, indent=indent, ensure_ascii=ascii_only)
    return text.encode("utf-8") + newline
