"""Warnings from the core (an unknown config key, a fallback taken) without the core printing.

The CLI routes them to stderr as `warning:` lines; a Python caller can install its own handler
(`notices.handler = my_logger.warning`) or leave the default, which collects them in `pending`.
Each distinct message is delivered once per process (a config file is read more than once).
"""

from __future__ import annotations

from collections.abc import Callable

pending: list[str] = []
handler: Callable[[str], None] = pending.append
_seen: set[str] = set()


def warn(message: str) -> None:
    if message in _seen:
        return
    _seen.add(message)
    handler(message)


def reset() -> None:
    _seen.clear()
