"""Unpushed commits memsync did not make, met by `push` (and by `run` before its command starts).

A run folds its agent's commits itself (run/record.py). Commits that are still unpushed and that
memsync did not make come from elsewhere: the operator's own `git commit`, or an agent whose
run was killed before its final commit (its run marker is left behind), or one that outlived its
run. They are never relabelled as the operator's:

* left by a run that died (with the files it left uncommitted): folded into one commit attributed
  to that run (the branch goes back to
  the last commit memsync made or the hub has; the content, theirs plus the work tree, goes
  through the snapshot pipeline: secret scan, protect policies, guard);
* otherwise: their whole change since the hub's version is checked first; a likely secret (under
  `secrets: block`), a broken protect rule or a Memsync-* trailer memsync did not write refuses
  the push (exit 9) with the commits named; clean ones are pushed as they are, with their own
  messages (`memsync log` shows them as `git`, never as the operator).
"""

from __future__ import annotations

from memsync.checks import guard, protect
from memsync.core.attribution import Attribution
from memsync.core.memory import RUN_MARKER, Memory, run_in_progress
from memsync.core.snapshot import Snapshot, take
from memsync.errors import Blocked
from memsync.git import ownership
from memsync.git.trailers import memsync_keys
from memsync.git.versions import CommitInfo
from memsync.util.records import field, recordclass


@recordclass
class Unverified:
    commits: list[CommitInfo] = field(default_factory=list)
    forged: list[str] = field(default_factory=list)  # "<sha8> <key>"
    secrets: list[str] = field(default_factory=list)  # "<path>: <rule>"
    violations: list[str] = field(default_factory=list)
    folded_into: str | None = None  # the dead run they were folded into
    snapshot: Snapshot | None = None

    @property
    def shown(self) -> str:
        return ", ".join(c.short for c in self.commits[:5]) + (" ..." if len(self.commits) > 5 else "")


def vet(mem: Memory, *, refuse: bool = True, by: str = "push") -> Unverified:
    """Deal with unpushed commits memsync did not make (caller holds the lock); see the module.
    `refuse=False` (pull, which pushes nothing): only a dead run's leftovers are dealt with."""
    git = mem.git
    head = git.head_oid()
    found = Unverified()
    if head is None:
        return found
    tips = mem.hub_tips()
    hub = tips[0] if tips else None
    made = ownership.recorded(git)
    found.commits = ownership.foreign(git, [head], tips, made)
    found.forged = [f"{c.short} {key}" for c in found.commits for key in memsync_keys(c.message)]
    dead = _dead_run(mem)
    if dead is not None:
        base = _base(mem, head, tips, made) if found.commits else head
        if base is not None:
            _fold(mem, found, *dead, base, by)
            return found
    if not found.commits or not refuse:
        return found
    _scan(mem, found, hub, head)
    problems = ([f"forged trailer {f}" for f in found.forged] + [f"possible secret in {s}" for s in found.secrets]
                + [f"policy: {v}" for v in found.violations])
    if problems:
        raise Blocked(f"not pushed: unpushed versions memsync did not make ({found.shown}) hold "
                      + "; ".join(problems[:5]),
                      f"review them (`git log {hub[:8] + '..' if hub else ''}HEAD` in {mem.root}); to have "
                      f"memsync check and commit their content, `git reset --soft {hub[:8] if hub else 'HEAD'}`"
                      " and push again")
    return found


def _dead_run(mem: Memory) -> tuple[str, int | None] | None:
    """The id of a run that was using this memory and died or could not make its final commit
    (its marker is still there), with its exit code when the marker holds one."""
    try:
        import json  # not every command reads or writes JSON: imported where it does
        data = json.loads((mem.git.git_dir / RUN_MARKER).read_text(encoding="utf-8"))
        run_id = str(data["run_id"])
        code = data.get("exit_code")
        exit_code = code if isinstance(code, int) and not isinstance(code, bool) else None
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return None if run_in_progress(mem) is not None else (run_id, exit_code)


def _base(mem: Memory, head: str, tips: list[str], made: set[str]) -> str | None:
    """The newest first-parent ancestor of `head` that memsync made or a hub has."""
    for oid in ownership.first_parents(mem.git, head):
        if oid in made or any(mem.git.is_ancestor(oid, tip) for tip in tips):
            return oid
    return None


def _fold(mem: Memory, found: Unverified, run_id: str, exit_code: int | None, base: str, by: str) -> None:
    """What a dead run left (its commits memsync did not make, its uncommitted files) becomes one
    commit of that run, through the snapshot pipeline."""
    flags: list[str] = []
    if found.commits:
        flags = [f"agent-commits {len(found.commits)} folded {found.shown}"]
        flags += [f"forged-trailer {f}" for f in found.forged]
        ownership.rewind(mem.git, mem.branch, base)
    extra: tuple[tuple[str, str], ...] = (("Memsync-Recovered-By", by),)  # the command that found them
    if exit_code is not None:  # the run ended, but its final commit failed (a full disk)
        extra += (("Memsync-Exit-Code", str(exit_code)),)
    who = Attribution("run", f"Leftovers of run {run_id} (memsync stopped before its final commit)", run_id, extra)
    found.snapshot = take(mem, who, run_flags=lambda _tree, _step: flags)
    found.folded_into = run_id if found.snapshot.commit else None
    (mem.git.git_dir / RUN_MARKER).unlink(missing_ok=True)


def _scan(mem: Memory, found: Unverified, hub: str | None, head: str) -> None:
    rules = protect.parse_protect(mem.config.protect) if mem.config.protect else []
    if mem.config.secrets != "block" and not rules:
        return  # nothing could refuse them: their content is not read
    changes = ownership.changed_files(mem.git, hub, ownership.tree_of(mem.git, head))
    if mem.config.secrets == "block":
        from memsync.checks import secrets as secretscan

        for path, _old, new in changes:
            if new is not None:
                found.secrets += [f"{f.path}:{f.line} ({f.rule})" for f in secretscan.scan_bytes(path, new)]
    if rules:
        violations = protect.policy_violations([guard.FileChange(p, o, n) for p, o, n in changes], rules)
        found.violations = [f"{v.path}: {v.reason}" for v in violations]


__all__ = ["Unverified", "vet"]
