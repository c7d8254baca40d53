"""The numeric environment variables and on/off switches memsync reads, checked before a command
does anything.

A bad value (MEMSYNC_QUIET=abc) is a usage error naming the variable, exit 2, never a
ValueError deep inside a run ("this is a bug") nor a silent fallback to the default. The checks
return what they checked (`check_environment`: every set variable's value; `number`, `switch`: one
variable's, or the reader's default), so a reader need not parse a variable a second time. Every
variable memsync reads is listed in docs/ENVIRONMENT.md.
"""

from __future__ import annotations

import math
import os

from memsync.errors import UsageError

__all__ = ["NUMERIC", "SWITCHES", "check_environment", "number", "switch"]

# name: (integer?, smallest allowed, what it is)
NUMERIC: dict[str, tuple[bool, float, str]] = {
    "MEMSYNC_QUIET": (False, 0.0, "seconds without writes before a checkpoint"),
    "MEMSYNC_SETTLE": (False, 0.0, "seconds a write is still settling"),
    "MEMSYNC_LOCK_TIMEOUT": (False, 0.0, "seconds to wait for a busy memory"),
    "MEMSYNC_PUSH_PATIENCE": (False, 0.0, "seconds a push keeps retrying"),
    "MEMSYNC_CONNECT_TIMEOUT": (True, 0.0, "seconds to connect to a hub"),
    "MEMSYNC_IO_TIMEOUT": (True, 0.0, "seconds a hub may stay silent"),
    "MEMSYNC_GC_LOOSE": (True, 0.0, "loose objects before they are packed"),
    "MEMSYNC_GC_PACKS": (True, 0.0, "packs before an automatic repack"),
    "MEMSYNC_STOP_GRACE": (False, 0.0, "seconds a run's final push may go on after a stop signal"),
    "MEMSYNC_TURN_TIMEOUT": (False, 0.0, "seconds a ticket may stay first in a hub's push queue"),
    "MEMSYNC_MAX_PROPOSALS": (True, 0.0, "open proposals one memory may have"),
    "MEMSYNC_PROPOSAL_DAYS": (False, 0.0, "days gc keeps a closed proposal on the hub"),
    "MEMSYNC_NETWORK_TRIES": (True, 1.0, "tries of an exchange whose hub cannot be reached"),
    "MEMSYNC_CHECKOUT_PART_FILES": (True, 1.0, "files a first checkout writes per libgit2 call"),
    "MEMSYNC_CHECKOUT_THREADS": (True, 0.0, "threads a first checkout writes with (0: by CPUs)"),
}

# name: what `0` turns off (`1` leaves it on)
SWITCHES: dict[str, str] = {
    "MEMSYNC_PUSH_QUEUE": "the push queue on a network hub",
    "MEMSYNC_NARROW_PUSH": "a push's negotiation with only the hub's tips the memory holds",
    "MEMSYNC_V2_LISTING": "protocol v2's prefixed ref listing on a git:// or HTTP(S) hub",
    "MEMSYNC_V2_FETCH": "protocol v2's fetch of a memory's branch on a git:// or HTTP(S) hub",
    "MEMSYNC_PACK_INDEX_THREAD": "libgit2's indexer in a thread beside a fetched pack's reading and delta check",
}


def check_environment() -> dict[str, float | bool]:
    """Every variable of NUMERIC and SWITCHES that is set, by name, with its checked value; the
    first bad one raises."""
    found: dict[str, float | bool] = {}
    for name in NUMERIC:
        value = _checked_number(name)
        if value is not None:
            found[name] = value
    for name in SWITCHES:
        on = _checked_switch(name)
        if on is not None:
            found[name] = on
    return found


def number(name: str, default: float) -> float:
    """The checked value of `name` (one of NUMERIC), `default` when it is unset or empty: a reader
    takes it from here rather than parsing the variable again."""
    value = _checked_number(name)
    return default if value is None else value


def switch(name: str, default: bool = True) -> bool:
    """Whether `name` (one of SWITCHES) is on: `default` when it is unset or empty."""
    on = _checked_switch(name)
    return default if on is None else on


def _checked_number(name: str) -> float | None:
    integer, least, what = NUMERIC[name]
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return None
    try:
        value: float = int(raw) if integer else float(raw)
    except ValueError:
        value = math.nan
    if math.isnan(value) or math.isinf(value) or value < least:
        kind = "a whole number" if integer else "a number"
        raise UsageError(f"{name}={raw!r} is not {kind} of {what} (at least {least:g})",
                         f"set it to e.g. {name}={_example(name)}, or unset it for the default "
                         "(docs/ENVIRONMENT.md)")
    return value


def _checked_switch(name: str) -> bool | None:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return None
    if raw.strip() not in ("0", "1"):
        raise UsageError(f"{name}={raw!r} is neither 0 nor 1 ({SWITCHES[name]}: 0 turns it off)",
                         f"set {name}=0 or {name}=1, or unset it for the default (docs/ENVIRONMENT.md)")
    return raw.strip() == "1"


def _example(name: str) -> str:
    return {"MEMSYNC_GC_LOOSE": "6700", "MEMSYNC_GC_PACKS": "50", "MEMSYNC_CONNECT_TIMEOUT": "10",
            "MEMSYNC_IO_TIMEOUT": "60", "MEMSYNC_LOCK_TIMEOUT": "30", "MEMSYNC_PUSH_PATIENCE": "600",
            "MEMSYNC_SETTLE": "0.5", "MEMSYNC_TURN_TIMEOUT": "30"}.get(name, "2")
