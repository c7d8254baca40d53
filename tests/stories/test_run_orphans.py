"""A run owns its agent's processes: memsync killed while its command runs never lets the next
command commit a file an orphaned process of the command is still writing (it refuses, exit 6,
naming the processes, until they end; then their files are committed as the run's), and what a
command leaves running when it exits is ended before the run saves."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import git, hub_path, hub_tree, memsync_cmd

pytestmark = pytest.mark.slow

BIG = 3_072_000

# The command: starts a writer in its process group and waits for it. The writer rewrites
# agent/big.md in place: 1 MB, then (once GO exists) the rest, in 64 KiB writes.
AGENT = r"""
import os, subprocess, sys
writer = r'''
import os, pathlib, sys, time
mem, go = pathlib.Path(os.environ["MEMSYNC_MEMORY_DIR"]), pathlib.Path(sys.argv[1])
(mem / "agent").mkdir(exist_ok=True)
with open(mem / "agent" / "big.md", "wb") as fh:
    fh.write(b"x" * 1_048_576)
    fh.flush()
    (mem / "agent" / "writing").write_text(str(os.getpid()))
    while not go.exists():
        time.sleep(0.05)
    for _ in range((3_072_000 - 1_048_576) // 65536 + 1):
        fh.write(b"y" * 65536)
    fh.truncate(3_072_000)
(mem / "agent" / "writing").unlink()
'''
child = subprocess.Popen([sys.executable, "-c", writer, sys.argv[1]])
child.wait()
"""


def _wait_for(path: Path, proc: subprocess.Popen[bytes] | None = None, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert proc is None or proc.poll() is None, "the run ended early"
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


def _gone(pid: int, seconds: float = 60) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def test_an_orphan_writing_in_place_is_never_committed_half_written(memory: Path, tmp_path: Path) -> None:
    """`run` killed by its pid (an OOM kill): the writer its command started lives on, 1 MB into
    a 3 MB file. The next push, pull and run refuse (exit 6) naming it, and commit nothing; once
    it has finished, push commits the whole file as the run's."""
    go = tmp_path / "go"
    run = subprocess.Popen([sys.executable, "-m", "memsync", "run", "--run-id", "orphaned", "--checkpoint", "0",
                            "--", sys.executable, "-c", AGENT, str(go)], cwd=memory, start_new_session=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _wait_for(memory / "agent" / "writing", run)
    writer = int((memory / "agent" / "writing").read_text())
    os.kill(run.pid, 9)  # memsync alone, as an OOM kill or a supervisor does
    run.wait()
    try:
        env = dict(os.environ, MEMSYNC_LOCK_TIMEOUT="1")
        for verb in (["push"], ["pull"], ["run", "--", "true"]):
            done = memsync_cmd(*verb, cwd=memory, env=env)
            assert done.returncode == 6, (verb, done.stderr)
            assert "its memsync" in done.stderr and f"still runs (pids {writer})" in done.stderr, done.stderr
            assert f"kill {writer}" in done.stderr, "the hint says how to end it"
        assert "agent/big.md" not in hub_tree(), "nothing of the half-written file reached the hub"
        assert (memory / "agent" / "big.md").stat().st_size < BIG
    finally:
        go.touch()
    assert _gone(writer), "the writer finished"
    done = memsync_cmd("push", cwd=memory)
    assert done.returncode == 0, done.stderr
    assert len(hub_tree()["agent/big.md"]) == BIG
    by = git("log", "-1", "--format=%an%n%(trailers:key=Memsync-Run-Id,valueonly)", "memory/research", "--",
             "agent/big.md", cwd=hub_path()).split()
    assert by[:3] == ["memsync", "run", "orphaned"] and by[-1] == "orphaned", by


LEAVER = r"""
import os, subprocess, sys
# a writer left running in the command's group, and one that left it (a daemon's setsid)
for new_session in (False, True):
    subprocess.Popen([sys.executable, "-c", "import time\nwhile True: time.sleep(0.1)"],
                     start_new_session=new_session)
print("left two")
"""


def test_what_a_command_leaves_running_is_ended_before_the_run_saves(memory: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "memsync", "run", "--run-id", "leaver", "--checkpoint", "0", "--",
                           sys.executable, "-c", LEAVER], cwd=memory, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "left two" in done.stdout
    assert "the command left 2 processes running" in done.stderr, done.stderr
    from memsync.util import processes

    found = processes.survivors(processes.Agent("leaver", 2 ** 22 + 7, None, None, None))
    assert found == [], "neither outlived the run"


# The --as-user command: a swapper that leaves the command's process group (as LEAVE_BEHIND in
# test_as_user_races.py), then the command waits to be killed with memsync.
SWAP_AND_WAIT = r"""
import os, subprocess, sys, time
subprocess.Popen([sys.executable, "-c", sys.argv[1], os.environ["MEMSYNC_MEMORY_DIR"], sys.argv[2], "120", "0.001"],
                 start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
time.sleep(600)
"""


@pytest.mark.attack
def test_a_killed_as_user_runs_leftovers_are_ended_before_a_plain_pull_writes(tmp_path: Path) -> None:
    """memsync killed during an --as-user run; a process the command left keeps swapping `d` for
    a symlink to a root-only folder. A plain `memsync pull` as root (the hub changed `d`'s files)
    ends it and takes the tree back before it writes: root's folder is never written to."""
    import pwd
    import secrets as tokens
    import shutil
    import tempfile

    from tests.attacks.test_as_user_races import SWAPPER, _memory, _secret_folder
    from tests.helpers.agent_user import SYSTEM_PYTHON, end_all, live, skip_unless_root

    skip_unless_root()
    name = f"msorph{tokens.token_hex(4)}"
    if subprocess.run(["useradd", "--system", "--no-create-home", "--home-dir", "/nonexistent", "--shell",
                       "/usr/sbin/nologin", name], capture_output=True, check=False).returncode != 0:
        pytest.skip("cannot create a user")
    user = pwd.getpwnam(name)
    base = Path(tempfile.mkdtemp(prefix="memsync-orphan-"))
    base.chmod(0o755)
    try:
        secret = _secret_folder(base)
        before = {p.name: p.read_bytes() for p in secret.iterdir()}
        mem = _memory(base)
        assert memsync_cmd("clone", "research", "other", cwd=base).returncode == 0
        run = subprocess.Popen([sys.executable, "-m", "memsync", "run", "--as-user", name, "--memory", "research:mem",
                                "--run-id", "killed-as-user", "--checkpoint", "0", "--", SYSTEM_PYTHON, "-c",
                                SWAP_AND_WAIT, SWAPPER, str(secret)], cwd=base, start_new_session=True,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while len(live(user.pw_uid)) < 2:  # the command and its swapper
            assert run.poll() is None and time.monotonic() < deadline, "the run never started its command"
            time.sleep(0.05)
        time.sleep(0.5)  # the swapper is under way
        os.kill(run.pid, 9)
        run.wait()
        for i in range(10):
            (base / "other" / "d" / f"f{i}").write_text(f"from the hub {i}\n")
        assert memsync_cmd("push", cwd=base / "other").returncode == 0
        assert live(user.pw_uid), "the swapper outlived memsync"
        pulled = memsync_cmd("pull", cwd=mem)
        left = live(user.pw_uid)
        assert {p.name: p.read_bytes() for p in secret.iterdir()} == before, "root's folder was written to"
        assert left == [], "the pull ended the leftovers first"
        assert pulled.returncode == 0, pulled.stderr
        assert "were ended and its work tree taken back" in pulled.stderr
        assert all(p.lstat().st_uid == 0 for p in [mem, *mem.rglob("*")] if ".git" not in p.parts)
    finally:
        end_all(user.pw_uid)
        subprocess.run(["userdel", name], capture_output=True, check=False)
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.server
@pytest.mark.parametrize("sig", ["SIGTERM", "SIGHUP"])
def test_a_stop_signal_during_the_opening_pull_is_said_and_leaves_nothing(  # type: ignore[no-untyped-def]
        hanging_server, tmp_path: Path, sig: str) -> None:
    """Unhandled on the old code: memsync died silently (143/129) with its claim on the memory."""
    import signal

    marker = tmp_path / "ran"
    env = dict(os.environ, MEMSYNC_REMOTE=hanging_server.url("hub.git", "git"), MEMSYNC_IO_TIMEOUT="60",
               PYTHONFAULTHANDLER="1")
    def as_a_sandbox_starts_it() -> None:
        """SIGTERM and SIGHUP at their defaults: a test runner started under nohup hands its
        children SIGHUP ignored, which memsync keeps (`nohup memsync run` is not stopped by a hangup)."""
        for stop in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(stop, signal.SIG_DFL)

    proc = subprocess.Popen([sys.executable, "-m", "memsync", "run", "--memory", "research", "--", sys.executable,
                             "-c", f"open({str(marker)!r}, 'w')"], cwd=tmp_path, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=as_a_sandbox_starts_it)
    time.sleep(1.5)  # connected, waiting for the hub's answer
    proc.send_signal(getattr(signal, sig))
    try:
        _, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:  # still there a minute on: where every thread of it waits
        proc.send_signal(signal.SIGABRT)
        _, err = proc.communicate()
        raise AssertionError(f"memsync did not stop; its threads:\n{err}") from None
    assert proc.returncode == 128 + getattr(signal, sig), err
    assert f"error: stopped by {sig} before the command started; nothing was run" in err
    assert "Traceback" not in err
    assert not marker.exists()


@pytest.mark.server
def test_a_stop_signal_a_helper_thread_would_take_stops_the_opening_pull(  # type: ignore[no-untyped-def]
        hanging_server, tmp_path: Path) -> None:
    """The kernel hands a signal sent to the process to any thread that does not block it, and
    kill() with a thread's id tries that thread first. Sent to the network watch's thread while
    the main thread waited for a silent hub, the old code acted on it only when the read timed
    out (MEMSYNC_IO_TIMEOUT, here 30 s); the threads memsync starts now block the stop signals."""
    import signal

    env = dict(os.environ, MEMSYNC_REMOTE=hanging_server.url("hub.git", "git"), MEMSYNC_IO_TIMEOUT="30")

    def as_a_sandbox_starts_it() -> None:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)

    proc = subprocess.Popen([sys.executable, "-m", "memsync", "run", "--memory", "research", "--", "true"],
                            cwd=tmp_path, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=as_a_sandbox_starts_it)
    deadline = time.monotonic() + 60
    while not (helpers := [int(t) for t in os.listdir(f"/proc/{proc.pid}/task") if int(t) != proc.pid]):
        assert proc.poll() is None and time.monotonic() < deadline, "no helper thread: not waiting on the hub"
        time.sleep(0.05)
    time.sleep(0.3)  # the main thread in its read of the silent hub
    started = time.monotonic()
    os.kill(helpers[0], signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert "error: stopped by SIGTERM before the command started" in err
    assert time.monotonic() - started < 10, "acted on only when the hub's read timed out"


def test_at_a_terminal_the_command_in_its_own_group_still_reads_it(memory: Path, tmp_path: Path) -> None:
    """The command's process group is given the terminal's foreground (as a shell does), so it
    can read the terminal (a background group reading it would be stopped by SIGTTIN), and memsync
    takes the terminal back when it exits."""
    import pty
    import select

    got = tmp_path / "got"
    agent = f"import sys\nopen({str(got)!r}, 'w').write(sys.stdin.readline())\n"
    pid, master = pty.fork()
    if pid == 0:  # the child: the pty is its controlling terminal, its session's foreground
        os.chdir(memory)
        os.execv(sys.executable, [sys.executable, "-m", "memsync", "run", "--run-id", "tty", "--checkpoint", "0",
                                  "--", sys.executable, "-c", agent])
    output = b""
    deadline = time.monotonic() + 60
    written = False
    code = None
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            code = os.waitstatus_to_exitcode(status)
            break
        if not written and b"starting" in output:
            os.write(master, b"from the terminal\n")
            written = True
        if select.select([master], [], [], 0.1)[0]:
            with contextlib.suppress(OSError):
                output += os.read(master, 4096)
    else:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
    os.close(master)
    assert code == 0, output.decode(errors="replace")
    assert got.read_text() == "from the terminal\n"


SLOW_NOTE = ("import os, pathlib, time; time.sleep(float(os.environ.get('HOLD', '0'))); "
             "pathlib.Path(os.environ['MEMSYNC_MEMORY_DIR'], 'done.md').write_text('done')")


def test_another_run_given_the_same_run_id_is_not_ended(tmp_path: Path) -> None:
    """Two runs with one --run-id on two memories (a retried CI job, two sandboxes on one host):
    the one that ends first leaves the other's command running."""
    for name in ("alpha", "beta"):
        assert memsync_cmd("run", "--create", "--memory", f"{name}:{tmp_path / name}", "--", "true",
                           cwd=tmp_path).returncode == 0
    def run(name: str, hold: str) -> subprocess.Popen[str]:
        return subprocess.Popen([sys.executable, "-m", "memsync", "run", "--run-id", "same", "--checkpoint", "0",
                                 "--memory", f"{name}:{tmp_path / name}", "--", sys.executable, "-c", SLOW_NOTE],
                                cwd=tmp_path, env={**os.environ, "HOLD": hold}, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)

    quick = run("alpha", "2")
    deadline = time.monotonic() + 60
    while "starting" not in (quick_err := _peek(quick)) and time.monotonic() < deadline:
        time.sleep(0.05)
    slow = run("beta", "6")  # its command starts after the first run's memsync did, and outlives it
    _, err = quick.communicate(timeout=120)
    assert quick.returncode == 0, quick_err + err
    _, err = slow.communicate(timeout=120)
    assert slow.returncode == 0, err  # not 143: the first run's end did not take it for its own
    assert hub_tree("memory/beta")["done.md"] == b"done"


def _peek(proc: subprocess.Popen[str]) -> str:
    """The run's next line on stderr, if one is there (its first says it is starting the command)."""
    import select

    assert proc.stderr is not None
    ready, _, _ = select.select([proc.stderr], [], [], 0.05)
    return proc.stderr.readline() if ready else ""
