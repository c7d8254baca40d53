"""Memories cloned without their older versions, and getting those versions when they are read.

A clone from a network hub fetches the newest version alone (a shallow clone, `.git/shallow`
names where its history stops): a sandbox's memory boots as fast at 5,000 versions as at 5, and
pull, push, status and run never look further back than the version they were cloned at (the
hub is only ever fast-forwarded, so every merge base is at or after it). What reads older
versions (log past that point, diff and restore of a version, revert, redact, a search of the
history, a merge with no base in sight) first asks the hub for the rest (`complete`), once:
afterwards the memory is a full clone. A push from a shallow memory goes only to a hub that holds
what the clone left out (`check_push`): anywhere else it would leave a history with a hole.
"""

from __future__ import annotations

from memsync.core.memory import Memory
from memsync.errors import MemsyncError, RepoError
from memsync.git import transport
from memsync.util import notices

__all__ = ["check_push", "complete", "is_shallow", "missing_root", "roots"]


def is_shallow(mem: Memory) -> bool:
    return bool(mem.git.is_shallow) and bool(roots(mem))


def roots(mem: Memory) -> list[str]:
    """The versions where a shallow memory's history stops (their parents were not fetched).
    Only those in the branch's history count: after following a redaction, the history kept
    under a backup ref (redaction_log.py) may stop somewhere the redacted one does not."""
    try:
        text = (mem.git.git_dir / "shallow").read_text("ascii", errors="replace")
    except OSError:
        return []
    listed = [line.strip() for line in text.splitlines() if len(line.strip()) == 40]
    head = mem.git.head_oid()
    if head is None or not listed:
        return listed
    return [root for root in listed if root == head or mem.git.is_ancestor(root, head)]


def complete(mem: Memory) -> bool:
    """Fetch the history a shallow clone left out; True when the memory's whole history is here.
    When the hub cannot give it (unreachable, or its history was rewritten since), a warning
    says so and what is here is used."""
    if not is_shallow(mem):
        return True
    stop = (roots(mem) or ["?"])[0][:8]
    try:  # no destination: FETCH_HEAD only, so no ref moves under a run or a push
        mem.hub.fetch_refs(mem.git, [f"refs/heads/{mem.branch}"], depth=transport.UNSHALLOW)
    except MemsyncError as exc:
        notices.warn(f"this memory was cloned without the versions before {stop}, and they could not be "
                     f"fetched ({exc.message}); only the later ones are here")
        return False
    mem.git.forget_cached()  # commits read while shallow are cached without their parents
    if is_shallow(mem):
        notices.warn(f"this memory was cloned without the versions before {stop}, and the hub no longer "
                     "has them (its history was rewritten); only the later ones are here")
        return False
    return True


def missing_root(mem: Memory, onto: str | None) -> str | None:
    """A version where a shallow memory's history stops that `onto` (the hub's tip) does not
    reach, so the hub lacks what comes before it; None when there is none (or not shallow)."""
    if not is_shallow(mem):
        return None
    return next((root for root in roots(mem)
                 if onto is None or not (root == onto or mem.git.is_ancestor(root, onto))), None)


def check_push(mem: Memory, onto: str | None) -> None:
    """Refuse to push a shallow memory's history onto `onto` (the hub's tip) unless the hub
    already has every version where that history stops."""
    root = missing_root(mem, onto)
    if root is not None:
        raise RepoError(
            f"not pushed: this memory was cloned without its versions before {root[:8]}, and "
            f"{mem.hub.display} does not have them",
            "push from a full clone (`memsync clone NAME --full-history` from the hub it came from); "
            "the version is committed locally",
        )
