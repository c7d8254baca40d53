"""A memory directory: its root, its storage.yaml, its repository and its hub."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from memsync import config as cfgmod
from memsync import hub as hubmod
from memsync import maintenance
from memsync.config import StorageConfig
from memsync.errors import ConfigError, NotAMemory
from memsync.git.repo import GitRepo, write_private
from memsync.hub import HubUrl
from memsync.locking import clear_stale_git_locks, held


@dataclass
class Memory:
    root: Path
    config: StorageConfig
    git: GitRepo
    hub: HubUrl

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def branch(self) -> str:
        return self.config.hub_branch

    @property
    def local_ref(self) -> str:
        return f"refs/heads/{self.branch}"

    @property
    def tracking_ref(self) -> str:
        return f"refs/remotes/origin/{self.branch}"

    @contextmanager
    def locked(self, timeout: float | None = None) -> Iterator[None]:
        """The memory's lock; stale git lock files left by a killed process are cleared.
        `timeout`: how long to wait for it (default MEMSYNC_LOCK_TIMEOUT), then LockBusy."""
        with held(self.git.git_dir / "memsync.lock", f"memory {self.name!r}", timeout) as tenure:
            clear_stale_git_locks(self.git.git_dir, tenure, f"memory {self.name!r}", timeout)
            yield
            maintenance.auto(self.git.git_dir)


def find(start: Path) -> Path:
    root = cfgmod.find_root(start)
    if root is None:
        if (start / cfgmod.CONFIG_DIR / cfgmod.CONFIG_FILE).is_dir():
            raise ConfigError(f"{start / '.vm0' / 'storage.yaml'} is a directory, not a file",
                              "remove it, then run `memsync init`")
        raise NotAMemory(str(start))
    return root


def open_memory(start: Path, remote: str | None = None) -> Memory:
    root = find(start)
    config = cfgmod.load(root)
    git = GitRepo.open(root)
    hub = hubmod.resolve(remote, config.remote)
    mem = Memory(root, config, git, hub)
    if (git.git_dir / "memsync-ro-guard.json").exists():  # a run killed while it held this memory read-only
        from memsync.readonly import recover

        recover(mem)
    return mem


RUN_MARKER = "memsync-run.json"


@contextmanager
def running(memories: list[Memory], run_id: str) -> Iterator[None]:
    """Mark the memories as in use by a run (in .git, never committed) for its duration, so
    that `memsync watch` on the same directory does not commit the run's files as its own."""
    import json
    import os

    marks = []
    for mem in memories:
        mark = mem.git.git_dir / RUN_MARKER
        write_private(mark, json.dumps({"run_id": run_id, "pid": os.getpid()}).encode())
        marks.append(mark)
    try:
        yield
    finally:
        for mark in marks:
            mark.unlink(missing_ok=True)


def run_in_progress(mem: Memory) -> str | None:
    """The id of a live `memsync run` using this memory, if any (a dead run's mark is stale)."""
    import json
    import os

    mark = mem.git.git_dir / RUN_MARKER
    try:
        data = json.loads(mark.read_text(encoding="utf-8"))
        pid, run_id = int(data["pid"]), str(data["run_id"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        pass  # alive, another user's
    return run_id
