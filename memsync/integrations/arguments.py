"""A tool call's arguments as the model reads about them: one line naming what is wrong, never a
validation library's multi-line dump (with its input echoed and a documentation URL)."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping

MAX_SHOWN = 3  # errors named in one message


def invalid(tool: str, errors: Iterable[Mapping[str, object]]) -> str:
    """One line from pydantic's `ValidationError.errors()`."""
    found = list(errors)
    parts = []
    for e in found[:MAX_SHOWN]:
        loc = e.get("loc", ())
        where = ".".join(str(x) for x in loc) if isinstance(loc, tuple) and loc else "arguments"
        msg = str(e.get("msg", "invalid")).split("\n")[0]
        parts.append(f"{where}: {msg[:120]}" if e.get("type") != "missing" else f"{where} is required")
    more = f" (and {len(found) - MAX_SHOWN} more)" if len(found) > MAX_SHOWN else ""
    return f"Invalid arguments for {tool}: " + "; ".join(parts) + more


def unknown(tool: str, given: Iterable[str], accepted: Collection[str]) -> str | None:
    """A refusal naming the arguments `tool` does not take, or None when there are none."""
    extra = sorted(k for k in given if k not in accepted)
    if not extra:
        return None
    names = ", ".join(repr(k[:40]) for k in extra[:MAX_SHOWN]) + (" …" if len(extra) > MAX_SHOWN else "")
    plural = "s" if len(extra) > 1 else ""
    return f"Unknown argument{plural} for {tool}: {names}; it takes {', '.join(sorted(accepted))}"


__all__ = ["invalid", "unknown"]
