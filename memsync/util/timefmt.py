"""The one time format memsync shows and writes in JSON: RFC 3339 in UTC, to the second."""

from __future__ import annotations


def rfc3339(timestamp: float) -> str:
    """`2026-11-23T14:00:00Z`."""
    from datetime import datetime, timezone  # the clock's readers import it: not every start-up

    return datetime.fromtimestamp(timestamp, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
