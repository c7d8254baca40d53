"""One agent session on one memory: pull at start, a version per write, push at checkpoints and at
the end. The memory is the run's: every version carries `Memsync-Actor: run` and the session's run
id, exactly as `memsync run` would record it.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Collection, Iterator
from pathlib import Path

from memsync.core.attribution import Attribution
from memsync.core.memory import Memory
from memsync.core.snapshot import Snapshot, describe, take
from memsync.errors import MemsyncError, RemoteError, UsageError
from memsync.integrations import private
from memsync.integrations.options import DEFAULT_CHECKPOINT_SECONDS, DEFAULT_CHECKPOINT_WRITES
from memsync.util.names import check_name, check_run_id, new_run_id, where_kept
from memsync.util.records import field, recordclass
from memsync.util.threads import helper_body


@recordclass
class SessionReport:
    """What `close()` did: the memory's version, whether the hub has it, what is left unpushed."""

    name: str
    run_id: str
    version: str | None
    writes: int
    pushed: bool
    unpushed: list[str] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)
    error: str | None = None
    read_only: bool = False
    notices: list[str] = field(default_factory=list)  # warnings met on the way (skipped files, conflicts)
    proposal: str | None = None  # the proposal the session's writes wait in (propose=True)


@recordclass(frozen=True)
class SessionOptions:
    """How a session reaches its memory and saves what the agent writes (the memory tool and the
    MCP server take the same)."""

    remote: str | None = None
    run_id: str | None = None  # default: MEMSYNC_RUN_ID, else a new id
    read_only: bool = False
    offline: bool = False
    create: bool = False  # start a memory the hub does not have (else it is refused)
    propose: bool = False  # the session's writes become the proposal `proposals/<name>/<run-id>`
    checkpoint_writes: int = DEFAULT_CHECKPOINT_WRITES
    checkpoint_seconds: float = DEFAULT_CHECKPOINT_SECONDS


