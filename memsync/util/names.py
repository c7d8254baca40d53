"""Names memsync gives and accepts: memory names, run ids, conflict copies, env variables."""

from __future__ import annotations

import os
import re
from pathlib import PurePosixPath
from typing import TYPE_CHECKING

from memsync.errors import InvalidName, UsageError
from memsync.util.lazyre import LazyRe

if TYPE_CHECKING:  # datetime is imported by the functions that read the clock
    from datetime import datetime

NAME_RE: LazyRe[str] = LazyRe(r"^[a-z0-9](?:[a-z0-9-]{1,62})[a-z0-9]$")
MEMORY_TYPES = ("memory", "artifact")
RUN_ID_RE: LazyRe[str] = LazyRe(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def suggest_name(raw: str) -> str | None:
    """A valid name close to `raw`, or None when nothing sensible is left."""
    import unicodedata

    ascii_text = unicodedata.normalize("NFKD", raw).encode("ascii", "ignore").decode()
    slug = re.sub(r"[^a-z0-9]+", "-", ascii_text.lower()).strip("-")[:64].strip("-")
    if len(slug) < 3:
        slug = (slug + "-mem") if slug else ""
    return slug if slug and NAME_RE.match(slug) else None


def check_name(name: str) -> str:
    """Return `name` if it is safe as a ref component and a directory name (vm0's rule)."""
    if not name:
        raise InvalidName(name, "it is empty", None)
    if len(name) < 3 or len(name) > 64:
        problem = f"it has {len(name)} character{'' if len(name) == 1 else 's'}; 3 to 64 are allowed"
    elif not NAME_RE.match(name):
        problem = "use lowercase letters, digits and hyphens, starting and ending with a letter or digit"
    else:
        return name
    raise InvalidName(name, problem, suggest_name(name))


def check_type(kind: str) -> str:
    if kind not in MEMORY_TYPES:
        raise UsageError(f"invalid type {kind!r}", f"use one of: {', '.join(MEMORY_TYPES)}")
    return kind


_BAD_REF: LazyRe[str] = LazyRe(r"[\x00-\x20~^:?*\[\\\x7f]|\.\.|//|@\{|^/|/$|^\.|/\.|\.lock(/|$)|\.$|^@$")


def valid_branch(branch: str) -> bool:
    """git's rules for a branch name (check-ref-format), so storage.yaml `branch:` fails early."""
    return bool(branch) and _BAD_REF.search(branch) is None and not branch.startswith("-")


def new_run_id(now: datetime | None = None) -> str:
    """Sortable (to the millisecond), unique across machines (48 random bits), safe as a file
    name: 20261122T101500123Z-3f9a1c0b7e2d."""
    from datetime import datetime, timezone

    when = now or datetime.now(timezone.utc)
    return f"{when:%Y%m%dT%H%M%S}{when.microsecond // 1000:03d}Z-{os.urandom(6).hex()}"


def check_run_id(run_id: str) -> str:
    if not RUN_ID_RE.match(run_id) or ".." in run_id:
        raise UsageError(
            f"invalid run id {run_id!r}",
            "use letters, digits, '.', '_' and '-' (at most 128, no '..'), safe as a file name",
        )
    return run_id


def host_name() -> str:
    import socket

    return re.sub(r"[^A-Za-z0-9.-]+", "-", socket.gethostname()) or "host"


def utc_stamp(now: datetime | None = None) -> str:
    from datetime import datetime, timezone

    return f"{(now or datetime.now(timezone.utc)):%Y%m%dT%H%M%SZ}"


def conflict_copy_name(path: str, tag: str, now: datetime | None = None) -> str:
    """`notes/summary.md` -> `notes/summary.conflict-<tag>-<UTC>.md` (BRIEF rule 1)."""
    p = PurePosixPath(path)
    safe_tag = re.sub(r"[^A-Za-z0-9._-]+", "-", tag).strip("-") or "other"
    stem, suffix = (p.name, "") if p.name.startswith(".") and p.suffix == p.name else (p.stem, p.suffix)
    name = f"{stem}.conflict-{safe_tag}-{utc_stamp(now)}{suffix}"
    return str(p.with_name(name)) if str(p.parent) != "." else name


CONFLICT_RE: LazyRe[str] = LazyRe(r"\.conflict-[A-Za-z0-9._-]+-\d{8}T\d{6}Z(?:\.[^/]*)?$")


def is_conflict_copy(path: str) -> bool:
    """An old-style sibling copy (`NAME.conflict-<tag>-<UTC>.EXT`), as trees made before the
    gathered files still hold, and as protected-file and folder clashes still make."""
    return bool(CONFLICT_RE.search(path))


GATHERED_SUFFIX = ".conflicts.md"


def gathered_name(path: str) -> str:
    """Where the losing versions of `path` are gathered (checks/gathered.py): one Markdown file
    beside it. `summary.md` -> `summary.conflicts.md`; any other name gets the suffix appended:
    `data.json` -> `data.json.conflicts.md`, `Makefile` -> `Makefile.conflicts.md`,
    `.env` -> `.env.conflicts.md`. (`x` and `x.md` share `x.conflicts.md`; each entry names its path.)"""
    if path.endswith(".md") and path.rsplit("/", 1)[-1] != ".md":
        return path[:-len(".md")] + GATHERED_SUFFIX
    return path + GATHERED_SUFFIX


def is_gathered(path: str) -> bool:
    return path.endswith(GATHERED_SUFFIX) and path.rsplit("/", 1)[-1] != GATHERED_SUFFIX


def conflict_copy_source(path: str) -> str:
    """The path an old-style copy is a version of: `a/summary.conflict-r1-20261126T010203Z.md` -> `a/summary.md`."""
    m = CONFLICT_RE.search(path)
    if m is None:
        return path
    suffix = re.sub(r"^\.conflict-[A-Za-z0-9._-]+?-\d{8}T\d{6}Z", "", m.group(0))
    return path[:m.start()] + suffix


def where_kept(copy: str) -> str:
    """How a message says where a losing version went: `added to summary.conflicts.md` (gathered)
    or `as summary.conflict-r1-20261126T010203Z.md` (an old-style copy)."""
    return f"added to {copy}" if is_gathered(copy) else f"as {copy}"


def is_conflict_file(path: str) -> bool:
    """A file that holds versions still to fold: a gathered file or an old-style copy."""
    return is_gathered(path) or is_conflict_copy(path)


def env_var_for(name: str) -> str:
    """MEMSYNC_MEMORY_<NAME>_DIR with every character other than A-Z, 0-9 as `_`."""
    return "MEMSYNC_MEMORY_" + re.sub(r"[^A-Z0-9]", "_", name.upper()) + "_DIR"


def operator_identity() -> tuple[str, str]:
    """Who the operator is when git has no identity configured (common in sandboxes)."""
    user = os.environ.get("USER") or os.environ.get("LOGNAME") or "operator"
    return (f"{user} (memsync)", f"{user}@{host_name()}")
