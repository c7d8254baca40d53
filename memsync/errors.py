"""The one exception tree of memsync.

Every error a user can cause or meet carries a one-line message, an optional hint and the exit
code the CLI turns it into. Exit codes are decided here and nowhere else (README lists them).
"""

from __future__ import annotations

from pathlib import Path

__all__ = [
    "EXIT_BLOCKED",
    "EXIT_BUSY",
    "EXIT_CONFIG",
    "EXIT_FAILURE",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_REJECTED",
    "EXIT_REMOTE",
    "EXIT_REPO",
    "EXIT_UNSAVED",
    "EXIT_USAGE",
    "AgentLeftRunning",
    "AuthFailed",
    "Blocked",
    "ConfigError",
    "DiskFull",
    "HostKeyError",
    "Interrupted",
    "InvalidName",
    "LockBusy",
    "MemoryNotFound",
    "MemsyncError",
    "NotAMemory",
    "PushRejected",
    "RemoteError",
    "RemoteUnreachable",
    "RepoError",
    "RunInProgress",
    "UnsavedWork",
    "UsageError",
]

EXIT_OK = 0
EXIT_FAILURE = 1  # unexpected failure (a bug): please report it
EXIT_USAGE = 2  # bad flags, arguments or names
EXIT_CONFIG = 3  # not a memory, malformed or unreadable .vm0/storage.yaml
EXIT_REMOTE = 4  # remote unreachable, not found, authentication or host key refused
EXIT_REJECTED = 5  # the remote refused the push (hook, protected branch)
EXIT_BUSY = 6  # another memsync process holds the memory's lock
EXIT_REPO = 7  # the local repository or file system refuses (unrelated history, disk full...)
EXIT_UNSAVED = 8  # the run's command succeeded, but its memory is only committed locally
EXIT_BLOCKED = 9  # a policy kept files out of the commit (secrets: block, protect)
EXIT_INTERRUPTED = 130


class MemsyncError(Exception):
    """Root of every error memsync reports to a user."""

    exit_code: int = EXIT_FAILURE

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


class UsageError(MemsyncError):
    exit_code = EXIT_USAGE


class InvalidName(UsageError):
    def __init__(self, name: str, problem: str, suggestion: str | None,
                 how: str = "a valid name would be {}") -> None:
        super().__init__(f"invalid memory name {name!r}: {problem}", how.format(suggestion) if suggestion else None)
        self.name = name
        self.problem = problem
        self.suggestion = suggestion


class ConfigError(MemsyncError):
    exit_code = EXIT_CONFIG


class NotAMemory(ConfigError):
    def __init__(self, path: str) -> None:
        super().__init__(
            f"{path} is not a memory directory (no .vm0/storage.yaml here or above)",
            "run `memsync init` here, or `memsync clone NAME` to fetch one",
        )
        self.path = path


class RemoteError(MemsyncError):
    exit_code = EXIT_REMOTE


class RemoteUnreachable(RemoteError):
    pass


class AuthFailed(RemoteError):
    pass


class HostKeyError(RemoteError):
    pass


class MemoryNotFound(RemoteError):
    def __init__(self, name: str, remote: str, available: list[str]) -> None:
        listing = ", ".join(available) if available else "none"
        super().__init__(
            f"no memory {name!r} on {remote}",
            f"memories there: {listing}" if available else "the remote holds no memories yet;"
            " create one with `memsync init` and `memsync push`",
        )
        self.name = name
        self.available = available


class PushRejected(MemsyncError):
    exit_code = EXIT_REJECTED


class LockBusy(MemsyncError):
    exit_code = EXIT_BUSY


class RunInProgress(LockBusy):
    """A `memsync run` owns the memory directory: its files are the run's until it ends."""

    def __init__(self, name: str, run_id: str, pid: int, hint: str) -> None:
        super().__init__(f"memory {name!r} is in use by run {run_id} (pid {pid})", hint)
        self.run_id = run_id
        self.pid = pid


class RepoError(MemsyncError):
    exit_code = EXIT_REPO


class DiskFull(RepoError):
    """A write failed for want of space: nothing half-written stays (a cut checkout is put back,
    now or by the next command; objects and the index are only ever renamed into place)."""

    def __init__(self, where: Path, detail: str) -> None:
        super().__init__(f"the disk is full: cannot write in {where} ({detail})",
                         "free some disk space there and run the command again; nothing was lost: your files "
                         "are as they were, and what was committed before stays in the local history "
                         "(`memsync status` shows anything not yet pushed)")
        self.where = where


class OutputFailed(MemsyncError):
    """memsync's own output could not be written (`> file` on a full disk): the output's
    failure, not the memory's."""

    exit_code = EXIT_REPO

    def __init__(self, detail: str) -> None:
        super().__init__(f"cannot write the output ({detail})",
                         "nothing was lost; free some space where the output goes (or send it elsewhere) "
                         "and run the command again to see it")


class UnsavedWork(MemsyncError):
    """Work is committed locally but could not be pushed; `memsync push` delivers it later."""

    exit_code = EXIT_UNSAVED

    def __init__(self, message: str, unpushed: list[str], hint: str | None = None) -> None:
        super().__init__(message, hint or "run `memsync push` when the remote is back")
        self.unpushed = unpushed


class Blocked(MemsyncError):
    exit_code = EXIT_BLOCKED


class Interrupted(MemsyncError):
    exit_code = EXIT_INTERRUPTED


class AgentLeftRunning(RunInProgress):
    """The run's memsync process is gone (killed, OOM) but processes its command started still
    run: they may be halfway through a file, so nothing commits the tree until they end."""

    def __init__(self, name: str, run_id: str, pid: int, left: list[int]) -> None:
        shown = ", ".join(map(str, left[:5])) + (" ..." if len(left) > 5 else "")
        super().__init__(name, run_id, pid,
                         f"wait for them to end (their files are then committed as run {run_id}'s), or end them: "
                         f"kill {' '.join(map(str, left[:5]))}")
        self.message = (f"memory {name!r} is in use by run {run_id}: its memsync (pid {pid}) is gone, but its "
                        f"command still runs (pids {shown})")
        self.left = left