class MemorySession:
    """A memory opened for an agent: `open()` clones or pulls it, `record()` commits one write,
    `checkpoint()` pushes, `close()` commits what is left and pushes.

    `path` defaults to ./NAME. A memory the hub does not have is refused (MemoryNotFound, naming
    those it has) unless `create` is true: then it is started empty and published by the first push.
    Checkpoints: after every `checkpoint_writes` writes, and `checkpoint_seconds` after the first
    unpushed write (a background timer), so a killed process loses at most that much."""

    def __init__(self, name: str, path: Path | str | None = None, options: SessionOptions | None = None, *,
                 tool: str = "memory") -> None:
        options = options or SessionOptions()
        self.name = check_name(name)
        self.path = Path(path if path is not None else name).expanduser().resolve()
        self.remote = options.remote
        self.run_id = check_run_id(options.run_id or os.environ.get("MEMSYNC_RUN_ID") or new_run_id())
        self.read_only = options.read_only
        self.offline = options.offline
        self.create = options.create
        self.propose = options.propose and not options.read_only
        self.checkpoint_writes = options.checkpoint_writes
        self.checkpoint_seconds = options.checkpoint_seconds
        self.tool = tool
        self.notices: list[str] = []
        self.writes = 0
        self._unpushed_writes = 0
        self._first_unpushed: float | None = None
        self._mem: Memory | None = None
        self._memory_itself: Memory | None = None  # propose: the memory, while _mem is its proposal's view
        self._base: str | None = None
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._timer: threading.Thread | None = None
        self.root_id: tuple[int, int] | None = None

    # -- lifecycle --------------------------------------------------------------------------------
    def open(self) -> Memory:
        if self._mem is not None:
            return self._mem
        from memsync.run import mounts as runner

        mount = runner.Mount(self.name, self.path, self.read_only)
        new = not os.path.lexists(self.path)
        if new:  # the folders a session makes are the operator's alone, whatever the umask
            private.make_dirs(self.path.parent)
        mems = runner.prepare([mount], self.path.parent, self.remote, self.offline, self.notices.append,
                              run_id=self.run_id, create=self.create)
        if new:
            os.chmod(self.path, private.DIR_MODE)  # what is checked out inside follows the umask, as git's does
        self._mem = mems[0]
        if self.propose:
            from memsync.sync import proposing

            self._memory_itself = self._mem
            self._mem = proposing.begin(self._mem, self.run_id, offline=self.offline)
        st = os.stat(self._mem.root)
        self.root_id = (st.st_dev, st.st_ino)  # the folder the tools work in: a swap of it is refused
        self._base = self._mem.git.head_oid()
        if not self.read_only:
            from memsync.sync.exchange import unpushed

            if unpushed(self._mem):  # left by a session killed before its push: the next checkpoint sends it
                self._unpushed_writes = 1
                self._first_unpushed = time.monotonic()
        if not self.read_only and self.checkpoint_seconds > 0 and not self.offline:
            self._timer = threading.Thread(target=helper_body(self._tick), name=f"memsync-checkpoint-{self.name}",
                                           daemon=True)
            self._timer.start()
        return self._mem

    @property
    def memory(self) -> Memory:
        if self._mem is None:
            raise UsageError(f"memory {self.name!r} is not open", "call open() (or use `with`) first")
        return self._mem

    @property
    def root(self) -> Path:
        return self.memory.root

    def close(self) -> SessionReport:
        """Commit anything written beside the tool, push (unless read-only or offline)."""
        self._stop.set()
        if self._timer is not None:
            self._timer.join(timeout=60)
        mem = self.memory
        report = SessionReport(self.name, self.run_id, mem.git.head_oid(), self.writes, pushed=False,
                               read_only=self.read_only, notices=self.notices)
        if self.read_only:
            return report
        with self.locked():
            take(mem, self._who(f"Session {self.run_id} of {self.tool}"), run_base=self._base)
            empty_proposal = self._memory_itself is not None and mem.git.head_oid() == self._base
            if not self.offline and not empty_proposal:  # a proposal of nothing is never published
                error = self._push()
                report.error = error
                report.pushed = error is None
            report.version = mem.git.head_oid()
            from memsync.sync.exchange import unpushed

            with contextlib.suppress(MemsyncError):
                report.unpushed = unpushed(mem) if not report.pushed else []
        if self._memory_itself is not None:
            self._end_proposal(report)
        return report

    def _end_proposal(self, report: SessionReport) -> None:
        """The directory back on the memory's version; the writes stay on the proposal's branch."""
        from memsync.sync import proposing

        assert self._memory_itself is not None
        report.proposal = self.run_id if report.version != self._base else None
        proposing.finish(self.memory, self._memory_itself)
        if report.proposal is None:  # nothing written: no proposal, here or on the hub
            self._memory_itself.git.delete_ref(self.memory.local_ref)
            report.pushed = not self.offline
        self._mem, self._memory_itself = self._memory_itself, None

    # -- writes -----------------------------------------------------------------------------------
    @property
    def is_open(self) -> bool:
        return self._mem is not None

    @contextlib.contextmanager
    def serialised(self) -> Iterator[None]:
        """This session's lock only (for core functions that take the memory's lock themselves)."""
        with self._lock:
            yield

    @contextlib.contextmanager
    def locked(self) -> Iterator[Memory]:
        """This session's lock and the memory's own (held by every memsync process)."""
        with self._lock, self.memory.locked():
            yield self.memory

    def record(self, paths: Collection[str], subject: str, command: str, *,
               check_integrity: bool = True) -> Snapshot:
        """Commit exactly `paths` as one version of the run; caller holds `locked()`."""
        snap = take(self.memory, self._who(subject, ("Memsync-Command", command)), only=set(paths),
                    run_base=self._base, check_integrity=check_integrity)
        self.notices.extend(describe(snap))
        if snap.commit is not None:
            self.writes += 1
            self._unpushed_writes += 1
            if self._first_unpushed is None:
                self._first_unpushed = time.monotonic()
        return snap

    def created_here(self, path: str) -> bool:
        """The file did not exist when the session started (the guard never flags those)."""
        return self._base is None or not self.memory.git.path_in(self._base, path)

    def maybe_checkpoint(self) -> str | None:
        """Push if enough writes piled up (caller holds `locked()`); a warning line if the push
        failed (the versions stay local and go at the next checkpoint)."""
        if self.offline or not self._unpushed_writes:
            return None
        if self.checkpoint_writes > 0 and self._unpushed_writes >= self.checkpoint_writes:
            return self._push()
        return None

    def checkpoint(self) -> str | None:
        with self.locked():
            return self._push()

    def _push(self) -> str | None:
        from memsync.sync.exchange import converge

        mem = self.memory
        who = self._who(f"Checkpoint of session {self.run_id}")
        try:
            exchange = converge(mem, who, lambda: self._resnap(who))
        except RemoteError as exc:
            return f"not pushed yet (kept locally, retried at the next checkpoint): {exc.message}"
        for c in exchange.conflicts:
            self.notices.append(f"conflict in {c.path}: kept this session's version, the other {where_kept(c.copy)}")
        self._unpushed_writes = 0
        self._first_unpushed = None
        return None

    def _resnap(self, who: Attribution) -> None:
        take(self.memory, who, run_base=self._base)

    def _who(self, subject: str, *extra: tuple[str, str]) -> Attribution:
        return Attribution("run", subject, self.run_id, extra or (("Memsync-Command", self.tool),))

    def _tick(self) -> None:
        while not self._stop.wait(min(1.0, self.checkpoint_seconds)):
            first = self._first_unpushed
            if first is None or time.monotonic() - first < self.checkpoint_seconds:
                continue
            with contextlib.suppress(MemsyncError, OSError):
                warning = self.checkpoint()
                if warning is not None:
                    self._first_unpushed = time.monotonic()  # retry after another interval


__all__ = ["MemorySession", "SessionReport"]
