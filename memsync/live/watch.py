"""`memsync watch`: keep a memory directory in live two-way sync until stopped.

One implementation of "commit settled changes": the ChangeMonitor (file events minus .git, .vm0
and ignored paths) and the Checkpointer (quiet period + max interval) that `run` uses for its
checkpoints, `snapshot.take` to commit and `exchange.converge` to merge (keep-both) and push.
The Checkpointer's `extra` hook polls the hub: one ref advertisement, compared with the tracking
ref; a fetch only when they differ. Everything that touches the repository runs on the
Checkpointer's thread, under the memory's lock, held only for the operation and waited for only
briefly, so `memsync run` and `memsync push` interleave with watch. Failures move watch into a
state (offline, busy, rejected, failing) that is reported once and retried with backoff.
Nothing here prints: state changes and messages go to the `report` callback.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from types import FrameType
from typing import Literal

from memsync.core.attribution import Attribution
from memsync.core.memory import Memory, refuse_during_run, run_in_progress
from memsync.core.snapshot import Snapshot, take, warn_each
from memsync.errors import LockBusy, MemsyncError, PushRejected, RemoteError, UnsavedWork, UsageError
from memsync.live.changes import ChangeMonitor
from memsync.live.checkpoint import Checkpointer
from memsync.sync.exchange import Exchange, converge, unpushed
from memsync.sync.hubs import ready_to_exchange
from memsync.util.names import where_kept
from memsync.util.records import field, recordclass, replace
from memsync.util.wording import count

DEFAULT_DEBOUNCE = 2.0
DEFAULT_POLL = 30.0
SETTLE = 0.5  # a file written less than this ago is still being written: it waits
LOCK_WAIT = 1.0  # watch never queues long behind a `memsync run`; it retries later
FINAL_LOCK_WAIT = 10.0
FIRST_RETRY = 0.5
ONCE_SETTLE_ROUNDS = 4

State = Literal["starting", "watching", "offline", "busy", "rejected", "failing", "stopping", "stopped"]
Activity = Literal["", "committing", "syncing"]
Report = Callable[["WatchEvent"], None]

_BUSY = "another memsync process (a run or a push) holds the memory's lock; waiting for it"

COMMIT = Attribution("watch", "Update memory (memsync watch)")
MERGE = Attribution("watch", "Merge the remote memory (memsync watch)")


@recordclass
class WatchStatus:
    state: State = "starting"
    detail: str = ""
    activity: Activity = ""  # what watch is doing right now, if anything
    version: str | None = None
    last_sync: float | None = None  # wall-clock time of the last moment the hub and we agreed
    pending: int = 0  # paths changed on disk since the last commit
    commits: int = 0
    merges: int = 0
    conflicts: int = 0
    polling_files: bool = False  # no file events to be had: the tree is polled


@recordclass(frozen=True)
class WatchEvent:
    status: WatchStatus
    message: str | None = None  # a line worth a log entry; None: only the status changed
    level: Literal["info", "warning"] = "info"


@recordclass
class WatchSummary:
    version: str | None
    commits: int
    merges: int
    conflicts: int
    unpushed: list[str] = field(default_factory=list)
    abandoned: bool = False
    blocked: list[str] = field(default_factory=list)  # kept out by `secrets: block` (shown paths)


def check_timings(debounce: float, poll: float) -> None:
    if not 0 <= debounce <= 86_400:  # also refuses nan
        raise UsageError("--debounce must be 0 to 86400 seconds", "e.g. --debounce 2")
    if not 0.2 <= poll <= 86_400:
        raise UsageError("--poll must be 0.2 to 86400 seconds", "e.g. --poll 30")


class Watcher:
    """Live two-way sync of one memory; `run(stop)` blocks until `stop` is set."""

    def __init__(self, mem: Memory, *, debounce: float, poll: float, report: Report,
                 heartbeat: float | None = None) -> None:
        check_timings(debounce, poll)
        self.mem = mem
        self.poll = poll
        self.settle = min(SETTLE, debounce)
        self.report = report
        self.heartbeat = heartbeat
        self.status = WatchStatus(version=mem.git.head_oid())
        self.monitor = ChangeMonitor(mem.root, lambda m: self._say(m, "warning"))
        self.checkpointer = Checkpointer([self.monitor], self._on_quiet, quiet=debounce,
                                         max_interval=max(30.0, 10 * debounce),
                                         on_error=self._on_unexpected, extra=self._on_tick)
        self._next_poll = 0.0  # the first tick runs a full cycle: changes made while not watching
        self._full_cycle = True
        self._retry_at = 0.0
        self._failures = 0
        self._warned: tuple[str, str] | None = None  # the last failure reported (see _fail)
        self._offline = False
        self._report_lock = threading.Lock()
        self._ignored_shown: list[str] = []  # ignored files are reported when that list changes

    # -- the loop -------------------------------------------------------------------------------
    def run(self, stop: threading.Event) -> WatchSummary:
        refuse_during_run(self.mem, "watch")  # a run owning the memory now: refused, not waited for
        if not self._prepare(stop):
            return self._summary(False)
        self.monitor.start()
        self.status.polling_files = self.monitor.polling
        self._set("watching", message=f"watching {self.mem.root} (memory {self.mem.name!r}, "
                                      f"hub {self.mem.hub.display})")
        self.checkpointer.start()
        abandoned = False
        try:
            while not stop.wait(self.heartbeat or 1.0):
                if self.heartbeat:
                    self._emit(None)
            self._set("stopping", message="stopping: finishing the operation in flight")
            self.checkpointer.stop()
            self.monitor.stop()
            self._final()
        except KeyboardInterrupt:
            abandoned = True
            self._say("stopped again: abandoned the operation in flight; "
                      "the next memsync command finishes it", "warning")
        return self._summary(abandoned)

    def _prepare(self, stop: threading.Event) -> bool:
        """Check the repository and create the embedded hub if needed; False if stopped first."""
        while True:
            try:
                with self.mem.locked(LOCK_WAIT):
                    ready_to_exchange(self.mem)
                return True
            except LockBusy:
                self._fail("busy", _BUSY)
            if stop.wait(max(0.0, self._retry_at - time.monotonic())):
                return False

    def _on_quiet(self, monitor: ChangeMonitor, overdue: bool = False) -> bool:
        """Checkpointer action: files changed and then stayed quiet for --debounce seconds (or
        keep changing: `overdue` takes them as they are)."""
        if time.monotonic() < self._retry_at:
            return True  # still backing off: keep the changes pending
        settle = 0.0 if overdue else self.settle
        snap = self._reporting_failures(lambda: self._commit(push=not self._offline, settle=settle))
        return snap is None or bool(snap.pending)

    def _on_tick(self) -> None:
        """Checkpointer extra hook: every tick; polls the hub every --poll seconds."""
        self.status.pending = self.monitor.pending()
        now = time.monotonic()
        if now < max(self._next_poll, self._retry_at):
            return
        self._next_poll = now + self.poll
        self._reporting_failures(self._poll)

    def _on_unexpected(self, monitor: ChangeMonitor, exc: Exception) -> None:
        self._fail("failing", f"unexpected {type(exc).__name__}: {exc}")

    # -- operations (Checkpointer thread) ----------------------------------------------------------
    def _commit(self, push: bool, settle: float | None = None) -> Snapshot:
        with self._busy("committing"):
            snap = self._snapshot(settle)
            if push and (snap.commit is not None or self._ahead()):
                result = self._exchange()
                self._announce(snap, result)
                self._recovered()
            elif snap.commit is not None:
                self._say(f"committed {snap.commit[:8]} locally ({count(len(snap.changes), 'file')}); "
                          "it is pushed when the hub is back")
        return snap

    def _poll(self) -> None:
        """Cheap when nothing changed: one ref advertisement and two ref reads."""
        remote = self._remote_tip()
        tracking = self.mem.git.ref_oid(self.mem.tracking_ref)
        head = self.mem.git.head_oid()
        if not self._full_cycle and remote == tracking and head == tracking:
            self.status.last_sync = time.time()
            if self.status.state != "busy":  # busy ends when the blocked commit goes through
                self._recovered()
            return
        with self._busy("syncing"):
            snap = self._snapshot()
            self._announce(snap, self._exchange())
        self._full_cycle = False
        self._recovered()

    @contextmanager
    def _busy(self, activity: Activity) -> Iterator[None]:
        """The memory's lock (briefly waited for) and the activity shown meanwhile."""
        with self.mem.locked(LOCK_WAIT):
            self.mem.git.check_state(self.mem.branch)
            if self.status.state == "busy":
                self.status.state = "offline" if self._offline else "watching"
            self.status.activity = activity
            self._emit(None)
            try:
                yield
            finally:
                self.status.activity = ""
        self._emit(None)

    def _announce(self, snap: Snapshot, result: Exchange) -> None:
        if snap.commit is not None:
            where = "pushed" if result.pushed else "committed (the hub already had it)"
            self._say(f"saved {snap.commit[:8]} ({count(len(snap.changes), 'file')}), {where}")
        elif result.pushed and result.remote_head:
            self._say(f"pushed {result.remote_head[:8]} to {self.mem.hub.display}")

    def _remote_tip(self) -> str | None:
        ref = f"refs/heads/{self.mem.branch}"
        return self.mem.hub.tips(self.mem.git, [ref]).get(ref)

    def _snapshot(self, settle: float | None = None) -> Snapshot:
        run_id = run_in_progress(self.mem)
        if run_id is not None:
            raise LockBusy(f"run {run_id} is using this memory; its changes are committed by the run, "
                           "watch resumes when it ends")
        snap = take(self.mem, COMMIT, settle=self.settle if settle is None else settle)
        if snap.ignored == self._ignored_shown:
            snap.ignored = []  # said already; `memsync status` keeps listing them
        else:
            self._ignored_shown = list(snap.ignored)
        warn_each(snap, self.mem.name, lambda m: self._say(m, "warning"))
        if snap.commit is not None:
            self.monitor.forget_expected()
            self.status.commits += 1
            self.status.version = snap.commit
        return snap

    def _exchange(self) -> Exchange:
        """Fetch, merge (keep both), push; files merged in are announced to the monitor as ours."""
        git = self.mem.git
        before = git.head_oid()
        result = converge(self.mem, MERGE, self._resnapshot)
        after = git.head_oid()
        if after is not None and after != before:
            updated = git.tree_changes(before, after)
            self.monitor.expect(updated)
            self.status.merges += len(result.merges)
            self._say(f"updated from the hub: {count(len(updated), 'file')} changed, now at {after[:8]}")
        for c in result.conflicts:
            self.status.conflicts += 1
            self._say(f"conflict in {c.path}: both versions kept, this one at {c.path}, "
                      f"the other {where_kept(c.copy)}; fold it in when convenient", "warning")
        for h in result.held_back:
            self._say(f"not checked out: {h.path} ({h.size} bytes, larger than max_file_size)", "warning")
        self.status.version = after
        self.status.last_sync = time.time()
        self._offline = False
        return result

    def _resnapshot(self) -> None:
        self._snapshot()

    def _ahead(self) -> bool:
        head = self.mem.git.head_oid()
        return head is not None and head != self.mem.git.ref_oid(self.mem.tracking_ref)

    # -- failures: one report per state, retries with backoff ----------------------------------------
    def _reporting_failures(self, op: Callable[[], Snapshot | None]) -> Snapshot | None:
        try:
            return op()
        except LockBusy as exc:
            self._fail("busy", exc.message if exc.message.startswith("run ") else _BUSY)
        except PushRejected as exc:
            self._fail("rejected", f"the hub refused the push: {exc.message}; versions stay local, "
                                   "retrying")
        except RemoteError as exc:
            self._offline = True
            self._fail("offline", f"{exc.message}; committing locally, retrying")
        except MemsyncError as exc:
            self._fail("failing", exc.message + (f" ({exc.hint})" if exc.hint else ""))
        except Exception as exc:  # a full disk surfaces as libgit2's or the OS's error: retried, not a bug
            from memsync.git.diskfull import explain

            full = explain(exc, [self.mem.git.git_dir])
            if full is None:
                raise
            self._fail("failing", f"{full.message} ({full.hint})")
        return None

    def _fail(self, state: State, detail: str) -> None:
        self._failures += 1
        delay = min(max(self.poll, 2.0), FIRST_RETRY * 2 ** (self._failures - 1))
        self._retry_at = time.monotonic() + delay
        # once per state, not once per retry; and not again for the same cause (a run holding the
        # memory) when an attempt in between took the lock without getting further
        if self.status.state != state and self._warned != (state, detail):
            self._set(state, detail, f"{state}: {detail}", "warning")
            self._warned = (state, detail)
        else:
            self.status.state = state
            self.status.detail = detail

    def _recovered(self) -> None:
        self._retry_at = 0.0
        self._warned = None
        if self._failures:
            self._failures = 0
            version = self.status.version[:8] if self.status.version else "empty"
            self._set("watching", "", f"back in sync at {version}")
        elif self.status.state != "watching":
            self._set("watching")

    # -- stopping -----------------------------------------------------------------------------------
    def _final(self) -> None:
        """Commit the settled changes; push them unless the hub is known to be down."""
        try:
            with self.mem.locked(FINAL_LOCK_WAIT):
                snap = self._snapshot()
                if not self._offline and self._ahead():
                    self._exchange()
            if snap.pending:
                self._say("still being written, left uncommitted: " + ", ".join(snap.pending[:5]), "warning")
        except MemsyncError as exc:
            self._say(f"could not finish the last sync: {exc.message}", "warning")

    def _summary(self, abandoned: bool) -> WatchSummary:
        left: list[str] = []
        if not abandoned:  # else the sync thread may still be using the repository
            with suppress(MemsyncError):
                left = unpushed(self.mem)
                self.status.version = self.mem.git.head_oid()  # a run may have committed meanwhile
        self._set("stopped")
        s = self.status
        return WatchSummary(s.version, s.commits, s.merges, s.conflicts, left, abandoned)

    # -- reporting ------------------------------------------------------------------------------------
    def _set(self, state: State, detail: str = "", message: str | None = None,
             level: Literal["info", "warning"] = "info") -> None:
        self.status.state = state
        self.status.detail = detail
        self._emit(message, level)

    def _say(self, message: str, level: Literal["info", "warning"] = "info") -> None:
        self._emit(message, level)

    def _emit(self, message: str | None, level: Literal["info", "warning"] = "info") -> None:
        with self._report_lock:  # the heartbeat (main thread) and the sync thread both report
            self.status.pending = self.monitor.pending()
            self.report(WatchEvent(replace(self.status), message, level))


