"""The one time format memsync shows and writes in JSON: RFC 3339 in UTC, to the second."""

from __future__ import annotations


def rfc3339(timestamp: float) -> str:
    """`2026-11-23T14:00:00Z`."""
    import time  # not datetime: its import is felt in a cold push, for one line of output

    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(timestamp))


def age(created: str) -> str:
    """How long ago an RFC 3339 time was: "3d", "5h", "12m", "40s" ("?" if it does not parse)."""
    from datetime import datetime, timezone

    try:
        seconds = (datetime.now(timezone.utc) - datetime.fromisoformat(created.replace("Z", "+00:00"))).total_seconds()
    except ValueError:
        return "?"
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit}"
    return f"{max(int(seconds), 0)}s"
