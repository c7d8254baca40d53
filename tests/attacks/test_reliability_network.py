"""Network faults on a real `git daemon`: refused, hanging, restarted mid-push.

Every fault must end in bounded time with one clear `error:` line (exit 4 for the network,
8 for a run whose work is only committed locally), and the next ordinary command recovers.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import git, memsync_cmd, write
from tests.helpers.figures import Figures, figures
from tests.helpers.servers import GitDaemon, HangingServer, RefusingPort, make_bare_hub

pytestmark = [pytest.mark.attack, pytest.mark.server]
__all__ = ["figures"]

FAST_TIMEOUTS = {"MEMSYNC_CONNECT_TIMEOUT": "2", "MEMSYNC_IO_TIMEOUT": "2"}
BOUND = 30.0  # seconds any failing command may take with the fast timeouts (3 tries + backoff)


def _memory_on(daemon: GitDaemon, root: Path) -> str:
    make_bare_hub(daemon.base_path / "hub.git")
    url = daemon.url("hub.git")
    root.mkdir()
    assert memsync_cmd("init", "--name", "research", "--remote", url, cwd=root).returncode == 0
    write(root, "a.md", "a\n")
    proc = memsync_cmd("push", cwd=root)
    assert proc.returncode == 0, proc.stderr
    return url


def _timed(*args: str, cwd: Path, env: dict[str, str] | None = None) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    proc = memsync_cmd(*args, cwd=cwd, env=dict(os.environ, **(env or {})), timeout=120)
    return proc, time.monotonic() - started


def _clear(proc: subprocess.CompletedProcess[str], code: int) -> None:
    assert proc.returncode == code, proc.stderr
    assert "Traceback" not in proc.stderr and "unexpected" not in proc.stderr, proc.stderr
    assert "error: " in proc.stderr and "hint: " in proc.stderr, proc.stderr


def hub_tip(daemon: GitDaemon) -> str:
    return git("rev-parse", "memory/research", cwd=daemon.base_path / "hub.git").strip()


def test_unreachable_remote(git_daemon: GitDaemon, refusing_port: RefusingPort, tmp_path: Path,
                            figures: Figures) -> None:
    root = tmp_path / "research"
    _memory_on(git_daemon, root)
    dead = refusing_port.url("hub.git", scheme="git")
    proc, took = _timed("clone", "research", "copy", "--remote", dead, cwd=tmp_path)
    _clear(proc, 4)
    assert took < BOUND and "refused" in proc.stderr.lower()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith((".memsync-clone", "copy"))]
    # the daemon goes down: a push keeps the commit locally and says so; it comes back: push delivers
    write(root, "b.md", "b\n")
    git_daemon.stop()
    proc, took = _timed("push", cwd=root)
    _clear(proc, 4)
    assert took < BOUND
    local = git("rev-parse", "HEAD", cwd=root).strip()
    proc, took = _timed("run", "--run-id", "down-run", "--", "touch", "ran.md", cwd=root)
    _clear(proc, 4)
    assert not (root / "ran.md").exists(), "a run whose pull failed does not start"
    git_daemon.start()
    proc = memsync_cmd("push", cwd=root)
    assert proc.returncode == 0, proc.stderr
    assert hub_tip(git_daemon) == local
    figures.add("network faults", 3)
    figures.add("network faults handled", 3)


@pytest.mark.parametrize("scheme", ["git", "http"])
def test_hanging_remote_times_out(hanging_server: HangingServer, tmp_path: Path, scheme: str,
                                  figures: Figures) -> None:
    url = hanging_server.url("hub.git", scheme=scheme)
    proc, took = _timed("clone", "research", "--remote", url, cwd=tmp_path, env=FAST_TIMEOUTS)
    _clear(proc, 4)
    assert took < BOUND, took
    assert not list(tmp_path.glob(".memsync-clone*")) and not (tmp_path / "research").exists()
    proc, took = _timed("list", "--remote", url, cwd=tmp_path, env=FAST_TIMEOUTS)
    _clear(proc, 4)
    assert took < BOUND, took
    assert hanging_server.accepted >= 2
    figures.add("network faults", 2)
    figures.add("network faults handled", 2)


def test_remote_hangs_after_the_memory_was_cloned(git_daemon: GitDaemon, hanging_server: HangingServer,
                                                  tmp_path: Path, figures: Figures) -> None:
    root = tmp_path / "research"
    _memory_on(git_daemon, root)
    write(root, "b.md", "b\n")
    hanging = hanging_server.url("hub.git", scheme="git")
    proc, took = _timed("push", "--remote", hanging, cwd=root, env=FAST_TIMEOUTS)
    _clear(proc, 4)
    assert took < BOUND, took
    proc = memsync_cmd("push", cwd=root)  # the real remote again
    assert proc.returncode == 0, proc.stderr
    assert "b.md" in git("ls-tree", "--name-only", "memory/research", cwd=git_daemon.base_path / "hub.git")
    figures.add("network faults", 1)
    figures.add("network faults handled", 1)


def test_daemon_restarted_in_the_middle_of_a_push(git_daemon: GitDaemon, tmp_path: Path,
                                                  figures: Figures) -> None:
    root = tmp_path / "research"
    _memory_on(git_daemon, root)
    marker = tmp_path / "receiving"
    hook = git_daemon.base_path / "hub.git" / "hooks" / "pre-receive"
    # the first push stalls inside receive-pack (objects received, ref not yet updated)
    hook.write_text(f"#!/bin/sh\ncat >/dev/null\n[ -e {marker} ] && exit 0\ntouch {marker}\nsleep 60\n")
    hook.chmod(0o755)
    write(root, "notes.md", "x" * 50_000 + "\n")
    started = time.monotonic()
    push = subprocess.Popen([sys.executable, "-m", "memsync", "push"], cwd=root, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=dict(os.environ, **FAST_TIMEOUTS))
    deadline = time.monotonic() + 30
    while not marker.exists():
        assert time.monotonic() < deadline and push.poll() is None, push.stderr.read() if push.stderr else ""
        time.sleep(0.05)
    git_daemon.restart()
    _, errs = push.communicate(timeout=120)
    took = time.monotonic() - started
    assert took < BOUND + 10, took
    assert "Traceback" not in errs and "unexpected" not in errs, errs
    local = git("rev-parse", "HEAD", cwd=root).strip()
    if push.returncode != 0:  # the retry inside the command may already have delivered it
        assert push.returncode == 4 and errs.startswith("error: "), errs
        again = memsync_cmd("push", cwd=root)
        assert again.returncode == 0, again.stderr
    assert hub_tip(git_daemon) == local
    git("fsck", "--strict", cwd=git_daemon.base_path / "hub.git")
    figures.add("network faults", 1)
    figures.add("network faults handled", 1)


def test_run_survives_the_remote_going_down_mid_run(git_daemon: GitDaemon, tmp_path: Path,
                                                    figures: Figures) -> None:
    root = tmp_path / "research"
    url = _memory_on(git_daemon, root)
    sandbox = tmp_path / "sandbox"
    sandbox.mkdir()
    flag = tmp_path / "written"
    script = (f"import pathlib, time\npathlib.Path('research/late.md').write_text('late\\n')\n"
              f"pathlib.Path({str(flag)!r}).touch()\n"
              f"while pathlib.Path({str(flag)!r}).exists():\n    time.sleep(0.05)\n")
    run = subprocess.Popen([sys.executable, "-m", "memsync", "run", "--run-id", "mid-run", "--checkpoint", "0",
                            "--remote", url, "--memory", "research", "--", sys.executable, "-c", script],
                           cwd=sandbox, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           env=dict(os.environ, **FAST_TIMEOUTS))
    deadline = time.monotonic() + 60
    while not flag.exists():
        assert time.monotonic() < deadline and run.poll() is None
        time.sleep(0.05)
    git_daemon.stop()
    flag.unlink()  # the agent finishes while the remote is down
    _, errs = run.communicate(timeout=120)
    assert run.returncode == 8, errs
    assert "NOT PUSHED" in errs and "memsync push" in errs and "Traceback" not in errs
    git_daemon.start()
    proc = memsync_cmd("push", cwd=sandbox / "research")
    assert proc.returncode == 0, proc.stderr
    tree = git("ls-tree", "--name-only", "memory/research", cwd=git_daemon.base_path / "hub.git")
    assert "late.md" in tree.split()
    figures.add("network faults", 1)
    figures.add("network faults handled", 1)