def once(mem: Memory, report: Report) -> WatchSummary:
    """One full cycle for cron: commit settled changes, fetch and merge, push."""
    status = WatchStatus("watching", activity="syncing", version=mem.git.head_oid())
    with mem.locked():
        refuse_during_run(mem, "watch")
        ready_to_exchange(mem)
        commits = 0
        blocked: list[str] = []
        for round_no in range(ONCE_SETTLE_ROUNDS + 1):  # files written a moment ago get a chance
            snap = take(mem, COMMIT, settle=SETTLE)
            warn_each(snap, mem.name, lambda m: report(WatchEvent(status, m, "warning")))
            commits += snap.commit is not None
            blocked += [path for path in snap.blocked if path not in blocked]
            if not snap.pending or round_no == ONCE_SETTLE_ROUNDS:
                break
            time.sleep(SETTLE)
        if snap.pending:
            report(WatchEvent(status, "still being written, left for the next cycle: "
                              + ", ".join(snap.pending[:5]), "warning"))
        try:
            result = converge(mem, MERGE, lambda: _resnap(mem))
        except (RemoteError, PushRejected) as exc:
            left = unpushed(mem)
            if left:
                raise UnsavedWork(f"committed locally, not pushed: {exc.message}", left) from exc
            raise
        head = mem.git.head_oid()
    for c in result.conflicts:
        report(WatchEvent(status, f"conflict in {c.path}: both versions kept, the other {where_kept(c.copy)}",
                          "warning"))
    return WatchSummary(head, commits, len(result.merges), len(result.conflicts), blocked=blocked)


def _resnap(mem: Memory) -> None:
    take(mem, COMMIT)


@contextmanager
def stop_on_signals(stop: threading.Event) -> Iterator[None]:
    """The first SIGINT/SIGTERM/SIGHUP asks to stop cleanly; a second one abandons the operation
    in flight (KeyboardInterrupt in the main thread)."""

    def handle(signum: int, frame: FrameType | None) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()

    saved = {sig: signal.signal(sig, handle) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, old in saved.items():
            signal.signal(sig, old)


__all__ = ["DEFAULT_DEBOUNCE", "DEFAULT_POLL", "WatchEvent", "WatchStatus", "WatchSummary", "Watcher",
           "check_timings", "once", "stop_on_signals"]
