"""Child processes for the benchmark: timed runs (wall time + peak RSS), a git daemon, a byte counter."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path


class BenchError(RuntimeError):
    pass


@dataclass(frozen=True)
class Sample:
    seconds: float
    rss_kb: int
    tree_kb: int = 0  # the largest sum over the command's processes alive at once (spawner.py)


class Spawner:
    """bench/spawner.py: starts the timed commands from a process that stays small.

    Linux carries a process's peak RSS over exec (the old address space's high-water mark), so a
    command spawned straight from the bench would report at least the bench's own peak RSS.
    """

    def __init__(self) -> None:
        script = Path(__file__).resolve().parent / "spawner.py"
        self._proc = subprocess.Popen([sys.executable, "-S", "-u", str(script)], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, text=True)

    def run(self, argv: list[str], cwd: Path, env: dict[str, str],
            tree: bool = False) -> tuple[float, int, int, str, int]:
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._proc.stdin.write(json.dumps({"argv": argv, "cwd": str(cwd), "env": env, "tree": tree}) + "\n")
        self._proc.stdin.flush()
        line = self._proc.stdout.readline()
        if not line:
            raise BenchError(f"the spawner exited ({self._proc.poll()})")
        got = json.loads(line)
        return (float(got["seconds"]), int(got["rss_kb"]), int(got["code"]), str(got["stderr"]),
                int(got.get("tree_kb", 0)))

    def own_peak_kb(self) -> int:
        """The spawner's own peak RSS: the floor of every figure it reports."""
        return vm_hwm_kb(self._proc.pid)

    def stop(self) -> None:
        if self._proc.stdin is not None:
            self._proc.stdin.close()
        try:
            self._proc.wait(5)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()


SPAWNER: list[Spawner] = []  # started by the bench before it grows; timed() uses it when present


def vm_hwm_kb(pid: int) -> int:
    """A live process's peak resident set (VmHWM), 0 if unknown."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def timed(cmd: list[str] | str, cwd: Path, env: dict[str, str], ok_codes: tuple[int, ...] = (0,),
          tree: bool = False) -> Sample:
    """Run one command (argv, or a shell line) and return its wall time and peak RSS.

    Peak RSS comes from wait4(): the largest resident set of the process and of every descendant
    it waited for, so a shell line reports its biggest git process. With a Spawner started, the
    command is spawned by it (see Spawner), else by this process; with `tree` (a Spawner only)
    the spawner also samples the sum over the command's live processes (Sample.tree_kb).
    """
    argv = ["sh", "-c", cmd] if isinstance(cmd, str) else cmd
    if SPAWNER:
        seconds, rss_kb, code, text, tree_kb = SPAWNER[0].run(argv, cwd, env, tree)
        if code not in ok_codes:
            shown = cmd if isinstance(cmd, str) else shlex.join(cmd)
            raise BenchError(f"`{shown}` in {cwd} exited {code}:\n{text}")
        return Sample(seconds, rss_kb, tree_kb)
    with tempfile.TemporaryFile() as errors:
        start = time.perf_counter()
        proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=errors)
        _, status, usage = os.wait4(proc.pid, 0)
        elapsed = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode not in ok_codes:
            errors.seek(0)
            text = errors.read().decode(errors="replace")[-2000:]
            shown = cmd if isinstance(cmd, str) else shlex.join(cmd)
            raise BenchError(f"`{shown}` in {cwd} exited {proc.returncode}:\n{text}")
    return Sample(elapsed, int(usage.ru_maxrss))


def run(cmd: list[str] | str, cwd: Path, env: dict[str, str]) -> str:
    """Untimed set-up step; fails loudly."""
    argv = ["sh", "-c", cmd] if isinstance(cmd, str) else cmd
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise BenchError(f"`{cmd}` in {cwd} exited {done.returncode}:\n{done.stderr[-2000:]}")
    return done.stdout


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_port(port: int, proc: subprocess.Popen[bytes], what: str) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise BenchError(f"{what} exited at start ({proc.returncode})")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise BenchError(f"{what} did not listen on {port}")


class GitDaemon:
    """`git daemon` serving every repository under `base` with push enabled (git://127.0.0.1)."""

    def __init__(self, base: Path, env: dict[str, str]) -> None:
        self.base = base
        self.port = free_port()
        self._proc = subprocess.Popen(
            ["git", "daemon", "--reuseaddr", "--listen=127.0.0.1", f"--port={self.port}",
             f"--base-path={base}", "--export-all", "--enable=receive-pack", str(base)],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _wait_port(self.port, self._proc, "git daemon")

    def url(self, path: Path, port: int | None = None) -> str:
        return f"git://127.0.0.1:{port or self.port}/{path.relative_to(self.base)}"

    def stop(self) -> None:
        self._proc.terminate()
        try:
            self._proc.wait(5)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()


class CountingProxy:
    """A TCP relay in front of the daemon that counts the bytes each side sends."""

    def __init__(self, target_port: int) -> None:
        self.target = target_port
        self.sent = 0  # client -> server: what a push uploads
        self.received = 0  # server -> client
        self._lock = threading.Lock()
        self._server = socket.socket()
        self._server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._server.bind(("127.0.0.1", 0))
        self._server.listen(16)
        self.port = int(self._server.getsockname()[1])
        threading.Thread(target=self._accept, daemon=True).start()

    def reset(self) -> None:
        with self._lock:
            self.sent = self.received = 0

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target))
            threading.Thread(target=self._pump, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, False), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, upload: bool) -> None:
        try:
            while True:
                chunk = src.recv(65536)
                if not chunk:
                    break
                with self._lock:
                    if upload:
                        self.sent += len(chunk)
                    else:
                        self.received += len(chunk)
                dst.sendall(chunk)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                dst.shutdown(socket.SHUT_WR)

    def stop(self) -> None:
        self._server.close()


