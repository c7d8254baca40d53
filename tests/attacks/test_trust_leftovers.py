"""Leftovers of the fourth trust audit: each with its documented exit code (docs/SECURITY.md,
"Leftovers of the fourth audit")."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from memsync.errors import EXIT_CONFIG
from tests.conftest import Cli
from tests.helpers.figures import Figures, figures

pytestmark = pytest.mark.attack
__all__ = ["figures"]


def test_a_closed_stderr_pipe_keeps_the_commands_exit_code(tmp_path: Path, figures: Figures) -> None:
    """Before: `memsync status 2>&1 | true` outside a memory exited 1 ("a bug") instead of 3: the
    error line's write failed, and so did the report of that failure."""
    figures.add("bad inputs tried")
    read, write = os.pipe()
    os.close(read)  # the reader is gone before memsync writes a byte
    try:
        done = subprocess.run([sys.executable, "-m", "memsync", "status"], cwd=tmp_path, stderr=write,
                              stdout=subprocess.PIPE, timeout=120, check=False)
    finally:
        os.close(write)
    assert done.returncode == EXIT_CONFIG
    figures.add("bad inputs handled")


def test_status_json_says_when_the_running_run_started_in_rfc_3339(memory: Path, cli: Cli) -> None:
    """Before: `running.started` was the process's start in clock ticks since boot ("123456")."""
    import calendar
    import json
    import re
    import time

    from memsync.core import memory as memmod
    from memsync.core.memory import open_memory

    mem = open_memory(memory)
    assert memmod.claim(mem, "run-status-1")
    try:
        r = cli("status", "--json", cwd=memory)
    finally:
        memmod.release(mem, "run-status-1")
    running = json.loads(r.out)["running"]
    assert running["run_id"] == "run-status-1" and running["pid"] == os.getpid()
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", running["started"]), running
    started = calendar.timegm(time.strptime(running["started"], "%Y-%m-%dT%H:%M:%SZ"))
    assert started <= time.time() + 2 and started > time.time() - 24 * 3600  # this test process's start


def test_the_hub_repack_never_holds_the_hub_lock(memory: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch,
                                                figures: Figures) -> None:
    """Before: the automatic repack of a hub past its pack limit ran under the hub's lock, so on a
    large hub every other writer waited for it (or gave up after MEMSYNC_LOCK_TIMEOUT). Now, while
    the repack runs, another writer takes the hub's lock at once; two repacks never overlap."""
    from memsync.core.locking import held
    from memsync.errors import LockBusy
    from memsync.git import pack
    from tests.conftest import hub_path, write

    figures.add("lock cases")
    monkeypatch.setenv("MEMSYNC_GC_PACKS", "2")
    monkeypatch.setenv("MEMSYNC_LOCK_TIMEOUT", "0")
    seen: list[str] = []
    real = pack.repack

    def watched(git_dir: Path) -> pack.RepackResult:
        if git_dir == hub_path():
            with held(git_dir / "memsync.lock", "the hub", timeout=0):  # a writer gets in at once
                seen.append("hub lock free")
            # and a second repack does not start beside this one
            with pytest.raises(LockBusy), held(git_dir / "memsync-repack.lock", "the repack", timeout=0):
                pass
        return real(git_dir)

    monkeypatch.setattr(pack, "repack", watched)
    for i in range(4):
        write(memory, f"notes/{i}.md", f"note {i}\n")
        assert cli("push", cwd=memory).code == 0
    assert seen, "the hub was never repacked"
    assert pack.counts(hub_path()).packs <= 2
    figures.add("lock cases handled")
