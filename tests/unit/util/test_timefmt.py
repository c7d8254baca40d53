"""util/timefmt: one time format (RFC 3339, UTC, to the second) and the age shown beside it."""

from __future__ import annotations

import time

from memsync.util.timefmt import age, rfc3339


def test_the_format_is_rfc3339_in_utc() -> None:
    assert rfc3339(0) == "1970-01-01T00:00:00Z"
    assert rfc3339(1_795_000_000.9) == "2026-11-18T11:06:40Z"  # seconds, never rounded up


def test_ages_are_in_the_largest_whole_unit() -> None:
    now = time.time()
    assert age(rfc3339(now - 3 * 86400 - 5)) == "3d"
    assert age(rfc3339(now - 5 * 3600 - 5)) == "5h"
    assert age(rfc3339(now - 12 * 60 - 5)) in ("12m", "13m")
    assert age(rfc3339(now + 3600)) == "0s"  # a clock ahead of ours is not a negative age
    assert age("yesterday") == "?"