def serve_available(memsync: list[str], env: dict[str, str]) -> bool:
    """Whether this memsync has `memsync serve` (its --help exits 0)."""
    done = subprocess.run([*memsync, "serve", "--help"], env=env, capture_output=True, check=False)
    return done.returncode == 0


class MemsyncServer:
    """`memsync serve --socket PATH` in the foreground, for one MEMSYNC_HOME; ready once PATH
    accepts connections, stopped with SIGTERM. Clients reach it with MEMSYNC_SERVER=PATH."""

    def __init__(self, memsync: list[str], sock: Path, env: dict[str, str], cwd: Path, log: Path) -> None:
        if len(os.fsencode(sock)) > 107:
            raise BenchError(f"socket path too long for AF_UNIX: {sock}")
        self.sock = sock
        self.log = log
        with open(log, "wb") as out:
            self._proc = subprocess.Popen([*memsync, "serve", "--socket", str(sock)], cwd=cwd, env=env,
                                          stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
        self.pid = self._proc.pid
        deadline = time.monotonic() + 30
        while True:
            if self._proc.poll() is not None:
                raise BenchError(f"memsync serve exited at start ({self._proc.returncode}): {self._log_tail()}")
            try:
                with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
                    probe.settimeout(0.5)
                    probe.connect(str(sock))
                break
            except OSError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise BenchError(f"memsync serve did not accept on {sock}: {self._log_tail()}") from None
                time.sleep(0.05)

    def _log_tail(self) -> str:
        try:
            return self.log.read_text(errors="replace")[-2000:]
        except OSError:
            return ""

    def env(self, base: dict[str, str]) -> dict[str, str]:
        return {**base, "MEMSYNC_SERVER": str(self.sock)}

    def reset_peak(self) -> None:
        """Start a new peak-RSS window (Linux: `5` into clear_refs resets VmHWM)."""
        with contextlib.suppress(OSError), open(f"/proc/{self.pid}/clear_refs", "w") as fh:
            fh.write("5")

    def peak_kb(self) -> int:
        """The server's peak resident set (VmHWM) since the last reset_peak(), 0 if unknown."""
        return vm_hwm_kb(self.pid)

    def stop(self) -> int | None:
        """SIGTERM and wait; SIGKILL after 10 s. Returns the exit code."""
        if self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        return self._proc.returncode
