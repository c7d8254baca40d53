"""Automatic maintenance, like git's `gc --auto`: pack a repository's loose objects once they are
too many, and repack it into one pack once it has too many packs. Memories are checked when a
command releases their lock, a local hub after each push into it, beside the hub's lock
(auto_beside): a repack of a large hub can take minutes, and every writer would wait for it.
Both steps are safe beside pushes: each writes a new pack of every object it listed before
removing what it read, and a push only ever adds packs; a lock of its own keeps two apart.

Thresholds follow git's defaults (gc.auto = 6700 loose objects, gc.autoPackLimit = 50) and can be
changed with MEMSYNC_GC_LOOSE and MEMSYNC_GC_PACKS (0 turns automatic maintenance off).
Maintenance never fails the command that triggered it: a failed repack is a warning, and the
repository is left as it was.
"""

from __future__ import annotations

import os
from collections.abc import Callable
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


def due(git_dir: Path) -> Callable[[Path], RepackResult] | None:
    """What `git_dir` is due, as `gc --auto` decides it: too many packs, a repack of everything
    into one; else too many loose objects, a pack of the loose objects (pack.pack_loose), in
    bounded batches, leaving the packs there; else nothing."""
    loose_limit = _limit("MEMSYNC_GC_LOOSE", DEFAULT_LOOSE_LIMIT)
    pack_limit = _limit("MEMSYNC_GC_PACKS", DEFAULT_PACK_LIMIT)
    if not loose_limit and not pack_limit:
        return None
    found = pack.counts(git_dir, exact=0 < loose_limit < 2560)  # one sampled directory is too coarse
    if pack_limit and found.packs > pack_limit:
        return pack.repack
    if loose_limit and found.loose > loose_limit:
        return pack.pack_loose
    return None


def auto(git_dir: Path, before: Callable[[], None] | None = None) -> RepackResult | None:
    """Pack `git_dir` if it is due; the caller holds its lock. `before`: run first when it is
    (the caller lets go of what it no longer needs: the step's peak comes on top of it)."""
    step = due(git_dir)
    if step is None:
        return None
    try:
        if before is not None:
            before()
        return step(git_dir)
    except (MemsyncError, OSError) as exc:
        from memsync.util import notices

        notices.warn(f"automatic maintenance of {git_dir} failed ({getattr(exc, 'message', exc)}); "
                     "run `memsync gc` to retry")
        return None


def auto_beside(git_dir: Path) -> RepackResult | None:
    """A hub's repack, if due, without its lock: under a lock of the repack's own, taken without
    waiting (another process repacking it already: nothing to do)."""
    if due(git_dir) is None:
        return None
    from memsync.core.locking import held
    from memsync.errors import LockBusy

    try:
        with held(git_dir / "memsync-repack.lock", f"the repack of {git_dir}", timeout=0):
            return auto(git_dir)
    except LockBusy:
        return None


__all__ = ["auto", "auto_beside", "due"]
