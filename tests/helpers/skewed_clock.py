"""Run memsync as a sandbox with a wrong clock would: `python tests/helpers/skewed_clock.py OFFSET ARGS...`
runs `memsync ARGS...` with the process's wall clock (time.time, time.time_ns, datetime.now)
moved by OFFSET seconds. The kernel's clock, and so every file's mtime, stays true: that is the
skew between a sandbox and a shared volume (or an NFS server) that memsync must survive. Works
on any version of memsync, so a test can show what an older one did."""

from __future__ import annotations

import datetime as _datetime
import sys
import time


def skew(offset: float) -> None:
    true_time, true_time_ns = time.time, time.time_ns
    time.time = lambda: true_time() + offset
    time.time_ns = lambda: true_time_ns() + int(offset * 1e9)

    class SkewedDateTime(_datetime.datetime):
        @classmethod
        def now(cls, tz: _datetime.tzinfo | None = None) -> SkewedDateTime:
            return cls.fromtimestamp(time.time(), tz)

        @classmethod
        def utcnow(cls) -> SkewedDateTime:
            return cls.fromtimestamp(time.time(), _datetime.timezone.utc).replace(tzinfo=None)

    _datetime.datetime = SkewedDateTime  # type: ignore[misc]


if __name__ == "__main__":
    skew(float(sys.argv[1]))
    sys.argv = ["memsync", *sys.argv[2:]]
    from memsync.entry import main

    main()
