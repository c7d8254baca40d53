"""What `log` is asked to do: its options as one record, their defaults declared here and nowhere
else (the command line's spellings and help are in cli/options.py)."""

from __future__ import annotations

from memsync.util.records import recordclass

__all__ = ["LogOptions"]


@recordclass(frozen=True)
class LogOptions:
    """`memsync log [PATH]`: the versions of the memory in the current directory, newest first."""

    path: str | None = None  # only the versions that changed this file
    run: str | None = None  # only this run's versions
    flagged: bool = False  # only versions the integrity guard flagged or a protect policy refused
    limit: int | None = None  # at most this many versions
