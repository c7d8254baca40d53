"""What this clone did with the hub's redactions: the one it refused, and the histories it kept.

A followed redaction never deletes anything here: the history the clone had is kept under a
backup ref (`refs/memsync/redaction-backup/...`, local, never pushed) until the operator drops it
with `memsync redact --drop-backups`. A refused one is noted in `.git/memsync-redaction.json`
until it is followed or the hub no longer holds it. `status` and `log --flagged` read both.
"""

from __future__ import annotations

from memsync.core.memory import HUB_BEFORE_REWRITE, REDACTION_BACKUPS, Memory
from memsync.util.fs import read_private, write_private
from memsync.util.records import asdict, field, recordclass

BACKUP_PREFIX = REDACTION_BACKUPS
REFUSED_FILE = "memsync-redaction.json"


@recordclass
class Incoming:
    """What following a hub's redaction would change in this clone."""

    record: str  # the hub's version holding the redaction record
    old_head: str
    new_head: str
    versions: int  # versions of this clone's history rewritten
    replayed: int  # of them, local versions the hub never had
    files: list[str] = field(default_factory=list)  # paths whose content is replaced
    bytes_removed: int = 0  # replaced bytes, once per distinct content
    not_secrets: list[str] = field(default_factory=list)  # files where more than a secret is replaced

    def summary(self) -> str:
        from memsync.util.textsafe import display_path  # the names come from the hub

        shown = ", ".join(display_path(p) for p in self.files[:5])
        shown += f" and {len(self.files) - 5} more" if len(self.files) > 5 else ""
        return (f"{len(self.files)} file(s) ({shown}), {self.bytes_removed} byte(s) replaced, "
                f"{self.versions} version(s) rewritten")


@recordclass
class RedactionNote:
    """One line of `status`: a refused redaction, or a history kept after following one."""

    state: str  # "refused" | "followed"
    version: str  # the hub's record (refused) or the history kept (followed), full id
    detail: str
    ref: str | None = None  # the backup ref (followed)


def note_refused(mem: Memory, incoming: Incoming) -> None:
    from datetime import datetime, timezone

    data = dict(asdict(incoming), time=datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"))
    import json  # only when a redaction was refused

    write_private(mem.git.git_dir / REFUSED_FILE, json.dumps(data).encode())


def refused(mem: Memory) -> Incoming | None:
    """The redaction this clone refused last, if the hub still holds it (by our last fetch)."""
    try:
        raw = read_private(mem.git.git_dir / REFUSED_FILE, 1 << 20)
        import json  # only when a refusal is on record

        data = json.loads(raw.decode("utf-8"))
        data.pop("time", None)
        found = Incoming(**data)
    except (OSError, ValueError, TypeError, AttributeError):
        return None
    if not _well_formed(found):  # a file anyone writing .git could have edited: checked, not trusted
        return None
    tip = mem.git.ref_oid(mem.tracking_ref)
    if tip is None or not (tip == found.record
                           or (mem.git.has_object(found.record) and mem.git.is_ancestor(found.record, tip))):
        return None  # a record this clone does not hold (pruned, or an edited note) is not the hub's
    return found


def _well_formed(found: Incoming) -> bool:
    ids = (found.record, found.old_head, found.new_head)
    counts = (found.versions, found.replayed, found.bytes_removed)
    return (all(isinstance(i, str) and len(i) == 40 and all(c in "0123456789abcdef" for c in i) for i in ids)
            and all(isinstance(n, int) for n in counts)
            and all(isinstance(lst, list) and all(isinstance(p, str) for p in lst)
                    for lst in (found.files, found.not_secrets)))


def clear_refused(mem: Memory) -> None:
    (mem.git.git_dir / REFUSED_FILE).unlink(missing_ok=True)


def keep_backup(mem: Memory, oid: str) -> str:
    """Keep `oid` (the history before following a redaction) reachable; the ref's name."""
    from datetime import datetime, timezone

    ref = f"{BACKUP_PREFIX}{datetime.now(timezone.utc):%Y%m%dT%H%M%S%fZ}-{oid[:8]}"
    mem.git.set_ref(ref, oid, "memsync: history kept before following a redaction")
    return ref


def backups(mem: Memory) -> list[tuple[str, str]]:
    """(ref, commit) of each kept history, oldest first."""
    return sorted(mem.git.refs_under(BACKUP_PREFIX))


def notes(mem: Memory) -> list[RedactionNote]:
    found = []
    pending = refused(mem)
    if pending is not None:
        found.append(RedactionNote("refused", pending.record, pending.summary()))
    for ref, oid in backups(mem):
        found.append(RedactionNote("followed", oid, "the history before a followed redaction is kept", ref))
    return found


def drop_backups(mem: Memory) -> list[str]:
    """Delete every kept history's ref (caller holds the lock), and what fetch kept of a hub's
    tip before it rewrote its history (the same objects); the backup refs deleted."""
    dropped = []
    for ref, _ in backups(mem):
        mem.git.delete_ref(ref)
        dropped.append(ref)
    for name, _ in mem.git.refs_under(HUB_BEFORE_REWRITE + "/"):
        mem.git.delete_ref(name)
    return dropped
