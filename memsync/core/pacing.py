"""`--max-push-rate`: checkpoints still commit when due, but a run pushes at most N times per
period; a checkpoint that comes too soon stays local and goes with the next allowed push (the
run's final push is never held back). A fleet of R runs sharing a host's limit L per minute sets
each run to L/R per minute."""

from __future__ import annotations

import os
import re
import threading
import time

from memsync.util.records import recordclass

ENV = "MEMSYNC_MAX_PUSH_RATE"
_PERIODS = {"s": 1.0, "sec": 1.0, "second": 1.0, "m": 60.0, "min": 60.0, "minute": 60.0,
            "h": 3600.0, "hour": 3600.0}
_RATE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*/\s*([a-z]+)\s*")


@recordclass(frozen=True)
class PushRate:
    pushes: float
    period: float  # seconds

    @property
    def interval(self) -> float:
        return self.period / self.pushes

    def __str__(self) -> str:
        unit = next(name for name, secs in (("h", 3600.0), ("min", 60.0), ("s", 1.0)) if secs == self.period)
        return f"{self.pushes:g}/{unit}"


def parse_rate(text: str) -> PushRate:
    """`6/min`, `1/s`, `100/h` -> PushRate; ValueError with what is wrong."""
    match = _RATE.fullmatch(text.lower())
    if match is None or match.group(2) not in _PERIODS:
        raise ValueError(f"{text!r} is not a push rate")
    pushes = float(match.group(1))
    if not pushes > 0:
        raise ValueError(f"{text!r}: the number of pushes must be more than 0")
    unit = match.group(2)
    return PushRate(pushes, _PERIODS[unit])


def resolve(flag: str | None, configured: PushRate | None) -> PushRate | None:
    """The flag, then MEMSYNC_MAX_PUSH_RATE, then storage.yaml `max_push_rate`; None: no limit."""
    from memsync.errors import UsageError

    for source, text in (("--max-push-rate", flag), (ENV, os.environ.get(ENV))):
        if text:
            try:
                return parse_rate(text)
            except ValueError as exc:
                raise UsageError(f"{source}: {exc}", "write e.g. 6/min, 1/s or 100/h") from exc
    return configured


class PushPacer:
    """Per memory: may a checkpoint push now, and which deferred pushes are due."""

    def __init__(self, rates: dict[str, PushRate | None]) -> None:
        self._rates = rates
        self._last: dict[str, float] = {}
        self._deferred: set[str] = set()
        self._lock = threading.Lock()
        self.deferred_total = 0

    def may_push(self, name: str) -> bool:
        rate = self._rates.get(name)
        with self._lock:
            last = self._last.get(name)
            allowed = rate is None or last is None or time.monotonic() - last >= rate.interval
            if not allowed:
                self._deferred.add(name)
                self.deferred_total += 1
            return allowed

    def pushed(self, name: str) -> None:
        with self._lock:
            self._last[name] = time.monotonic()
            self._deferred.discard(name)

    def due(self) -> list[str]:
        """Memories with a deferred checkpoint whose next push is allowed now."""
        with self._lock:
            now = time.monotonic()
            return sorted(n for n in self._deferred
                          if (rate := self._rates.get(n)) is None or now - self._last.get(n, 0.0) >= rate.interval)
