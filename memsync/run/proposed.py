"""A run whose changes wait for review: `memsync run --propose` (and `consolidate`), and the
changes an ordinary run made to `mode: review` paths (sync/proposing.py does the work)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Protocol

from memsync.core.memory import Memory
from memsync.errors import MemsyncError
from memsync.git.scan import scan

Say = Callable[[str], None]


class _Outcome(Protocol):
    error: str | None
    proposal: str | None


class _Mounted(Protocol):
    """What this module reads of a run's writable memory (run/outcome.py's Mounted)."""

    mem: Memory
    base: str | None

    @property
    def name(self) -> str: ...

    @property
    def outcome(self) -> _Outcome: ...


@contextlib.contextmanager
def proposed(memories: list[Memory], read_only: set[str], run_id: str, offline: bool,
             say: Say) -> Iterator[list[Memory]]:
    """The run's memories, each writable one seen through its proposal's branch until the block
    ends (then put back on the memory's version; a kill leaves HEAD on the proposal, whose
    checkpoints are on the hub, and `git switch` brings it back)."""
    from memsync.sync import proposing

    started: list[tuple[Memory, Memory]] = []
    views: list[Memory] = []
    try:
        for mem in memories:
            if mem.name in read_only:
                views.append(mem)
                continue
            view = proposing.begin(mem, run_id, offline=offline)
            started.append((view, mem))
            views.append(view)
        yield views
    finally:
        for view, mem in started:
            try:
                proposing.finish(view, mem)
            except MemsyncError as exc:
                say(f"{mem.name}: {exc.message}" + (f" ({exc.hint})" if exc.hint else ""))


def propose_reviewed(writable: Sequence[_Mounted], run_id: str, say: Say, push: bool = True) -> None:
    """The changes an ordinary run made to `mode: review` paths, made the proposal `run_id`
    (`push=False`, --no-push: on the local branch only)."""
    from memsync.checks import protect
    from memsync.sync.proposing import split_for_review

    for m in writable:
        rules = protect.parse_protect(m.mem.config.protect) if m.mem.config.protect else []
        if not any(r.mode == "review" for r in rules):
            continue
        pushing = push and not m.outcome.error  # the hub refused or is down: kept on the local branch
        try:
            with m.mem.locked():
                paths = [c.path for c in scan(m.mem.git, full=True, tree_ignores=False).changes
                         if protect.for_review(c.path, rules)]
                split = split_for_review(m.mem, run_id, m.base, paths, push=pushing)
        except MemsyncError as exc:
            m.outcome.error = f"the changes for review were not proposed: {exc.message}"
            say(f"{m.name}: {m.outcome.error}; they stay in {m.mem.root}")
            continue
        if split is None:
            continue
        for kept in split.kept_out:
            say(f"warning: {m.name}: not proposed: {kept}")
        if split.tip is not None:
            m.outcome.proposal = run_id
            where = "" if pushing else f" (on the local branch proposals/{m.name}/{run_id} only: not pushed)"
            say(f"{m.name}: {len(split.paths)} changed review path(s) wait for review as proposal {run_id}{where}: "
                + ", ".join(split.paths[:5]))


__all__ = ["propose_reviewed", "proposed"]
