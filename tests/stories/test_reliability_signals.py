"""Signals at the end of a run (issue 22, part 4): SIGTERM (`docker stop`) and Ctrl-C while
`memsync run` makes its final push, the command having exited 0.

The hub is a server that accepts connections and never answers (the push stalls), or a real
`git daemon` whose pre-receive hook waits until the test lets it go (a slow push that ends).
Checked: memsync is never killed silently by the signal; it finishes the push when it can, or
abandons it with the `NOT PUSHED` line, the unpushed versions named, and exit 8; a first Ctrl-C
lets the push go on and a second abandons it; the commit always stays local.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import git, hub_tree, memsync_cmd, write
from tests.helpers.figures import Figures, figures

__all__ = ["figures"]

pytestmark = [pytest.mark.server, pytest.mark.slow]

ASKED = "asked to stop: finishing the push"


class Stderr:
    """The lines a process writes to stderr, read as they come, so a test can await one."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.lines: list[str] = []
        self._changed = threading.Condition()
        self._proc = proc
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        assert self._proc.stderr is not None
        for line in self._proc.stderr:
            with self._changed:
                self.lines.append(line)
                self._changed.notify_all()
        with self._changed:
            self.lines.append("")  # end of stream
            self._changed.notify_all()

    def wait_for(self, needle: str, timeout: float = 30) -> bool:
        deadline = time.monotonic() + timeout
        with self._changed:
            while not any(needle in line for line in self.lines):
                if "" in self.lines or time.monotonic() >= deadline:
                    return False
                self._changed.wait(0.2)
        return True

    def text(self) -> str:
        self._thread.join(timeout=30)
        return "".join(self.lines)


def offline_memory(tmp_path: Path) -> Path:
    root = tmp_path / "research"
    root.mkdir()
    assert memsync_cmd("init", cwd=root).returncode == 0
    write(root, "summary.md", "# s\n")
    assert memsync_cmd("push", cwd=root).returncode == 0
    return root


def run_into(root: Path, url: str, grace: str | None = None) -> tuple[subprocess.Popen[str], Stderr]:
    env = dict(os.environ, MEMSYNC_IO_TIMEOUT="120")  # the stall outlasts every test
    if grace is not None:
        env["MEMSYNC_STOP_GRACE"] = grace
    proc = subprocess.Popen([sys.executable, "-m", "memsync", "run", "--offline", "--remote", url,
                             "--checkpoint", "0", "--run-id", "stopped-run", "--", "touch", "made-by-the-run.md"],
                            cwd=root, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    return proc, Stderr(proc)


def in_the_final_push(proc: subprocess.Popen[str], hanging_server) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + 60
    while not hanging_server.accepted:
        assert time.monotonic() < deadline and proc.poll() is None, "the run never reached its push"
        time.sleep(0.02)


def assert_not_pushed_and_kept(proc: subprocess.Popen[str], err: str, root: Path) -> None:
    assert proc.returncode == 8, err
    assert "research" in err and "NOT PUSHED: interrupted: the final push was abandoned" in err
    assert "unpushed versions kept locally:" in err and "`memsync push`" in err
    assert "made-by-the-run.md" in git("show", "--name-only", "HEAD", cwd=root)  # the commit stays
    assert "Traceback" not in err


def test_sigterm_during_a_stalled_final_push_reports_it_and_exits_8(tmp_path: Path, hanging_server,  # type: ignore[no-untyped-def]
                                                                     figures: Figures) -> None:
    """`docker stop` while the final push hangs: it used to kill memsync silently (exit 143)."""
    figures.add("signal cases")
    root = offline_memory(tmp_path)
    proc, stderr = run_into(root, hanging_server.url("hub.git", scheme="git"), grace="2")
    in_the_final_push(proc, hanging_server)
    signalled = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=30)
    waited = time.monotonic() - signalled
    err = stderr.text()
    assert_not_pushed_and_kept(proc, err, root)
    assert ASKED in err and "not done 2s after the signal" in err
    assert 2 <= waited < 10, waited  # within docker stop's 10 s
    figures.add("signal cases handled")


def test_a_first_ctrl_c_lets_the_final_push_go_on_a_second_abandons_it(tmp_path: Path, hanging_server,  # type: ignore[no-untyped-def]
                                                                       figures: Figures) -> None:
    """A first Ctrl-C used to abandon the push at once."""
    figures.add("signal cases")
    root = offline_memory(tmp_path)
    proc, stderr = run_into(root, hanging_server.url("hub.git", scheme="git"), grace="60")
    in_the_final_push(proc, hanging_server)
    proc.send_signal(signal.SIGINT)
    assert stderr.wait_for(ASKED), stderr.text()
    assert proc.poll() is None, "the first Ctrl-C stopped memsync"
    second = time.monotonic()
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=30)
    assert time.monotonic() - second < 5
    err = stderr.text()
    assert_not_pushed_and_kept(proc, err, root)
    assert "(a second signal)" in err
    figures.add("signal cases handled")


