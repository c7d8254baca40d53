"""Commit messages with git trailers that `git interpret-trailers --parse` reads."""

from __future__ import annotations

import re

_TRAILER_RE = re.compile(r"^([A-Za-z0-9-]+): (.*)$")


def clean_value(value: object) -> str:
    """A trailer value is one line: fold newlines and control characters."""
    return re.sub(r"[\x00-\x1f\x7f]+", " ", str(value)).strip()


def compose(subject: str, trailers: list[tuple[str, str]], body: str = "") -> str:
    parts = [clean_value(subject) or "memsync commit"]
    if body.strip():
        parts.append(body.strip())
    if trailers:
        parts.append("\n".join(f"{key}: {clean_value(value)}" for key, value in trailers))
    return "\n\n".join(parts) + "\n"


def parse(message: str) -> list[tuple[str, str]]:
    """Trailers of a message: the `Key: value` lines of its last paragraph."""
    paragraphs = [p for p in message.strip().split("\n\n") if p.strip()]
    if len(paragraphs) < 2:
        return []
    found: list[tuple[str, str]] = []
    for line in paragraphs[-1].splitlines():
        match = _TRAILER_RE.match(line.strip())
        if not match:
            return []
        found.append((match.group(1), match.group(2)))
    return found


def first(trailers: list[tuple[str, str]], key: str) -> str | None:
    for k, v in trailers:
        if k.lower() == key.lower():
            return v
    return None


def every(trailers: list[tuple[str, str]], key: str) -> list[str]:
    return [v for k, v in trailers if k.lower() == key.lower()]
