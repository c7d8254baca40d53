"""What push, pull, clone and status are asked to do: each verb's options as one record, their defaults
declared here and nowhere else (the command line's spellings and help are in cli/options.py)."""

from __future__ import annotations

from memsync.util.records import recordclass

__all__ = ["CloneOptions", "PullOptions", "PushOptions", "StatusOptions"]


@recordclass(frozen=True)
class PushOptions:
    """`memsync push`: commit local changes as the operator, then push."""

    force: bool = False  # a new version even if nothing changed (never rewrites the hub's history)
    message: str | None = None  # the commit message; None: memsync's own
    remote: str | None = None  # the hub URL; None: storage.yaml's, MEMSYNC_REMOTE, the embedded hub


@recordclass(frozen=True)
class PullOptions:
    """`memsync pull [NAME]`: in a memory, fetch and merge; outside one with NAME, clone into ./NAME."""

    name: str | None = None
    remote: str | None = None


@recordclass(frozen=True)
class CloneOptions:
    """`memsync clone NAME [DEST]`: a working memory made from the hub."""

    name: str  # the memory's name on the hub (required)
    dest: str | None = None  # the directory to create; None: ./NAME
    remote: str | None = None
    full_history: bool = False  # every version now; by default a network hub sends the newest one


@recordclass(frozen=True)
class StatusOptions:
    """`memsync status`."""

    remote: str | None = None
