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
"""

from __future__ import annotations

from dataclasses import dataclass

from memsync.core.memory import Memory
from memsync.errors import RepoError
from memsync.git import rewrite
from memsync.git.trailers import every, first, parse

BASE = "Memsync-Redaction-Base"
REWRITTEN = "Memsync-Rewritten"
BLOB = "Memsync-Redacted-Blob"


@dataclass
class Recovery:
    old_head: str
    new_head: str
    replayed: int  # local versions the hub did not have, recreated on the redacted history
    purged: bool


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


def recover(mem: Memory, theirs: str) -> Recovery | None:
    """Adopt a redaction the hub's history records, if it covers our history; None otherwise.
    Caller holds the memory's lock, and the work tree is committed (a snapshot was just taken)."""
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
    from memsync.git.ownership import recorded

    made = recorded(git)
    for old, new in done.commits.items():  # a rewritten version of memsync's commit is memsync's
        if old in made:
            git.note_made(new)
    rewrite.move_to(git, mem.branch, done.tip, mem.name, mem.config.max_file_size)
    replayed = sum(1 for old in done.commits if old not in commits)
    return Recovery(ours, done.tip, replayed, rewrite.purge(git.git_dir))