def test_sigterm_during_a_slow_final_push_lets_it_finish(tmp_path: Path, git_daemon,  # type: ignore[no-untyped-def]
                                                         figures: Figures) -> None:
    """The push is slow but ends within the grace: the run is on the hub and memsync exits 0."""
    from tests.helpers.servers import make_bare_hub

    figures.add("signal cases")
    hub = make_bare_hub(git_daemon.base_path / "hub.git")
    url = git_daemon.url("hub.git")
    root = tmp_path / "research"
    root.mkdir()
    assert memsync_cmd("init", "--remote", url, cwd=root).returncode == 0
    write(root, "summary.md", "# s\n")
    assert memsync_cmd("push", cwd=root).returncode == 0
    entered, release = tmp_path / "hook-entered", tmp_path / "hook-release"
    hook = hub / "hooks" / "pre-receive"
    hook.parent.mkdir(parents=True, exist_ok=True)
    hook.write_text(f"#!/bin/sh\ncat >/dev/null\ntouch {entered}\n"
                    f"i=0; while [ ! -e {release} ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done\n")
    hook.chmod(0o755)
    proc, stderr = run_into(root, url, grace="30")
    deadline = time.monotonic() + 60
    while not entered.exists():
        assert time.monotonic() < deadline and proc.poll() is None, stderr.text()
        time.sleep(0.02)
    proc.send_signal(signal.SIGTERM)
    assert stderr.wait_for(ASKED), stderr.text()
    release.touch()
    proc.wait(timeout=60)
    err = stderr.text()
    assert proc.returncode == 0, err
    assert "NOT PUSHED" not in err and "research" in err and ": pushed" in err
    assert hub_tree("memory/research", hub)["made-by-the-run.md"] == b""
    figures.add("signal cases handled")


# A command that saves a file and exits 0 on SIGTERM; `agent-started` says it is waiting.
SAVING_AGENT = ("import pathlib, signal, sys, time\n"
                "def bye(sig, frame):\n"
                "    pathlib.Path('saved-on-sigterm.md').write_text('saved\\n'); sys.exit(0)\n"
                "signal.signal(signal.SIGTERM, bye)\n"
                "pathlib.Path('agent-started').write_text('x')\n"
                "time.sleep(120)\n")


def _started(proc: subprocess.Popen[str], root: Path) -> Stderr:
    """The run's stderr, read as it comes, once its SAVING_AGENT has started in `root`."""
    stderr = Stderr(proc)
    deadline = time.monotonic() + 60
    while not (root / "agent-started").exists():
        assert time.monotonic() < deadline and proc.poll() is None, stderr.text()
        time.sleep(0.02)
    return stderr


def test_docker_stop_while_the_command_runs_bounds_the_final_push(tmp_path: Path, hanging_server,  # type: ignore[no-untyped-def]
                                                                   figures: Figures) -> None:
    """`docker stop`: SIGTERM reaches the command (forwarded), which saves and exits 0; the final
    push then hangs. memsync reports it within the grace counted from that SIGTERM, before
    docker's SIGKILL (10 s) would end it silently."""
    figures.add("signal cases")
    root = offline_memory(tmp_path)
    env = dict(os.environ, MEMSYNC_IO_TIMEOUT="120", MEMSYNC_STOP_GRACE="3")
    proc = subprocess.Popen([sys.executable, "-m", "memsync", "run", "--offline", "--remote",
                             hanging_server.url("hub.git", scheme="git"), "--checkpoint", "0", "--",
                             sys.executable, "-c", SAVING_AGENT], cwd=root, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    stderr = _started(proc, root)
    signalled = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=30)
    waited = time.monotonic() - signalled
    err = stderr.text()
    assert proc.returncode == 8, err
    assert "NOT PUSHED: interrupted: the final push was abandoned (not done 3s after the signal)" in err
    assert "saved-on-sigterm.md" in git("show", "--name-only", "HEAD", cwd=root)
    assert waited < 10, waited
    figures.add("signal cases handled")


def test_a_sigterm_one_of_memsyncs_threads_takes_still_reaches_the_command(memory: Path,
                                                                           figures: Figures) -> None:
    """The kernel may hand the SIGTERM `docker stop` sends memsync's pid to any thread that does
    not block it (kill() with a thread's id tries that thread first). A run with checkpoints has
    helper threads (the change trackers' observers, the checkpoint loop): on the old code a SIGTERM
    one of them took was never forwarded to the command, memsync's main thread waiting for the
    command to exit (the command ran its full 60 s; docker would have killed both at 10 s, the
    command's work unsaved). Now every thread memsync starts, and those they start, block it."""
    figures.add("signal cases")
    proc = subprocess.Popen([sys.executable, "-m", "memsync", "run", "--checkpoint", "5", "--",
                             sys.executable, "-c", SAVING_AGENT], cwd=memory, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    stderr = _started(proc, memory)
    helpers = [int(t) for t in os.listdir(f"/proc/{proc.pid}/task") if int(t) != proc.pid]
    assert helpers, "a run with checkpoints has helper threads"
    signalled = time.monotonic()
    os.kill(helpers[-1], signal.SIGTERM)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise AssertionError("the SIGTERM never reached the command") from None
    assert time.monotonic() - signalled < 10, stderr.text()
    assert proc.returncode == 0, stderr.text()
    assert "saved-on-sigterm.md" in git("show", "--name-only", "HEAD", cwd=memory)
    figures.add("signal cases handled")
