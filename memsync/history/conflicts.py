"""Getting a losing version back from a path's gathered conflict file (checks/gathered.py).

`memsync restore PATH --conflict ID` finds entry ID in PATH's gathered file (the work tree's copy,
else the current version's) and takes its bytes from the memory's history by blob id, after
fetching what a shallow clone left out; only when history no longer holds that blob (a hub whose
history was rewritten) are the inlined bytes used, and then only if they hash to that blob id.
"""

from __future__ import annotations

import hashlib
import re

from memsync.checks import gathered
from memsync.core.memory import Memory
from memsync.errors import RepoError, UsageError
from memsync.git import history
from memsync.sync import shallow
from memsync.util.names import gathered_name
from memsync.util.records import recordclass


@recordclass(frozen=True)
class LosingVersion:
    path: str
    id: str
    data: bytes
    version: str | None  # the commit it came from, when this memory has it
    gathered_in: str


def find(mem: Memory, rel: str, wanted: str) -> LosingVersion:
    name = gathered_name(rel)
    entries = gathered.parse(_gathered_bytes(mem, rel, name)).entries
    matches = [e for key, e in entries.items() if key == wanted] or \
              [e for key, e in entries.items() if key.startswith(wanted)]
    listed = ", ".join(sorted(entries)) or "none"
    if not matches:
        raise UsageError(f"{name} has no version {wanted!r}", f"its versions: {listed}")
    if len(matches) > 1:
        raise UsageError(f"{wanted!r} names {len(matches)} versions in {name}", f"give more of the id: {listed}")
    entry = matches[0]
    if entry.path not in (None, rel):
        raise UsageError(f"version {entry.id} in {name} is a version of {entry.path}, not of {rel}",
                         f"memsync restore {entry.path} --conflict {entry.id}")
    data = _bytes_of(mem, entry)
    version = entry.field("version")
    known = version if version and len(version) == 40 and mem.git.has_object(version) else None
    return LosingVersion(rel, entry.id, data, known, name)


def _gathered_bytes(mem: Memory, rel: str, name: str) -> bytes:
    try:
        return (mem.root / name).read_bytes()
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise RepoError(f"cannot read {name}: {exc.strerror}", "check permissions") from exc
    head = mem.git.head_oid()
    found = history.blob_at(mem.git, head, name) if head else None
    if found is None:
        raise UsageError(f"{rel} has no versions to fold: there is no {name}",
                         "`memsync status` lists the files holding other writers' versions")
    return found[0]


def _bytes_of(mem: Memory, entry: gathered.Entry) -> bytes:
    """The entry's blob from history; the file is anyone's to write, so `blob` is only ever read
    as a blob of this memory (a tree or commit id there, or no id, falls back to the inline copy)."""
    blob = entry.blob or ""
    if not re.fullmatch(r"[0-9a-f]{40}", blob):
        blob = ""
    if blob and not mem.git.has_object(blob):
        shallow.complete(mem)  # a shallow clone may lack the version it came from
    found = history.blob_by_id(mem.git, blob) if blob else None
    if found is not None:
        return found
    inline = entry.inline()
    if inline is not None and blob_id(inline) == blob:
        return inline
    raise RepoError(f"version {entry.id} of {entry.path} is not in this memory's history"
                    + (" and its copy in the gathered file was changed" if inline is not None else ""),
                    "`memsync clone NAME --full-history` from the hub it came from has every version")


def blob_id(data: bytes) -> str:
    """git's id for a blob holding `data` (what `git hash-object` prints)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()
