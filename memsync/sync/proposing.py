"""Making a session's writes a proposal instead of the memory's next version.

`begin(mem, run_id)` moves HEAD, in place, onto a new branch `proposals/<name>/<run-id>` at the
version the run pulled (same tree: the work tree and index do not change) and returns the
memory as seen through that branch. Everything the session commits and pushes through the
returned view (checkpoints, its final record, `exchange.converge`) goes to that branch on the
hub; the memory's own branch is never touched, here or on the hub, so a killed session leaves
its checkpoints on the proposal. `finish(view, mem)` puts HEAD back on the memory's branch and
its version in the work tree (a safe checkout: a file the proposal did not take is never
overwritten).

A tool that writes to a memory (the MCP server, the memory tool) makes its session a proposal
with one line: `mem = proposing.begin(mem, run_id)` after opening the memory, and
`proposing.finish(mem, original)` when the session ends.
"""

from __future__ import annotations

import copy

from memsync.core.memory import Memory
from memsync.errors import UsageError
from memsync.git import proposaltree
from memsync.sync.proposals import branch_for, check_room
from memsync.util.records import field, recordclass


def view(mem: Memory, branch: str) -> Memory:
    """`mem` seen through another branch of the same repository and hub."""
    config = copy.copy(mem.config)
    config.branch = branch
    return Memory(mem.root, config, mem.git, mem.hub, mem.tracking)


def begin(mem: Memory, run_id: str, *, offline: bool = False) -> Memory:
    """Start the proposal `run_id` on the version `mem` holds now (caller does not hold the lock)."""
    with mem.locked():
        base = mem.git.head_oid()
        if base is None:
            raise UsageError(f"memory {mem.name!r} has no version yet: there is nothing to propose a change to",
                             "run without --propose to start it")
        if not offline:
            check_room(mem)
        branch = branch_for(mem.name, run_id)
        if mem.git.ref_oid(f"refs/heads/{branch}") is not None:
            raise UsageError(f"proposal {run_id} already exists here", "give the run another --run-id")
        mem.git.check_state(mem.branch)
        proposaltree.switch_head(mem.git, branch, base)
    return view(mem, branch)


def finish(proposal_view: Memory, mem: Memory) -> None:
    """Back on the memory's branch and version; the proposal stays on the hub (and locally)."""
    with mem.locked():
        if mem.git.head_target() == proposal_view.local_ref:
            proposaltree.leave_branch(mem.git, mem.branch)


def split_for_review(mem: Memory, run_id: str, base: str | None, paths: list[str], *,
                     push: bool = True) -> Split | None:
    """A run's changes to `mode: review` paths (kept out of its versions by the snapshot) made
    the proposal `run_id` on `base`, pushed; then those paths are put back as the memory's
    version has them (the proposal holds the run's). The secret scan and size limit apply as to
    any commit: a file they keep out stays in the work tree, named. `push=False`: the proposal
    stays on the local branch (`git push` delivers it). Caller holds the lock."""
    from memsync.checks.secrets import scan_bytes
    from memsync.core.attribution import Attribution
    from memsync.git.trailers import compose
    from memsync.sync.proposals import hub_write

    if base is None or not paths:
        return None
    split = Split(run_id)
    written: dict[str, tuple[bytes, int] | None] = {}
    for path in sorted(set(paths)):
        read = proposaltree.read_work_file(mem.git, path, mem.config.max_file_size)
        if read == "skip":
            split.kept_out.append(f"{path} (not a regular file, or too large)")
            continue
        if read is not None and mem.config.secrets == "block" and scan_bytes(path, read[0]):
            split.kept_out.append(f"{path} (likely secret)")
            continue
        written[path] = read
    if not written:
        return split
    if push:
        check_room(mem)
    who = Attribution("run", f"Run {run_id}: changes for review", run_id)
    tip = proposaltree.with_files(mem.git, base, written, compose(who.subject, who.trailers([])), who.author())
    branch = branch_for(mem.name, run_id)
    mem.git.set_ref(f"refs/heads/{branch}", tip, "memsync: changes for review")
    if push:
        hub_write(mem, f"refs/heads/{branch}", f"refs/heads/{branch}", tip, None)
    proposaltree.restore_paths(mem.git, sorted(written))
    split.paths = sorted(written)
    split.tip = tip
    return split


def recover(mem: Memory, offline: bool = False) -> str | None:
    """A proposal run killed before `finish` left HEAD on its branch: what it left uncommitted is
    committed there as that run's, pushed to the proposal (unless `offline`; a failed push keeps
    it on the local branch), and HEAD goes back to the memory's version. The run's id, or None
    when HEAD is on no proposal. Caller holds the lock; a live run owning the memory is left alone."""
    from memsync.core.attribution import Attribution
    from memsync.core.memory import live_run
    from memsync.core.snapshot import take
    from memsync.errors import RemoteError
    from memsync.sync.exchange import converge
    from memsync.util import notices

    target = mem.git.head_target() or ""
    prefix = f"refs/heads/{branch_for(mem.name, '')}"
    if not target.startswith(prefix) or live_run(mem) is not None:
        return None
    run_id = target.removeprefix(prefix)
    seen = view(mem, target.removeprefix("refs/heads/"))
    who = Attribution("run", f"Save what run {run_id} left (killed)", run_id)
    def resnap() -> None:
        take(seen, who)

    resnap()
    if not offline:
        try:
            converge(seen, who, resnap)
        except RemoteError as exc:
            notices.warn(f"proposal {run_id} is not on the hub yet ({exc.message}); its versions stay on "
                         f"{seen.branch} here")
    proposaltree.leave_branch(mem.git, mem.branch)
    notices.warn(f"a killed run's proposal {run_id}: its directory is back on {mem.branch}")
    return run_id


@recordclass
class Split:
    proposal: str
    tip: str | None = None
    paths: list[str] = field(default_factory=list)  # proposed, and put back in the work tree
    kept_out: list[str] = field(default_factory=list)


__all__ = ["Split", "begin", "finish", "recover", "split_for_review", "view"]
