"""`memsync serve`: commands handed to a resident server behave exactly as in-process ones.

A real server process on a real Unix socket in tmp, real clients (`python -m memsync`), a real
embedded hub. Each test checks that the work really went through the server (the agent's
parent is a worker whose parent is the server), or that it really did not (fallbacks).
"""

from __future__ import annotations

import contextlib
import os
import pty
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import git, hub_path, hub_tree, memsync_cmd, write

pytestmark = [pytest.mark.skipif(not hasattr(socket, "SO_PEERCRED"), reason="Linux peer credentials"),
              pytest.mark.server]

PARENTS = "import os; p = os.getppid(); print(p, open(f'/proc/{p}/stat').read().rsplit(')', 1)[1].split()[1])"


@dataclass
class Server:
    proc: subprocess.Popen[str]
    socket: Path

    def env(self, **extra: str) -> dict[str, str]:
        return dict(os.environ, MEMSYNC_SERVER=str(self.socket), **extra)


def start_server(sock: Path, env: dict[str, str] | None = None, options: tuple[str, ...] = ()) -> Server:
    proc = subprocess.Popen([sys.executable, "-m", "memsync", "serve", "--socket", str(sock), *options],
                            env=env or dict(os.environ), stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"serve exited {proc.returncode}: {proc.stderr.read() if proc.stderr else ''}")
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.connect(str(sock))
            return Server(proc, sock)
        except OSError:
            time.sleep(0.05)
        finally:
            probe.close()
    proc.kill()
    raise AssertionError("serve did not listen within 60 s")


def stop(server: Server) -> str:
    if server.proc.poll() is None:
        server.proc.send_signal(signal.SIGTERM)
    _, err = server.proc.communicate(timeout=30)
    return err


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    srv = start_server(tmp_path / "s.sock")
    yield srv
    stop(srv)
    assert not srv.socket.exists()


