"""A FIFO in a work tree never blocks memsync: not in its own reads (non-blocking, checked on the
descriptor), not in libgit2's (a checkout leaves the path out; a FIFO swapped in while libgit2
hashes a file is released by util/fiforelease.py), and it is skipped and named, never committed as
a deletion."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import git, hub_tree, memsync_cmd, write

# Rewrites f.md (new stat data each time, so git hashes it) and swaps a FIFO in for an instant.
SWAPPER = r"""
import os, sys, time
os.chdir(sys.argv[1])
end = time.monotonic() + float(sys.argv[2])
n = 0
while time.monotonic() < end and not os.path.exists("stop"):
    n += 1
    with open("f.tmp", "w") as fh:
        fh.write(f"version {n}\n" * (n % 50 + 1))
    os.replace("f.tmp", "f.md")
    try:
        os.mkfifo("f.fifo")
    except FileExistsError:
        pass
    os.replace("f.fifo", "f.md")
    time.sleep(0.002)
"""


def _c_open_in_a_thread(path: Path) -> tuple[threading.Thread, list[int]]:
    """A blocking open() from C code, as libgit2 makes to hash a file (through libc, with the GIL
    let go, as pygit2's calls memsync makes do)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    got: list[int] = []
    thread = threading.Thread(target=lambda: got.append(libc.open(os.fsencode(path), os.O_RDONLY)), daemon=True)
    thread.start()
    return thread, got


@pytest.mark.parametrize("swapped_away", [False, True])
def test_a_libgit2_open_waiting_on_a_fifo_is_released(tmp_path: Path, swapped_away: bool) -> None:
    """libgit2 opens a file with a blocking open(): on a FIFO, that waits for a writer for ever
    (with memsync's lock held). The release thread frees it: by opening the FIFO for writing if it is
    still at that path, else (swapped away: no one can open it any more) by interrupting the
    wait. The path is reported."""
    from memsync.util import fiforelease

    fiforelease.watch()
    fifo = tmp_path / "f.md"
    os.mkfifo(fifo)
    thread, got = _c_open_in_a_thread(fifo)
    if swapped_away:  # the FIFO's inode leaves the name space while the open waits on it
        time.sleep(0.05)
        write(tmp_path, "other", "a file now\n")
        os.replace(tmp_path / "other", fifo)
    thread.join(30)
    assert not thread.is_alive(), "the open still waits on the FIFO"
    assert got != [], "it returned: a descriptor, or -1 (EINTR) for a FIFO no one can reach any more"
    assert str(fifo) in fiforelease.drain()


@pytest.mark.attack
@pytest.mark.slow
def test_a_fifo_swapped_in_while_git_hashes_never_blocks_a_snapshot(memory: Path) -> None:
    from memsync.core.attribution import Attribution
    from memsync.core.memory import open_memory
    from memsync.core.snapshot import take

    write(memory, "f.md", "first\n")
    assert memsync_cmd("push", cwd=memory).returncode == 0
    mem = open_memory(memory)
    swapper = subprocess.Popen([sys.executable, "-c", SWAPPER, str(memory), "60"])
    taken, stuck = 0, False
    try:
        deadline = time.monotonic() + float(os.environ.get("MEMSYNC_RACE_SECONDS", "4"))
        while time.monotonic() < deadline:
            done = threading.Event()

            def one(done: threading.Event = done, n: int = taken) -> None:
                with mem.locked():
                    take(mem, Attribution("run", f"Checkpoint {n}", "fifo"))
                done.set()

            worker = threading.Thread(target=one, daemon=True)
            worker.start()
            if not done.wait(15):
                stuck = True
                break
            taken += 1
    finally:
        (memory / "stop").touch()
        swapper.wait(timeout=60)
        if stuck:  # release it, so the test process can end
            for _ in range(100):
                with contextlib.suppress(OSError):
                    os.close(os.open(memory / "f.md", os.O_WRONLY | os.O_NONBLOCK))
                time.sleep(0.05)
    assert not stuck, f"a snapshot waited for ever on a FIFO after {taken} snapshots"
    assert taken >= 5


def test_a_fifo_at_a_tracked_path_is_skipped_and_named_never_opened(memory: Path, tmp_path: Path) -> None:
    """The hub changed summary.md; here a FIFO stands there. The pull does not wait on it (libgit2's
    checkout would have, for ever), names it, and nothing commits its deletion."""
    other = tmp_path / "other"
    assert memsync_cmd("clone", "research", str(other), cwd=tmp_path).returncode == 0
    write(other, "summary.md", "# Summary\n\nfrom the hub\n")
    write(other, "runs/hub.md", "hub\n")
    assert memsync_cmd("push", cwd=other).returncode == 0
    (memory / "summary.md").unlink()
    os.mkfifo(memory / "summary.md")
    pulled = memsync_cmd("pull", cwd=memory, timeout=60)
    assert pulled.returncode == 0, pulled.stderr
    assert "summary.md (a FIFO" in pulled.stderr
    assert (memory / "runs" / "hub.md").read_text() == "hub\n", "the rest of the merge arrived"
    pushed = memsync_cmd("push", cwd=memory, timeout=60)
    assert pushed.returncode == 0, pushed.stderr
    assert "not committed: summary.md (a FIFO" in pushed.stderr
    assert hub_tree()["summary.md"] == b"# Summary\n\nfrom the hub\n", "no deletion was committed"


def test_a_partial_copy_a_killed_restore_left_is_removed_by_the_next(memory: Path) -> None:
    """kill -9 during `restore` leaves `.memsync-<pid>-<name>` beside the file (git ignores it):
    the next write of that file removes it; on the old code it stayed for ever."""
    first = git("rev-parse", "HEAD", cwd=memory).strip()
    partial = write(memory, f"runs/.memsync-{2 ** 22 + 4321}-first.md", "first r")
    write(memory, "runs/first.md", "changed\n")
    assert memsync_cmd("push", cwd=memory).returncode == 0
    restored = memsync_cmd("restore", "runs/first.md", "--at", first, cwd=memory)
    assert restored.returncode == 0, restored.stderr
    assert (memory / "runs" / "first.md").read_text() == "first run\n"
    assert not partial.exists()
