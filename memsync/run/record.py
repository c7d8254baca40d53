"""The run's record: what the agent did is what the history says, and policies hold against it.

Per writable memory, a run remembers where the branch was when the command started, the last
commit memsync itself made or took from the hub (`trusted`), and the bytes of `.vm0/storage.yaml`.
Before every checkpoint and the final commit (`check`):

* commits memsync did not make (an agent's `git commit`, `--amend`, rebase, reset, a checkout of
  another branch, a half-done merge) are **folded**: the branch, HEAD and index go back to
  `trusted`, the work tree is left as the agent left it, and the next snapshot commits that
  content as the run's, so the secret scan, protect policies and guard see the whole change since
  `trusted`. The agent's commits are never pushed (their messages could forge memsync's trailers,
  their intermediate trees could hold a secret the last one removed); they stay reachable locally
  under refs/memsync/agent/<run-id>/<n>. Each fold is recorded as `Memsync-Flag` trailers
  (`agent-commits`, `forged-trailer <sha8> <key>`, `branch-reset`, `head-moved`, ...).
* a changed or deleted storage.yaml is put back as it was when the run started; the agent's
  version is kept in $MEMSYNC_HOME/runs/<run-id>/<memory>/ and named in the report.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

from memsync.checks import guard
from memsync.core import config as cfgmod
from memsync.core.memory import Memory
from memsync.core.snapshot import Snapshot
from memsync.git import ownership
from memsync.git.hub import memsync_home
from memsync.git.trailers import memsync_keys, quote_path
from memsync.sync.exchange import Exchange
from memsync.util.fs import atomic_write
from memsync.util.records import field, recordclass
from memsync.util.wording import count

Say = Callable[[str], None]
POLICY_FILE = f"{cfgmod.CONFIG_DIR}/{cfgmod.CONFIG_FILE}"


@recordclass
class RunTrust:
    mem: Memory
    run_id: str
    start: str | None
    trusted: str | None
    start_stash: str | None
    policy: bytes | None
    hub_tips: set[str] = field(default_factory=set)
    pending: list[str] = field(default_factory=list)  # flags for the next commit
    recorded: list[str] = field(default_factory=list)  # run flags already in a commit
    folded: int = 0
    kept: list[str] = field(default_factory=list)  # refs keeping the agent's own commits
    policy_kept: list[str] = field(default_factory=list)
    step_flags: set[str] = field(default_factory=set)  # guard flags the run's commits carry
    touched: set[str] = field(default_factory=set)  # paths the run's own commits changed

    @classmethod
    def begin(cls, mem: Memory, run_id: str) -> RunTrust:
        """Record where the memory stands as the command starts (caller holds the lock)."""
        head = mem.git.ref_oid(mem.local_ref)
        stash = mem.git.ref_oid("refs/stash")
        return cls(mem, run_id, head, head, stash, _read_policy(mem.root))

    # -- before a commit ----------------------------------------------------------------------
    def check(self, say: Say) -> None:
        """Put back what the agent did to git and to the policy file (caller holds the lock)."""
        self.check_policy(say)
        git, mem = self.mem.git, self.mem
        state = ownership.head_state(git, mem.branch)
        if state.stash != self.start_stash and state.stash is not None:
            self._flag(f"stash-left refs/stash {state.stash[:8]}", say,
                       f"the command left stashed changes in {mem.root} (`git stash list`): not committed")
            self.start_stash = state.stash
        if (state.symbolic == mem.local_ref and state.branch_tip == self.trusted and state.operation is None
                and not state.conflicts):
            return
        tips = [t for t in (state.oid, state.branch_tip) if t and t != self.trusted]
        hide = [t for t in (self.trusted, *self.hub_tips) if t]
        found = ownership.foreign(git, tips, hide, git.made) if tips else []
        if found:
            self.folded += len(found)
            shown = " ".join(c.short for c in found[:5]) + (" ..." if len(found) > 5 else "")
            self._flag(f"agent-commits {len(found)} folded {shown}", say,
                       f"{count(len(found), 'commit')} memsync did not make ({shown}) were folded into this run's "
                       "commit and checked; they are not pushed")
            for c in found:
                for key in memsync_keys(c.message):
                    self._flag(f"forged-trailer {c.short} {key}", say,
                               f"commit {c.short} carries a {key} trailer memsync did not write")
            for tip in dict.fromkeys(tips):
                if tip in {c.oid for c in found}:
                    self.kept.append(ownership.keep(git, f"{self.run_id}/{mem.name}/{len(self.kept) + 1}", tip))
        if state.symbolic != mem.local_ref:
            where = state.symbolic or "detached"
            self._flag(f"head-moved {quote_path(where)}", say,
                       f"HEAD was on {where}; put back on {mem.branch} (the work tree is kept as it is)")
        if state.operation is not None or state.conflicts:
            what = state.operation or "conflicted index"
            self._flag(f"git-state {quote_path(what)}", say, f"a git {what} was left in progress; abandoned "
                       "(the work tree is kept as it is)")
        branch = state.branch_tip
        if (branch is not None and self.trusted is not None and branch != self.trusted
                and git.is_ancestor(branch, self.trusted)):
            self._flag(f"branch-reset {branch[:8]}", say,
                       f"the branch was moved back to {branch[:8]}; what it dropped is recorded as this "
                       "run's change")
        ownership.rewind(git, mem.branch, self.trusted)

    def run_flags(self, final: bool) -> Callable[[str, list[guard.Flag]], list[str]]:
        """The flags a commit about to be made must carry: pending ones, and on the final commit
        what the whole run did to files that predate it (`shrink-run`, `rewrite-run`), which no
        single step showed."""

        def flags(tree: str, step: list[guard.Flag]) -> list[str]:
            found = list(self.pending)
            # With no earlier commit in the run, this one is the whole run: its own flags say it all.
            if final and self.start is not None and self.trusted != self.start:
                # Only paths this run's own commits changed: a file another run shrank, merged in
                # at a checkpoint, is that run's flag, not this one's.
                git = self.mem.git
                head = git.head_oid()
                own = self.touched | (ownership.changed_paths(git, head, tree) if head else set())
                changes = [guard.FileChange(p, old, new) for p, old, new in
                           ownership.changed_files(git, self.start, tree, only=own)]
                shown = self.step_flags | {f.trailer() for f in step}
                for flag in guard.integrity_flags(changes, "run"):
                    if flag.kind != "delete" and flag.trailer() not in shown:  # a deletion is one step
                        found.append(f"{flag.kind}-run {flag.trailer().split(' ', 1)[1]}")
            return found

        return flags

    # -- after a commit or an exchange ----------------------------------------------------------
    def committed(self, snap: Snapshot) -> None:
        """A snapshot was taken: its commit carries the pending flags it was given."""
        if snap.commit is None:
            return
        self.recorded += [f for f in snap.run_flags if f not in self.recorded]
        self.pending = [f for f in self.pending if f not in snap.run_flags]
        self.step_flags.update(f.trailer() for f in snap.flags)
        self.touched.update(c.path for c in snap.changes)
        self.advance()

    def synced(self, exchange: Exchange) -> None:
        if exchange.remote_head:
            self.hub_tips.add(exchange.remote_head)
        self.advance()

    def vetted(self) -> list[str]:
        """Commits whose history is checked: the start, the trusted tip, the hub's tips."""
        return [t for t in (self.start, self.trusted, *self.hub_tips) if t]

    def advance(self) -> None:
        """Trust the branch tip if everything on it since `trusted` was made by memsync or came
        from the hub; otherwise the next check folds it."""
        git, mem = self.mem.git, self.mem
        state = ownership.head_state(git, mem.branch)
        tip = state.branch_tip
        if tip is None or tip == self.trusted or state.symbolic != mem.local_ref:
            return
        hide = [t for t in (self.trusted, *self.hub_tips) if t]
        if not ownership.foreign(git, [tip], hide, git.made, limit=1):
            self.trusted = tip

    # -- the policy file ----------------------------------------------------------------------------
    def check_policy(self, say: Say) -> None:
        """Put storage.yaml back as it was when the run started (also for read-only memories)."""
        if self.policy is None:
            return
        path = self.mem.root / POLICY_FILE
        now = _read_policy(self.mem.root)
        if now == self.policy and not (self.mem.root / cfgmod.CONFIG_DIR).is_symlink():
            return
        kept = self._keep_policy(path, now)
        _restore_policy(self.mem.root, self.policy)
        what = "deleted" if now is None else "changed"
        self._flag(f"policy-file-restored {POLICY_FILE}", say,
                   f"the command {what} {POLICY_FILE}; the version from the start of the run was put back "
                   "and stays in force" + (f"; its version is kept in {kept}" if kept else ""))

    def _keep_policy(self, path: Path, data: bytes | None) -> str | None:
        if data is None:
            return None
        where = memsync_home() / "runs" / self.run_id / self.mem.name
        where.mkdir(parents=True, exist_ok=True)
        target = where / f"storage.yaml.{len(self.policy_kept) + 1}"
        atomic_write(target, data)
        self.policy_kept.append(str(target))
        return str(target)

    def _flag(self, flag: str, say: Say, message: str) -> None:
        say(f"warning: {self.mem.name}: {message}")
        if flag not in self.pending:
            self.pending.append(flag)


def _read_policy(root: Path) -> bytes | None:
    """storage.yaml's bytes; a symlink is read as its link text, never followed."""
    path = root / POLICY_FILE
    try:
        if path.is_symlink() or (root / cfgmod.CONFIG_DIR).is_symlink():
            return b"symlink -> " + os.fsencode(os.readlink(path if path.is_symlink() else root / cfgmod.CONFIG_DIR))
        return path.read_bytes()
    except OSError:
        return None


def _restore_policy(root: Path, data: bytes) -> None:
    folder = root / cfgmod.CONFIG_DIR
    if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
        folder.unlink()
    folder.mkdir(exist_ok=True)
    path = folder / cfgmod.CONFIG_FILE
    if path.is_symlink():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)
    atomic_write(path, data, mode=0o644)


__all__ = ["RunTrust"]
