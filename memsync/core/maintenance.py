"""Automatic maintenance, like git's `gc --auto`: repack a repository once it has too many loose
objects or packs. Memories are checked when a command releases their lock, a local hub after each
push into it, beside the hub's lock (auto_beside): a repack of a large hub can take minutes, and
every writer would wait for it. A repack is safe beside pushes: it writes a new pack of every
object it listed before removing what it read, and a push only ever adds packs; a lock of its
own keeps two repacks apart.

Thresholds follow git's defaults (gc.auto = 6700 loose objects, gc.autoPackLimit = 50) and can be
changed with MEMSYNC_GC_LOOSE and MEMSYNC_GC_PACKS (0 turns automatic maintenance off).
Maintenance never fails the command that triggered it: a failed repack is a warning, and the
repository is left as it was.
"""

from __future__ import annotations

import os
from pathlib import Path

from memsync.errors import MemsyncError
from memsync.git import pack
from memsync.git.pack import RepackResult

DEFAULT_LOOSE_LIMIT = 6700
DEFAULT_PACK_LIMIT = 50


def _limit(name: str, default: int) -> int:
    try:
        return max(int(os.environ.get(name, default)), 0)
    except ValueError:
        return default


def due(git_dir: Path) -> bool:
    loose_limit = _limit("MEMSYNC_GC_LOOSE", DEFAULT_LOOSE_LIMIT)
    pack_limit = _limit("MEMSYNC_GC_PACKS", DEFAULT_PACK_LIMIT)
    if not loose_limit and not pack_limit:
        return False
    found = pack.counts(git_dir, exact=0 < loose_limit < 2560)  # one sampled directory is too coarse
    return bool((loose_limit and found.loose > loose_limit) or (pack_limit and found.packs > pack_limit))


def auto(git_dir: Path) -> RepackResult | None:
    """Repack `git_dir` if it is due; the caller holds its lock."""
    if not due(git_dir):
        return None
    try:
        return pack.repack(git_dir)
    except (MemsyncError, OSError) as exc:
        from memsync.util import notices

        notices.warn(f"automatic maintenance of {git_dir} failed ({getattr(exc, 'message', exc)}); "
                     "run `memsync gc` to retry")
        return None


def auto_beside(git_dir: Path) -> RepackResult | None:
    """A hub's repack, if due, without its lock: under a lock of the repack's own, taken without
    waiting (another process repacking it already: nothing to do)."""
    if not due(git_dir):
        return None
    from memsync.core.locking import held
    from memsync.errors import LockBusy

    try:
        with held(git_dir / "memsync-repack.lock", f"the repack of {git_dir}", timeout=0):
            return auto(git_dir)
    except LockBusy:
        return None


__all__ = ["auto", "auto_beside", "due"]
