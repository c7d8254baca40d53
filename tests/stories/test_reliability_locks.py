"""Locks are judged by who holds them, never by comparing clocks (issue 22, part 3).

Each case uses a real `git commit -a` waiting in its editor (it keeps index.lock closed the whole
time, so no open file betrays it), memsync processes killed with SIGKILL while they hold the
memory's lock, and memsync run with its wall clock moved through tests/helpers/skewed_clock.py (the
kernel's clock, which stamps every file, stays true: the skew between a sandbox and a shared
volume). Checked: a lock whose holder may be alive is never removed (memsync exits 6 naming it,
and git's commit goes through); a lock whose holder is gone is removed by the next command by
itself, whatever the clocks say.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import git, hub_tree, memsync_cmd, write
from tests.helpers.figures import Figures, figures

pytestmark = pytest.mark.slow

__all__ = ["figures"]

SKEWED = str(Path(__file__).parent.parent / "helpers" / "skewed_clock.py")
HOUR = 3600.0


def skewed(offset: float, *args: str, cwd: Path, env: dict[str, str] | None = None,
           timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """memsync ARGS with its wall clock `offset` seconds off."""
    return subprocess.run([sys.executable, SKEWED, str(offset), *args], cwd=cwd, env=env or dict(os.environ),
                          capture_output=True, text=True, timeout=timeout)


@dataclass
class EditorCommit:
    """`git commit -a` whose editor waits on a fifo: git holds index.lock, closed, until released."""

    proc: subprocess.Popen[str]
    fifo: Path

    def finish(self) -> tuple[int, str]:
        with contextlib.suppress(OSError):
            fd = os.open(self.fifo, os.O_WRONLY | os.O_NONBLOCK)
            os.close(fd)
        _, errors = self.proc.communicate(timeout=30)
        return self.proc.returncode, errors


@contextlib.contextmanager
def git_commit_in_editor(memory: Path, tmp_path: Path) -> Iterator[EditorCommit]:
    write(memory, "by-git.md", "committed by git while memsync looked\n")
    git("add", "by-git.md", cwd=memory)
    fifo, opened = tmp_path / "editor.fifo", tmp_path / "editor.open"
    os.mkfifo(fifo)
    editor = f"sh -c 'touch {opened}; cat {fifo} >/dev/null; echo by git > \"$1\"' --"
    proc = subprocess.Popen(["git", "-c", f"core.editor={editor}", "-c", "user.name=a", "-c", "user.email=a@b",
                             "commit", "-q", "-a"], cwd=memory, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    commit = EditorCommit(proc, fifo)
    try:
        deadline = time.monotonic() + 30
        while not opened.exists():
            assert time.monotonic() < deadline and proc.poll() is None, "git's editor did not start"
            time.sleep(0.02)
        assert (memory / ".git" / "index.lock").exists()
        yield commit
    finally:
        if proc.poll() is None:
            commit.finish()


def kill_while_holding_the_lock(memory: Path, hanging_server, offset: float = 0.0) -> None:  # type: ignore[no-untyped-def]
    """A real `memsync run` killed with SIGKILL in its final push (to a hub that never answers),
    which it makes holding the memory's lock; with its wall clock `offset` seconds off."""
    url = hanging_server.url("hub.git", scheme="git")
    before = hanging_server.accepted
    proc = subprocess.Popen([sys.executable, SKEWED, str(offset), "run", "--offline", "--remote", url,
                             "--checkpoint", "0", "--", "true"], cwd=memory, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.monotonic() + 60
    while hanging_server.accepted == before:
        assert time.monotonic() < deadline and proc.poll() is None, "the run never reached its push"
        time.sleep(0.02)
    os.killpg(proc.pid, 9)
    proc.wait(timeout=10)
    assert (memory / ".git" / "memsync.lock").read_text().strip(), "the killed run left no record"


@pytest.mark.server
def test_a_killed_memsync_does_not_take_a_live_gits_lock(memory: Path, tmp_path: Path, hanging_server,  # type: ignore[no-untyped-def]
                                                           figures: Figures) -> None:
    """The dead holder's record used to make every git lock file made since its start its orphan,
    the index.lock of a `git commit -a` open in its editor too (git then failed with rc 128)."""
    figures.add("lock cases")
    kill_while_holding_the_lock(memory, hanging_server)
    with git_commit_in_editor(memory, tmp_path) as commit:
        proc = memsync_cmd("push", cwd=memory, env=dict(os.environ, MEMSYNC_LOCK_TIMEOUT="2"))
        assert (memory / ".git" / "index.lock").exists(), "a live git's lock was removed"
        assert proc.returncode == 6, proc.stderr
        assert "index.lock is held by another git command (process " in proc.stderr and "hint: " in proc.stderr
        code, errors = commit.finish()
    assert code == 0, errors
    push = memsync_cmd("push", cwd=memory)  # git is done: the dead run's leftovers go, the push goes through
    assert push.returncode == 0, push.stderr
    assert hub_tree()["by-git.md"] == b"committed by git while memsync looked\n"
    git("fsck", "--strict", cwd=memory)
    figures.add("lock cases handled")


def test_a_clock_an_hour_ahead_does_not_age_a_live_gits_lock(memory: Path, tmp_path: Path,
                                                              figures: Figures) -> None:
    """An hour ahead, the lock of a git started a second ago used to read as older than ten minutes."""
    figures.add("lock cases")
    with git_commit_in_editor(memory, tmp_path) as commit:
        proc = skewed(HOUR, "push", cwd=memory, env=dict(os.environ, MEMSYNC_LOCK_TIMEOUT="2"))
        assert (memory / ".git" / "index.lock").exists(), "a live git's lock was removed"
        assert proc.returncode == 6, proc.stderr
        code, errors = commit.finish()
    assert code == 0, errors
    assert skewed(HOUR, "push", cwd=memory).returncode == 0
    assert hub_tree()["by-git.md"] == b"committed by git while memsync looked\n"
    figures.add("lock cases handled")


@pytest.mark.parametrize("offset", [-HOUR, HOUR])
def test_a_dead_gits_old_lock_is_removed_whatever_the_clock(memory: Path, offset: float, figures: Figures) -> None:
    """A git killed 20 minutes ago left index.lock. An hour behind, it used to read as made in the
    future, and every command exited 6 until someone removed it by hand."""
    figures.add("lock cases")
    lock = memory / ".git" / "index.lock"
    lock.write_text("left by a killed git")
    made = time.time() - 20 * 60  # the kernel's clock: the one that stamps files
    os.utime(lock, (made, made))
    write(memory, "after-the-dead-git.md", "x\n")
    proc = skewed(offset, "push", cwd=memory, env=dict(os.environ, MEMSYNC_LOCK_TIMEOUT="2"))
    assert proc.returncode == 0, proc.stderr
    assert not lock.exists()
    assert hub_tree()["after-the-dead-git.md"] == b"x\n"
    figures.add("lock cases handled")


def test_a_young_foreign_lock_is_kept_whatever_the_clock(memory: Path, figures: Figures) -> None:
    """A git lock file no memsync left, a minute old: its owner may be on another machine sharing
    the directory, so it waits its ten minutes, measured on the file system's clock."""
    figures.add("lock cases")
    lock = memory / ".git" / "index.lock"
    lock.write_text("")
    made = time.time() - 60
    os.utime(lock, (made, made))
    for offset in (HOUR, -HOUR, 0.0):
        proc = skewed(offset, "push", cwd=memory, env=dict(os.environ, MEMSYNC_LOCK_TIMEOUT="1"))
        assert proc.returncode == 6 and "10 minutes" in proc.stderr, (offset, proc.stderr)
        assert lock.exists()
    figures.add("lock cases handled")


@pytest.mark.server
def test_a_dead_memsync_whose_clock_ran_ahead_is_recognised(memory: Path, hanging_server,  # type: ignore[no-untyped-def]
                                                            figures: Figures) -> None:
    """A memsync an hour ahead died holding the lock, inside a ref update: its record used to start
    in the future, its orphan was not recognised, and the next commands exited 6."""
    figures.add("lock cases")
    kill_while_holding_the_lock(memory, hanging_server, offset=HOUR)
    orphan = memory / ".git" / "refs" / "heads" / "memory" / "research.lock"
    orphan.write_text("0" * 40 + "\n")  # what libgit2 had written when the kill came
    write(memory, "after-the-dead-memsync.md", "y\n")
    started = time.monotonic()
    proc = memsync_cmd("push", cwd=memory, env=dict(os.environ, MEMSYNC_LOCK_TIMEOUT="5"))
    assert proc.returncode == 0, proc.stderr
    assert time.monotonic() - started < 30
    assert not orphan.exists()
    assert hub_tree()["after-the-dead-memsync.md"] == b"y\n"
    figures.add("lock cases handled")


def _ticks(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[19]


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
def test_a_record_is_judged_by_pid_start_time_and_boot_id(memory: Path, figures: Figures) -> None:
    """memsync's lock is free but its record names a process: a live one (same pid, start time and
    boot id) may still be writing, so the lock files made meanwhile stay; the same pid with another
    start time (the pid was reused) or another boot id is a dead holder, whose orphans go."""
    figures.add("lock cases")
    record = memory / ".git" / "memsync.lock"
    orphan = memory / ".git" / "index.lock"
    boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    me, host, ticks = os.getpid(), socket.gethostname(), _ticks(os.getpid())
    since = time.time() - 30
    live = f"{me} {host} {since:.3f} {boot} {ticks}\n"
    for dead in (f"{me} {host} {since:.3f} {boot} {int(ticks) + 1}\n",
                 f"{me} {host} {since:.3f} 00000000-0000-0000-0000-000000000000 {ticks}\n"):
        record.write_text(live)
        orphan.write_text("")
        push = memsync_cmd("push", cwd=memory, env=dict(os.environ, MEMSYNC_LOCK_TIMEOUT="1"))
        assert push.returncode == 6, push.stderr
        assert orphan.exists(), "the lock of a holder that may be alive was removed"
        record.write_text(dead)
        push = memsync_cmd("push", cwd=memory, env=dict(os.environ, MEMSYNC_LOCK_TIMEOUT="1"))
        assert push.returncode == 0, push.stderr
        assert not orphan.exists()
    figures.add("lock cases handled")


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
def test_a_run_mark_from_before_a_reboot_is_stale(memory: Path, figures: Figures) -> None:
    """The mark of a run names its process by pid, start time and boot id: after a reboot (a
    sandbox restored with its volume) the same pid and start ticks are another process."""
    import json

    figures.add("lock cases")
    mark = memory / ".git" / "memsync-run.json"
    boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    me, ticks = os.getpid(), _ticks(os.getpid())
    write(memory, "after-reboot.md", "z\n")
    mark.write_text(json.dumps({"run_id": "live-run", "pid": me, "started": ticks, "boot": boot}))
    proc = memsync_cmd("push", cwd=memory)
    assert proc.returncode == 6 and "live-run" in proc.stderr, proc.stderr
    mark.write_text(json.dumps({"run_id": "before-reboot", "pid": me, "started": ticks,
                                "boot": "00000000-0000-0000-0000-000000000000"}))
    proc = memsync_cmd("push", cwd=memory)
    assert proc.returncode == 0, proc.stderr
    assert hub_tree()["after-reboot.md"] == b"z\n"
    figures.add("lock cases handled")