def ms(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """memsync as a separate process, stdin not a terminal (a run at a terminal is not handed over)."""
    return subprocess.run([sys.executable, "-m", "memsync", *args], cwd=cwd, env=env or dict(os.environ),
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)


def worker_parent(proc: subprocess.CompletedProcess[str]) -> int:
    """The pid of the process that started the agent's parent (PARENTS prints both)."""
    line = next(ln for ln in proc.stdout.splitlines() if ln.split()[0].isdigit())
    return int(line.split()[1])


def test_commands_through_the_server_match_in_process(memory: Path, server: Server) -> None:
    write(memory, "notes.md", "a note\n")
    for args in (["status"], ["status", "--json"], ["diff"], ["push"], ["log", "-n", "5"], ["status"],
                 ["pull"], ["list"], ["bogus"], ["log", "-n", "x"], ["diff", "no-such-version"], ["log", "-h"],
                 ["hooks", "status", "--help"]):
        if args == ["push"]:
            served = memsync_cmd(*args, cwd=memory, env=server.env())
            assert served.returncode == 0, served.stderr
            assert hub_tree()["notes.md"] == b"a note\n"
            continue
        plain = memsync_cmd(*args, cwd=memory)
        served = memsync_cmd(*args, cwd=memory, env=server.env())
        assert (served.returncode, served.stdout, served.stderr) == (plain.returncode, plain.stdout, plain.stderr), args
    assert memsync_cmd("bogus", cwd=memory, env=server.env()).returncode == 2


def test_the_work_runs_in_a_server_worker_with_the_callers_world(tmp_path: Path, memory: Path,
                                                                  server: Server) -> None:
    """cwd, umask, environment and standard streams are the caller's; the worker is the server's child."""
    other_home = tmp_path / "other-home"
    env = server.env(MEMSYNC_HOME=str(other_home), MARKER="from-the-client")
    fresh = tmp_path / "fresh-mem"
    fresh.mkdir()
    proc = subprocess.run([sys.executable, "-m", "memsync", "init"], cwd=fresh, env=env, capture_output=True,
                          text=True, timeout=60, preexec_fn=lambda: os.umask(0o077))
    assert proc.returncode == 0, proc.stderr
    assert (fresh / ".vm0" / "storage.yaml").stat().st_mode & 0o077 == 0  # the client's umask
    write(fresh, "a.md", "x\n")
    agent = f"import os, sys; {PARENTS}; print(os.environ['MARKER'], os.getcwd()); sys.stdout.flush()"
    proc = subprocess.run([sys.executable, "-m", "memsync", "run", "--", sys.executable, "-c", agent],
                          cwd=fresh, env=env, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    assert worker_parent(proc) == server.proc.pid  # agent -> worker -> server
    assert f"from-the-client {fresh}" in proc.stdout
    assert "finished: exit 0" in proc.stderr
    # pushed to the client's MEMSYNC_HOME's hub, not the server's
    assert git("show", "memory/fresh-mem:a.md", cwd=other_home / "hub.git") == "x\n"


def test_exit_code_and_output_of_a_run_pass_through(memory: Path, server: Server) -> None:
    proc = ms("run", "--", sys.executable, "-c", "import sys; print('out'); print('err', file=sys.stderr);"
                       " sys.exit(3)", cwd=memory, env=server.env())
    assert proc.returncode == 3
    assert proc.stdout == "out\n"
    assert "err\n" in proc.stderr and "finished: exit 3" in proc.stderr


# What a served command's client may import beyond a bare interpreter (`python -S`): its own
# three modules, _socket, what `site` brings anyway (os and its path modules); a run also seals
# itself (memsync.sealed, ctypes for prctl). Every other module is paid for by every command.
CLIENT_MODULES = {"__future__", "_socket", "memsync", "memsync.entry", "memsync.serve", "memsync.serve.handoff", "os",
                  "stat", "_stat", "posixpath", "genericpath", "_collections_abc"}
SEALING_MODULES = {"memsync.util", "memsync.util.sealed", "ctypes", "_ctypes", "ctypes._endian", "struct", "_struct",
                   "types"}


def client_imports(args: list[str], cwd: Path, env: dict[str, str]) -> set[str]:
    """The modules a client process imports for `memsync ARGS`, less those of `python -S -c pass`
    (no site: the editable install's import hook would hide what the client itself imports)."""
    def listed(argv: list[str]) -> set[str]:
        proc = subprocess.run([sys.executable, "-S", "-X", "importtime", *argv], cwd=cwd, capture_output=True,
                              text=True, timeout=60, stdin=subprocess.DEVNULL,
                              env={**env, "PYTHONPATH": str(Path(__file__).parents[2])})
        assert proc.returncode == 0, proc.stderr[-2000:]
        return {ln.rsplit("|", 1)[1].strip() for ln in proc.stderr.splitlines() if ln.startswith("import time:")}

    return listed(["-c", "from memsync.entry import main; main()", *args]) - listed(["-c", "pass"])


def test_a_served_clients_imports_stay_lean(memory: Path, server: Server) -> None:
    log = client_imports(["log", "-n", "1"], memory, server.env())
    assert "memsync.serve.handoff" in log and log <= CLIENT_MODULES, sorted(log - CLIENT_MODULES)
    run = client_imports(["run", "--", sys.executable, "-c", f"import sys; {PARENTS}"], memory, server.env())
    assert run <= CLIENT_MODULES | SEALING_MODULES, sorted(run - CLIENT_MODULES - SEALING_MODULES)
    assert "memsync.util.sealed" in run


def _state_and_parent(pid: int | str) -> tuple[str, int] | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return fields[0], int(fields[1])


def alive(pid: int) -> bool:
    found = _state_and_parent(pid)
    return found is not None and found[0] != "Z"


def spare_of(server: Server, not_one_of: Collection[int] = ()) -> int:
    """The server's spare worker: its one live child that is a copy of it, other than those given,
    the same one for 1 s (start_server's probe was a client too: the worker it used is exiting,
    which on a loaded machine can take longer than the next spare's fork)."""
    command = Path(f"/proc/{server.proc.pid}/cmdline").read_bytes()
    deadline = time.monotonic() + 30
    seen: tuple[int, float] = (0, 0.0)
    while time.monotonic() < deadline:
        found = set()
        for entry in os.listdir("/proc"):
            info = _state_and_parent(entry) if entry.isdigit() and int(entry) not in not_one_of else None
            if info is not None and info[0] != "Z" and info[1] == server.proc.pid:
                with contextlib.suppress(OSError):
                    if Path(f"/proc/{entry}/cmdline").read_bytes() == command:
                        found.add(int(entry))
        if len(found) != 1:
            seen = (0, 0.0)
        elif found != {seen[0]}:
            seen = (found.pop(), time.monotonic())
        elif time.monotonic() - seen[1] >= 1.0:
            return seen[0]
        time.sleep(0.02)
    raise AssertionError("the server has no spare worker")


def test_each_command_gets_a_fresh_worker_forked_ahead_of_it(memory: Path, server: Server) -> None:
    """A spare worker waits for the next client (its fork is off the client's path), serves that
    one only, and exits when the server stops."""
    used: set[int] = set()
    for _ in range(3):
        spare = spare_of(server, used)
        proc = ms("run", "--", sys.executable, "-c", f"import sys; {PARENTS}", cwd=memory, env=server.env())
        assert proc.returncode == 0, proc.stderr
        worker = int(next(ln for ln in proc.stdout.splitlines() if ln.split()[0].isdigit()).split()[0])
        assert worker == spare and worker not in used  # the spare, and a new process each time
        used.add(worker)
    last = spare_of(server, used)
    stop(server)
    deadline = time.monotonic() + 10
    while alive(last):
        assert time.monotonic() < deadline, "the spare outlived its server"
        time.sleep(0.02)


def test_sigterm_to_the_client_reaches_the_run(memory: Path, server: Server) -> None:
    agent = ("import signal, sys, time\n"
             "signal.signal(signal.SIGTERM, lambda *a: (print('got-term', flush=True), sys.exit(5)))\n"
             "print('ready', flush=True)\ntime.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, "-m", "memsync", "run", "--run-id", "termed", "--",
                             sys.executable, "-c", agent], cwd=memory, env=server.env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline() == "ready\n"
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert "got-term" in out, err
    assert proc.returncode == 5, err
    assert "Memsync-Run-Id: termed" in git("log", "-1", "--format=%B", "memory/research", cwd=hub_path())


def test_no_server_or_a_dead_one_means_in_process(tmp_path: Path, memory: Path) -> None:
    agent = f"import sys; {PARENTS}"
    env = dict(os.environ, MEMSYNC_SERVER=str(tmp_path / "nothing.sock"))
    proc = ms("run", "--", sys.executable, "-c", agent, cwd=memory, env=env)
    assert proc.returncode == 0, proc.stderr
    srv = start_server(tmp_path / "dead.sock")
    srv.proc.kill()  # SIGKILL: the socket file stays, nobody listens
    srv.proc.wait()
    assert srv.socket.exists()
    proc = ms("run", "--", sys.executable, "-c", agent, cwd=memory, env=srv.env())
    assert proc.returncode == 0, proc.stderr
    assert worker_parent(proc) != srv.proc.pid
    # and a new server takes the dead one's place
    again = start_server(srv.socket)
    try:
        proc = ms("run", "--", sys.executable, "-c", agent, cwd=memory, env=again.env())
        assert worker_parent(proc) == again.proc.pid
    finally:
        stop(again)


def test_a_run_at_a_terminal_stays_in_process(memory: Path, server: Server) -> None:
    """The worker has no controlling terminal; an agent at a terminal needs one."""
    main, secondary = pty.openpty()
    try:
        proc = subprocess.run([sys.executable, "-m", "memsync", "run", "--", sys.executable, "-c",
                               f"import sys; {PARENTS}"], cwd=memory, env=server.env(), stdin=secondary,
                              capture_output=True, text=True, timeout=120)
    finally:
        os.close(main)
        os.close(secondary)
    assert proc.returncode == 0, proc.stderr
    assert worker_parent(proc) != server.proc.pid


def test_a_second_server_on_a_live_socket_is_refused(server: Server) -> None:
    proc = memsync_cmd("serve", "--socket", str(server.socket), cwd=server.socket.parent)
    assert proc.returncode == 6
    assert proc.stderr.startswith("error: a memsync server already listens on")
    assert memsync_cmd("status", cwd=server.socket.parent, env=server.env()).returncode == 3  # still served


def test_serve_bad_inputs(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("not a socket")
    proc = memsync_cmd("serve", "--socket", str(tmp_path / "file"), cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.startswith("error: ") and "Traceback" not in proc.stderr
    assert (tmp_path / "file").read_text() == "not a socket"
    long = tmp_path / ("x" * 120) / "s.sock"
    proc = memsync_cmd("serve", "--socket", str(long), cwd=tmp_path)
    assert proc.returncode == 2 and "bytes; Unix sockets allow 107" in proc.stderr
    proc = memsync_cmd("serve", "--idle", "-1", cwd=tmp_path)
    assert proc.returncode == 2


def test_idle_server_stops_and_removes_its_socket(tmp_path: Path) -> None:
    sock = tmp_path / "idle.sock"
    proc = subprocess.run([sys.executable, "-m", "memsync", "serve", "--socket", str(sock), "--idle", "0.5"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "no command for 0.5 s; stopping" in proc.stderr
    assert not sock.exists()


def test_changed_code_is_never_run_by_an_old_server(tmp_path: Path, memory: Path, server: Server) -> None:
    """An upgrade under a running server: the request runs in-process, and the server starts again
    with the new code (a new process on the same socket)."""
    import memsync.util.names as touched

    path = Path(touched.__file__)
    st = path.stat()
    try:
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
        proc = ms("run", "--", sys.executable, "-c", f"import sys; {PARENTS}", cwd=memory, env=server.env())
        assert proc.returncode == 0, proc.stderr
        assert worker_parent(proc) != server.proc.pid
        deadline = time.monotonic() + 60
        while True:  # the same pid (execv), listening again
            proc = ms("run", "--", sys.executable, "-c", f"import sys; {PARENTS}", cwd=memory,
                               env=server.env())
            if worker_parent(proc) == server.proc.pid or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert worker_parent(proc) == server.proc.pid
    finally:
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def test_credentials_stay_out_of_reach_of_a_served_agent(tmp_path: Path, memory: Path) -> None:
    """Attack: the agent reads the environment of every process of its uid it can find (its
    parents, the client, the server). The token reaches memsync (it is in the client's
    environment) but no /proc/PID/environ shows it."""
    token = "ghp_" + "Q" * 36
    srv = start_server(tmp_path / "cred.sock", env=dict(os.environ, MEMSYNC_TOKEN=token + "-server"))
    try:
        agent = ("import os, sys, pathlib\n"
                 "found = []\n"
                 "for pid in sys.argv[1:] + [str(os.getppid())]:\n"
                 "    try:\n"
                 "        if b'QQQQQQQQ' in pathlib.Path(f'/proc/{pid}/environ').read_bytes(): found.append(pid)\n"
                 "    except OSError:\n"
                 "        pass\n"
                 "print('found', found)\n")
        client = subprocess.Popen([sys.executable, "-m", "memsync", "run", "--", sys.executable, "-c", agent,
                                   str(srv.proc.pid)], cwd=memory,
                                  env=srv.env(MEMSYNC_TOKEN=token), stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
        out, err = client.communicate(timeout=120)
        assert client.returncode == 0, err
        assert "found []" in out, out
        assert token not in out + err
    finally:
        stop(srv)


def test_client_pid_environ_is_wiped_during_a_served_run(tmp_path: Path, memory: Path, server: Server) -> None:
    token = "ghp_" + "R" * 36
    agent = ("import os, sys, time, pathlib\n"
             "client = int(os.environ['CLIENT_PID_FILE'] and pathlib.Path(os.environ['CLIENT_PID_FILE']).read_text())\n"
             "try:\n"
             "    data = pathlib.Path(f'/proc/{client}/environ').read_bytes()\n"
             "except OSError as exc:\n"
             "    data = b''\n"
             "print('leak' if b'RRRRRRRR' in data else 'clean')\n")
    pid_file = tmp_path / "client.pid"
    wrapper = ("import os, sys, pathlib\n"
               f"pathlib.Path({str(pid_file)!r}).write_text(str(os.getpid()))\n"
               "os.execv(sys.executable, [sys.executable, '-m', 'memsync', *sys.argv[1:]])\n")
    proc = subprocess.run([sys.executable, "-c", wrapper, "run", "--", sys.executable, "-c", agent], cwd=memory,
                          env=server.env(MEMSYNC_TOKEN=token, CLIENT_PID_FILE=str(pid_file)),
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().endswith("clean"), proc.stdout


def test_clients_that_hang_up_do_not_stop_the_server(memory: Path, server: Server) -> None:
    for payload in (b"", b"\x00\x00", b"\xff\xff\xff\xff" + b"x" * 64, b"\x00\x00\x00\x05hello"):
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        probe.connect(str(server.socket))
        probe.sendall(payload)
        probe.close()
    proc = ms("run", "--", sys.executable, "-c", f"import sys; {PARENTS}", cwd=memory, env=server.env())
    assert proc.returncode == 0, proc.stderr
    assert worker_parent(proc) == server.proc.pid


def _ask(server: Server, argv: list[str], cwd: Path, go: bool) -> int:
    """A hand-made client: the request, the worker's pid back, then `go` or a hang-up."""
    import struct

    from memsync import __version__
    from memsync.serve import handoff

    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(str(server.socket))
    here = os.open(cwd, os.O_RDONLY | os.O_DIRECTORY)
    try:
        conn.sendmsg([handoff.encode(handoff._request(argv, __version__))],
                     [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("4i", here, 0, 1, 2))])
    finally:
        os.close(here)
    (n,) = struct.unpack("!I", handoff.recv_exact(conn, 4))
    reply = handoff.decode(handoff.recv_exact(conn, n))
    assert reply[0] == b"pid"
    if go:
        conn.sendall(handoff.GO)
        (n,) = struct.unpack("!I", handoff.recv_exact(conn, 4))
        assert handoff.decode(handoff.recv_exact(conn, n))[0] == b"exit"
    conn.close()
    return int(reply[1])


def test_a_client_that_gives_up_before_go_never_has_its_command_run(tmp_path: Path, memory: Path,
                                                                      server: Server) -> None:
    """A client that timed out waiting for the worker runs the command itself; the worker must
    then not run it too (a `run` would start the agent twice)."""
    marker = tmp_path / "ran"
    argv = ["run", "--", sys.executable, "-c", f"open({str(marker)!r}, 'a').write('x')"]
    worker = _ask(server, argv, memory, go=False)
    deadline = time.monotonic() + 10
    while Path(f"/proc/{worker}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not marker.exists()
    _ask(server, argv, memory, go=True)  # the same request, with go: it runs
    assert marker.read_text() == "x"


@pytest.mark.slow
def test_sigterm_taken_by_an_observers_thread_stops_the_server(memory: Path, server: Server) -> None:
    """A SIGTERM sent to the server's pid may be handed by the kernel to any of its threads that
    does not block it, the change trackers' observers included. Sent to one of them (kill() with
    that thread's id: the kernel tries that thread first), it stopped nothing on the old code: the
    main thread, asleep in select() with nothing to wait for, ran the handler only when the next
    client came (a CI run's `test_credentials_stay_out_of_reach_of_a_served_agent` failed so: its
    server did not stop within 30 s of the SIGTERM, and said nothing)."""
    served = memsync_cmd("status", cwd=memory, env=server.env())
    assert served.returncode == 0, served.stderr
    pid = server.proc.pid
    deadline = time.monotonic() + 30
    while len(others := [int(t) for t in os.listdir(f"/proc/{pid}/task") if int(t) != pid]) == 0:
        assert time.monotonic() < deadline, "no observer thread started"
        time.sleep(0.05)
    os.kill(others[0], signal.SIGTERM)
    try:
        _, said = server.proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        raise AssertionError("the server kept serving after its SIGTERM") from None
    assert "stopping (SIGTERM)" in said, said
    assert not server.socket.exists()


def test_sigterm_during_a_restart_stops_the_server(tmp_path: Path) -> None:
    """A SIGTERM that lands while the server starts again with changed code (after it declined a
    client, around its exec) stops it: it is never swallowed by the restart. Trials spread the
    signal over the window, from at once to after the new process is listening."""
    import memsync.util.names as touched

    path = Path(touched.__file__)
    st = path.stat()
    kept_serving: list[float] = []
    failed: list[str] = []
    try:
        for trial, delay in enumerate([0.0, 0.0002, 0.0005, 0.001, 0.002, 0.003, 0.005, 0.008, 0.05]):
            os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
            server = start_server(tmp_path / f"r{trial}.sock")
            os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
                probe.connect(str(server.socket))
                # a reset: start_server's own probe set off the restart first, ours was in its backlog
                with contextlib.suppress(ConnectionResetError):
                    assert b"declined" in probe.recv(64), "the changed code was not seen"
            time.sleep(delay)
            server.proc.send_signal(signal.SIGTERM)
            try:
                _, said = server.proc.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                kept_serving.append(delay)
                server.proc.kill()
                server.proc.communicate()
                continue
            if server.proc.returncode not in (0, -signal.SIGTERM) or "unexpected" in said:
                failed.append(f"{delay}: exit {server.proc.returncode}, {said.strip().splitlines()[-1:]}")
    finally:
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert not kept_serving, f"SIGTERM ignored at delays {kept_serving}"
    assert not failed, failed


def test_a_served_command_whose_worker_is_killed_says_so_and_exits_130(memory: Path, server: Server) -> None:
    """Not "a bug" (exit 1): the worker was stopped from outside (kill -9, an OOM kill)."""
    agent = "import os, time\nprint(os.getppid(), flush=True)\ntime.sleep(60)\n"
    proc = subprocess.Popen([sys.executable, "-m", "memsync", "run", "--run-id", "worker-killed", "--",
                             sys.executable, "-c", agent], cwd=memory, env=server.env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    worker = int(proc.stdout.readline())
    os.kill(worker, signal.SIGKILL)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert f"error: interrupted: the memsync server's worker (pid {worker}) ended before" in err
    assert "hint: run the command again" in err


def test_a_change_no_file_event_reports_does_not_stall_served_pulls(tmp_path: Path, memory: Path,
                                                                    server: Server) -> None:
    """summary.md is changed through a hard link outside the memory (inotify reports nothing) and
    the hub changed it too: the merge finds the file other than the server's tracker said. The old
    code rescanned with the tracker's hint every round and failed "files kept changing during the
    merge" although nothing wrote; now the retry scans the whole tree and the pull merges."""
    other = tmp_path / "other"
    assert memsync_cmd("clone", "research", str(other), cwd=tmp_path).returncode == 0
    os.link(memory / "summary.md", tmp_path / "outside.md")
    assert ms("push", cwd=memory, env=server.env()).returncode == 0  # the server now tracks the memory
    time.sleep(1.0)  # its watches are in place
    with open(tmp_path / "outside.md", "r+b") as fh:  # same inode, another folder: no event here
        fh.seek(0, 2)
        fh.write(b"through the link\n")
    write(other, "summary.md", "# Summary\n\nfirst line\nfrom the hub\n")
    assert memsync_cmd("push", cwd=other).returncode == 0
    pulled = ms("pull", cwd=memory, env=server.env())
    assert pulled.returncode == 0, pulled.stderr
    text = (memory / "summary.md").read_text()
    assert "through the link" in text, text
