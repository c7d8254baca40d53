"""Restore and revert from the page, through the same functions as `memsync restore` and
`memsync revert` (history/forensics.py: run ownership, the snapshot pipeline, the push and its
exit rules), run in a working copy of the memory that the page keeps under MEMSYNC_HOME.

The working copy is cloned from the page's hub on first use and pulled before every action, so
the version an action names is there and the new version is made on the hub's newest; it is the
operator's own clone, as the directory where they would type the command."""

from __future__ import annotations

import hashlib
from pathlib import Path

from memsync.git.hub import ensure_home
from memsync.history import forensics
from memsync.history.forensics import Outcome
from memsync.sync import storage
from memsync.ui.hubview import HubView


def working_copy(view: HubView, name: str) -> Path:
    """The page's clone of `name`, up to date with the hub."""
    where = ensure_home() / "ui" / hashlib.sha256(view.hub.url.encode()).hexdigest()[:16]
    where.mkdir(mode=0o700, parents=True, exist_ok=True)
    dest = where / name
    if (dest / ".vm0" / "storage.yaml").exists():
        storage.pull(dest)
    else:
        storage.clone(name, dest, remote=view.remote, full_history=True)
    return dest


def restore(view: HubView, name: str, path: str, at: str) -> Outcome:
    """`memsync restore PATH --at AT` in the page's working copy."""
    return forensics.restore(working_copy(view, name), [path], at)


def restore_conflict(view: HubView, name: str, path: str, conflict: str) -> Outcome:
    """`memsync restore PATH --conflict ID` in the page's working copy."""
    return forensics.restore(working_copy(view, name), [path], None, conflict=conflict)


def revert(view: HubView, name: str, rev: str) -> Outcome:
    """`memsync revert REV` (or `run:<id>`) in the page's working copy."""
    return forensics.revert(working_copy(view, name), rev)
