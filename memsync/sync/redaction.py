"""How a clone follows a redaction made elsewhere: by itself, on its next fetch.

`memsync redact` rewrites a memory's history on the hub and leaves a record on top (trailers
`Memsync-Redaction-Base`, `Memsync-Rewritten: OLD NEW`, `Memsync-Redacted-Blob: OLD NEW`). A clone
whose history the hub no longer contains, and which the record covers, applies the same blob map
to its own history: the versions the hub had are mapped to their rewritten ids, its unpushed
versions are replayed on top of them (nothing lost), and files still holding a redacted blob are
replaced in the work tree. The usual merge with the hub follows.

The record is the hub's word, and the hub is untrusted: a blob mapping is used only if the new
content is the old one with parts replaced by memsync's placeholder, and the rewrite is recomputed
here (it is deterministic) and must give exactly the versions the record names.

Any hub writer can make a redaction, so a clone follows one by itself only when every span it
replaces is something memsync's own secret scanner recognises as a secret, or when the operator
set `trust_redactions: true` in this memory's storage.yaml (for its own hub only). Any other is
refused (RedactionRefused, exit 7, nothing changed here) until the operator accepts it with
`memsync redact --follow`, which shows what it removes first. Nothing is ever deleted: the
history this clone had stays under a backup ref until `memsync redact --drop-backups`.
"""

from __future__ import annotations

from collections.abc import Callable

from memsync.checks.redaction_spans import only_secrets, replaced
from memsync.core.memory import Memory
from memsync.errors import RepoError
from memsync.git import rewrite
from memsync.git.trailers import every, first, parse
from memsync.sync import redaction_log
from memsync.sync.redaction_log import Incoming
from memsync.util.records import recordclass

BASE = "Memsync-Redaction-Base"
REWRITTEN = "Memsync-Rewritten"
BLOB = "Memsync-Redacted-Blob"


@recordclass
class Recovery:
    old_head: str
    new_head: str
    replayed: int  # local versions the hub did not have, recreated on the redacted history
    backup: str  # the ref keeping the history this clone had (nothing is deleted)
    why: str  # "secrets only" | "trust_redactions" | "accepted"
    incoming: Incoming


class RedactionRefused(RepoError):
    """The hub's history was rewritten by a redaction that this clone does not follow by itself."""

    def __init__(self, incoming: Incoming) -> None:
        super().__init__(
            f"the hub's history was rewritten by a redaction that replaces more than secrets: "
            f"{incoming.summary()}; not followed, nothing was changed here",
            "review it and accept it with `memsync redact --follow` (it shows the files, bytes and versions "
            "first), or set `trust_redactions: true` in .vm0/storage.yaml to follow this hub's redactions")
        self.incoming = incoming


Decide = Callable[[Incoming], bool]  # the operator's word on a redaction that is not secrets only


def _pairs(values: list[str]) -> dict[str, str]:
    found = {}
    for value in values:
        parts = value.split()
        if len(parts) == 2:
            found[parts[0]] = parts[1]
    return found


def _shallow_roots(mem: Memory, commits: dict[str, str]) -> rewrite.AdoptFn | None:
    """A shallow clone cannot rewrite the versions where its history stops (their parents are not
    here): each becomes the commit the hub's record names, if that commit is here and is this
    one with exactly the rewritten tree (same message, author, committer and dates); its parents
    are the hub's redacted history. Anything else leaves it to the mismatch check."""
    if not mem.git.is_shallow:
        return None
    from memsync.sync import shallow

    roots = set(shallow.roots(mem))

    def adopt(old: str, tree: str) -> str | None:
        new = commits.get(old)
        if old not in roots or new is None:
            return None
        return new if rewrite.same_but_tree(mem.git, old, new, tree) else None

    return adopt


def recover(mem: Memory, theirs: str, decide: Decide | None = None) -> Recovery | None:
    """Adopt a redaction the hub's history records, if it covers our history; None otherwise.
    Caller holds the memory's lock, and the work tree is committed (a snapshot was just taken).
    One that replaces more than secrets is followed only with the operator's trust (storage.yaml)
    or word (`decide`); else RedactionRefused."""
    git = mem.git
    ours = git.head_oid()
    if ours is None or git.is_ancestor(ours, theirs) or git.is_ancestor(theirs, ours):
        return None
    commits: dict[str, str] = {}
    blobs: dict[str, str] = {}
    for info in git.walk(theirs, hide=ours):
        trailers = parse(info.message)
        if first(trailers, BASE) is None:
            continue
        commits.update(_pairs(every(trailers, REWRITTEN)))
        blobs.update(_pairs(every(trailers, BLOB)))
    if not commits:
        return None
    if not any(rewrite.reaches(git, ours, old) for old in commits):
        return None
    trusted = {old: new for old, new in blobs.items() if rewrite.is_redaction_of(git, old, new)}

    def replace(blob: str) -> str | None:
        new = blob
        for _ in range(100):  # a blob redacted twice: follow the chain
            if new not in trusted:
                break
            new = trusted[new]
        return new if new != blob else None

    done = rewrite.rewrite(git, ours, replace, _shallow_roots(mem, commits))
    mismatched = [old for old, new in done.commits.items() if old in commits and commits[old] != new]
    unmapped = [old for old in commits if old not in done.commits and rewrite.reaches(git, ours, old)]
    if mismatched or unmapped:
        raise RepoError(
            f"the hub's history was rewritten, but its redaction record does not match this memory's "
            f"history (version {(mismatched or unmapped)[0][:8]}); nothing was changed here",
            "ask the hub's owner, or `memsync clone` the memory afresh and copy your files over")
    incoming = _incoming(mem, theirs, ours, done, commits)
    if not incoming.not_secrets:
        why = "secrets only"
    elif mem.config.trust_redactions and mem.tracking == "origin":
        why = "trust_redactions"
    elif decide is not None and decide(incoming):
        why = "accepted"
    else:
        redaction_log.note_refused(mem, incoming)
        raise RedactionRefused(incoming)
    from memsync.git.ownership import recorded

    made = recorded(git)
    for old, new in done.commits.items():  # a rewritten version of memsync's commit is memsync's
        if old in made:
            git.note_made(new)
    backup = redaction_log.keep_backup(mem, ours)  # before anything moves: nothing is ever lost
    rewrite.move_to(git, mem.branch, done.tip, mem.name, mem.config.max_file_size)
    redaction_log.clear_refused(mem)
    return Recovery(ours, done.tip, incoming.replayed, backup, why, incoming)


def _incoming(mem: Memory, theirs: str, ours: str, done: rewrite.Rewritten, commits: dict[str, str]) -> Incoming:
    """Files, bytes and versions that following the redaction changes here, and the files where it
    replaces more than the secret scanner recognises."""
    git = mem.git
    removed = 0
    not_secrets: set[str] = set()
    suspicious: set[str] = set()
    for old, new in done.blobs.items():
        before, after = rewrite.blob_data(git, old), rewrite.blob_data(git, new)
        found = replaced(before, after) if before is not None and after is not None else None
        if found is None or before is None:
            suspicious.add(old)
            continue
        removed += found.removed
        if not only_secrets(before, found):
            suspicious.add(old)
    files = rewrite.paths_holding(git, list(done.commits), set(done.blobs))
    if suspicious:
        not_secrets.update(rewrite.paths_holding(git, list(done.commits), suspicious))
    replayed = sum(1 for old in done.commits if old not in commits)
    return Incoming(theirs, ours, done.tip, len(done.commits), replayed, files, removed, sorted(not_secrets))
