"""Restore, revert, review, accept and reject from the page, through the same functions as
`memsync restore`, `memsync revert` (history/forensics.py), `memsync review`, `memsync accept`
and `memsync reject` (history/reviewing.py, sync/accepting.py): run ownership, the snapshot
pipeline, the policies, the push and its exit rules, run in a working copy of the memory that
the page keeps under MEMSYNC_HOME.

The working copy is cloned from the page's hub on first use and pulled before every action, so
the version an action names is there and the new version is made on the hub's newest; it is the
operator's own clone, as the directory where they would type the command."""

from __future__ import annotations

import hashlib
from pathlib import Path

from memsync.core.memory import open_memory
from memsync.git.hub import ensure_home
from memsync.history import forensics, reviewing
from memsync.history.forensics import Outcome
from memsync.history.reviewing import Review
from memsync.sync import accepting, storage
from memsync.sync.accepting import Acceptance
from memsync.sync.proposals import Proposal, list_proposals
from memsync.ui.hubview import HubView


def working_copy(view: HubView, name: str) -> Path:
    """The page's clone of `name`, up to date with the hub."""
    where = ensure_home() / "ui" / hashlib.sha256(view.hub.url.url.encode()).hexdigest()[:16]
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


def proposals(view: HubView, name: str, include_closed: bool) -> list[Proposal]:
    """`memsync proposals [--all]` in the page's working copy."""
    return list_proposals(open_memory(working_copy(view, name)), include_closed)


def review(view: HubView, name: str, pid: str) -> Review:
    """`memsync review ID --forgotten` in the page's working copy."""
    return reviewing.review(open_memory(working_copy(view, name)), pid, with_forgotten=True)


def accept(view: HubView, name: str, pid: str) -> Acceptance:
    """`memsync accept ID` in the page's working copy (refused while a run owns it, exit 9 rules)."""
    return accepting.accept(open_memory(working_copy(view, name)), pid)


def reject(view: HubView, name: str, pid: str, reason: str | None) -> Proposal:
    """`memsync reject ID [--reason R]` in the page's working copy."""
    return accepting.reject(open_memory(working_copy(view, name)), pid, reason)
