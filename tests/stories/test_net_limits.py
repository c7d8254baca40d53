"""A stalled or hostile server never hangs or exhausts a sandbox (issue 21, part 8).

Against hostile servers on 127.0.0.1 (tests/helpers/hostile_servers.py) for git://, HTTP and SSH: a
server trickling bytes is cut by the minimum rate (MEMSYNC_LOW_SPEED_LIMIT over
MEMSYNC_LOW_SPEED_TIME) or the deadline (MEMSYNC_NET_DEADLINE), one flooding a ref advertisement
by MEMSYNC_MAX_ADVERTISEMENT, with the process's memory bounded; every verb that talks to a hub
ends with one `error:` line naming the limit, a `hint:` and exit 4, and nothing is lost.
Small limits are set through the environment so each case takes seconds.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import git, memsync_cmd, write
from tests.helpers.figures import Figures, figures
from tests.helpers.hostile_servers import HostileServer, ThrottlingProxy
from tests.helpers.servers import GitDaemon, SshGitServer, install_reject_hook, make_bare_hub

pytestmark = pytest.mark.server
__all__ = ["figures"]

FAST = {"MEMSYNC_CONNECT_TIMEOUT": "2", "MEMSYNC_IO_TIMEOUT": "2", "MEMSYNC_KNOWN_HOSTS": os.devnull}
BOUND = 12.0  # seconds: 2 s of limit, start-up, and a loaded 2-core machine
HANG = 25.0  # a command still running then hangs (the old code ran until killed)
MEMORY_BOUND_MB = 120  # memsync itself takes ~40 MB; 4 MiB of advertisement adds ~15 MB


def _env(**extra: str) -> dict[str, str]:
    return {**os.environ, **FAST, **extra}


def _run(args: list[str], cwd: Path, env: dict[str, str]) -> tuple[subprocess.CompletedProcess[str], float, int]:
    """(the finished process, seconds it took, its peak memory in MB, from its own address space)."""
    started = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "memsync", *args], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    output: dict[str, bytes] = {}
    readers = [threading.Thread(target=lambda n=n, f=f: output.__setitem__(n, f.read()), daemon=True)
               for n, f in (("out", proc.stdout), ("err", proc.stderr))]
    for reader in readers:
        reader.start()
    peak_kb = 0
    while True:
        peak_kb = max(peak_kb, _hwm_kb(proc.pid))
        pid, status, _usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() - started > HANG:
            proc.kill()
            os.wait4(proc.pid, 0)
            proc.returncode = -9  # reaped here, not by Popen
            pytest.fail(f"memsync {args[0]} still running after {HANG:.0f} s against a hostile server")
        time.sleep(0.02)
    took = time.monotonic() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    for reader in readers:
        reader.join()
    out, err = (output[n].decode(errors="replace") for n in ("out", "err"))
    # not usage.ru_maxrss: Linux carries the forking process's high-water mark (a long pytest
    # session's) over exec into the child's; VmHWM is the child's own address space's
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err), took, peak_kb // 1024


def _hwm_kb(pid: int) -> int:
    """The peak resident size of `pid`'s address space so far (0 once it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _one_clear_error(proc: subprocess.CompletedProcess[str], says: str, code: int = 4) -> None:
    assert proc.returncode == code, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and says in errors[0], proc.stderr
    assert "\nhint: " in proc.stderr, proc.stderr


def _memory(root: Path, url: str) -> Path:
    """A memory whose hub is `url`, with one committed-to-be file; nothing contacts the hub."""
    root.mkdir()
    assert memsync_cmd("init", "--name", "research", "--remote", url, cwd=root).returncode == 0
    write(root, "notes.md", "notes that must not be lost\n")
    return root


VERBS = ("list", "clone", "pull", "push", "run")


def _verb(verb: str, url: str, tmp_path: Path) -> tuple[list[str], Path]:
    if verb in ("list", "clone"):
        return ([verb, "--remote", url] if verb == "list" else [verb, "research", "--remote", url]), tmp_path
    root = _memory(tmp_path / "research", url)
    if verb == "run":
        return ["run", "--memory", f"research:{root}", "--", sys.executable, "-c", "pass"], tmp_path
    return [verb], root


@pytest.fixture
def hostile(request: pytest.FixtureRequest) -> Iterator[HostileServer]:
    protocol, behaviour, interval = request.param
    with HostileServer(protocol, behaviour, interval) as server:
        yield server


# -- a server that trickles ------------------------------------------------------------------------

@pytest.mark.parametrize("verb", VERBS)
@pytest.mark.parametrize("hostile", [("git", "trickle", 0.25), ("http", "trickle", 0.25)],
                         ids=["git", "http"], indirect=True)
def test_a_trickling_server_is_cut_by_the_minimum_rate(hostile: HostileServer, verb: str, tmp_path: Path,
                                                      figures: Figures) -> None:
    figures.add("network faults")
    args, cwd = _verb(verb, hostile.url(), tmp_path)
    proc, took, _ = _run(args, cwd, _env())
    _one_clear_error(proc, "below the minimum rate of 1,000 bytes/s")
    assert "MEMSYNC_LOW_SPEED_LIMIT" in proc.stderr
    assert took < BOUND, f"{verb} took {took:.1f} s"
    assert hostile.sent > 0  # it did trickle: this is not a silent server
    if verb in ("pull", "push", "run"):  # nothing lost
        assert (tmp_path / "research" / "notes.md").read_text() == "notes that must not be lost\n"
    if verb == "push":  # the version stays committed locally, for a later push
        assert "notes.md" in git("ls-tree", "-r", "--name-only", "HEAD", cwd=cwd)
    figures.add("network faults handled")


@pytest.mark.parametrize("hostile", [("git", "trickle", 0.02), ("http", "trickle", 0.02)],
                         ids=["git", "http"], indirect=True)
def test_the_deadline_ends_an_operation_that_never_finishes(hostile: HostileServer, tmp_path: Path,
                                                           figures: Figures) -> None:
    """50 bytes/s passes a minimum rate of 10: only the overall deadline stops it."""
    figures.add("network faults")
    env = _env(MEMSYNC_LOW_SPEED_LIMIT="10", MEMSYNC_NET_DEADLINE="2")
    proc, took, _ = _run(["list", "--remote", hostile.url()], tmp_path, env)
    _one_clear_error(proc, "the limit for one network operation (MEMSYNC_NET_DEADLINE=2)")
    assert 2 <= took < BOUND
    figures.add("network faults handled")


@pytest.mark.parametrize("behaviour", ["trickle", "flood"])
def test_https_trickle_and_flood(behaviour: str, tmp_path: Path, figures: Figures) -> None:
    """The same over TLS: the limits count the bytes on the wire, whatever they carry."""
    figures.add("network faults")
    with HostileServer("http", behaviour, 0.25, tls_dir=tmp_path) as server:
        env = _env(MEMSYNC_CA_BUNDLE=str(server.cert), MEMSYNC_MAX_ADVERTISEMENT=str(4 * 2**20))
        proc, took, peak = _run(["list", "--remote", server.url()], tmp_path, env)
    _one_clear_error(proc, "below the minimum rate" if behaviour == "trickle" else "more than 4 MiB before any data")
    assert took < BOUND and peak < MEMORY_BOUND_MB, (took, peak)
    figures.add("network faults handled")


def test_ssh_handshake_trickle_and_flood_end_in_time(tmp_path: Path, figures: Figures) -> None:
    """Before the key exchange, libssh2's own session timeout (MEMSYNC_IO_TIMEOUT) and banner
    limit hold; after it, see the sshd cases below."""
    for behaviour in ("trickle", "flood"):
        figures.add("network faults")
        with HostileServer("ssh", behaviour, 0.25) as server:
            proc, took, peak = _run(["list", "--remote", server.url()], tmp_path, _env())
        _one_clear_error(proc, server.url().split("//")[1].split("/")[0])
        assert took < BOUND and peak < MEMORY_BOUND_MB
        figures.add("network faults handled")


@pytest.mark.parametrize("verb", ["clone", "pull"])
def test_a_server_trickling_its_pack_is_cut_by_the_minimum_rate(git_daemon: GitDaemon, verb: str,
                                                               tmp_path: Path, figures: Figures) -> None:
    """The advertisement comes at once, the pack one byte at a time: libgit2 reports progress
    on every object received, which must not count as the process's own work."""
    figures.add("network faults")
    make_bare_hub(git_daemon.base_path / "hub.git")
    writer = _memory(tmp_path / "writer", git_daemon.url("hub.git"))
    write(writer, "big.md", os.urandom(20_000).hex())
    assert memsync_cmd("push", cwd=writer).returncode == 0
    with ThrottlingProxy(git_daemon.port) as proxy:
        if verb == "clone":
            args, cwd = ["clone", "research", "copy", "--remote", proxy.url()], tmp_path
        else:
            cwd = _memory(tmp_path / "research", proxy.url())
            args = ["pull"]
        proc, took, _ = _run(args, cwd, _env())
        assert proxy.trickled > 0  # the advertisement passed: this was the pack
    _one_clear_error(proc, "below the minimum rate of 1,000 bytes/s")
    assert took < BOUND, f"{verb} took {took:.1f} s"
    assert not (tmp_path / "copy").exists()
    figures.add("network faults handled")


def test_a_run_whose_push_trickles_keeps_its_work_for_the_next_push(git_daemon: GitDaemon, tmp_path: Path,
                                                                  figures: Figures) -> None:
    """The pull before the run passes (an empty hub: an advertisement only), the answer to the
    run's push trickles: exit 8 naming the limit, the work committed locally and delivered by the
    next `memsync push` to the same hub."""
    figures.add("network faults")
    hub = make_bare_hub(git_daemon.base_path / "hub.git")
    with ThrottlingProxy(git_daemon.port) as proxy:
        root = _memory(tmp_path / "research", proxy.url())
        agent = "import os, pathlib; pathlib.Path(os.environ['MEMSYNC_MEMORY_DIR'], 'run.md').write_text('ran')"
        proc, took, _ = _run(["run", "--memory", f"research:{root}", "--", sys.executable, "-c", agent],
                             tmp_path, _env())
    assert proc.returncode == 8, proc.stderr
    assert "below the minimum rate of 1,000 bytes/s" in proc.stderr and "Traceback" not in proc.stderr
    assert took < BOUND
    assert "run.md" in git("ls-tree", "-r", "--name-only", "HEAD", cwd=root)
    delivered = memsync_cmd("push", "--remote", git_daemon.url("hub.git"), cwd=root)
    assert delivered.returncode == 0, delivered.stderr
    assert "run.md" in git("ls-tree", "-r", "--name-only", "memory/research", cwd=hub)
    figures.add("network faults handled")


# -- a server that floods its ref advertisement -----------------------------------------------------

@pytest.mark.parametrize("verb", ["list", "clone", "push"])
@pytest.mark.parametrize("hostile", [("git", "flood", 0), ("http", "flood", 0)], ids=["git", "http"],
                         indirect=True)
def test_an_endless_ref_advertisement_is_cut_with_memory_bounded(hostile: HostileServer, verb: str,
                                                                tmp_path: Path, figures: Figures) -> None:
    figures.add("security attacks")
    args, cwd = _verb(verb, hostile.url(), tmp_path)
    proc, took, peak = _run(args, cwd, _env(MEMSYNC_MAX_ADVERTISEMENT=str(4 * 2**20)))
    _one_clear_error(proc, "the server sent more than 4 MiB before any data")
    assert "MEMSYNC_MAX_ADVERTISEMENT" in proc.stderr
    assert took < BOUND, f"{verb} took {took:.1f} s"
    assert 0 < peak < MEMORY_BOUND_MB, f"{verb} grew to {peak} MB"
    figures.add("security attacks refused")


# -- SSH after the handshake: sshd runs a hostile command instead of git -----------------------------

_HOSTILE_COMMAND = """\
import itertools, sys, time
sys.path.insert(0, {root!r})
from tests.helpers.hostile_servers import advertisement
out = sys.stdout.buffer
stream = advertisement()
if {flood!r}:
    while True:
        out.write(b"".join(itertools.islice(stream, 2000)))
        out.flush()
for byte in b"".join(itertools.islice(stream, 200)):
    out.write(bytes([byte]))
    out.flush()
    time.sleep(0.25)
"""


@pytest.mark.parametrize("behaviour", ["trickle", "flood"])
def test_ssh_server_whose_git_trickles_or_floods(ssh_server: SshGitServer, behaviour: str, tmp_path: Path,
                                                figures: Figures) -> None:
    figures.add("security attacks")
    script = tmp_path / "hostile-git.py"
    script.write_text(_HOSTILE_COMMAND.format(root=str(Path(__file__).resolve().parents[2]),
                                              flood=behaviour == "flood"))
    keys = ssh_server.authorized_keys.read_text().splitlines()
    ssh_server.authorized_keys.write_text("".join(f'command="{sys.executable} {script}" {k}\n' for k in keys))
    env = _env(MEMSYNC_KNOWN_HOSTS=str(ssh_server.write_known_hosts(tmp_path / "known_hosts")),
               MEMSYNC_SSH_KEY=str(ssh_server.client_key), MEMSYNC_MAX_ADVERTISEMENT=str(4 * 2**20))
    proc, took, peak = _run(["list", "--remote", ssh_server.url("/hub.git")], tmp_path, env)
    _one_clear_error(proc, "MEMSYNC_MAX_ADVERTISEMENT" if behaviour == "flood" else "below the minimum rate")
    assert took < BOUND and peak < MEMORY_BOUND_MB, (took, peak)
    figures.add("security attacks refused")


# -- caps on what a real server may make memsync hold -------------------------------------------------

def test_more_refs_than_max_refs_refuses_a_listing_and_warns_a_read(git_daemon: GitDaemon, tmp_path: Path,
                                                                     figures: Figures) -> None:
    figures.add("security attacks")
    hub = make_bare_hub(git_daemon.base_path / "hub.git")
    root = _memory(tmp_path / "research", git_daemon.url("hub.git"))
    assert memsync_cmd("push", cwd=root).returncode == 0
    tip = git("rev-parse", "memory/research", cwd=hub).strip()
    for i in range(5):
        git("update-ref", f"refs/heads/memory/extra-{i}", tip, cwd=hub)
    env = _env(MEMSYNC_MAX_REFS="4")
    proc, _, _ = _run(["list", "--remote", git_daemon.url("hub.git")], tmp_path, env)  # a listing: refused
    _one_clear_error(proc, "more than MEMSYNC_MAX_REFS (4)")
    # reads of the memory's own branch go on: through libgit2 (which lists every ref) with one
    # clear warning each; through protocol v2's prefixed listing, which never sees the others
    for v2, copy in (("0", tmp_path / "copy"), ("1", tmp_path / "copy-v2")):
        for args, cwd in ((["pull"], root), (["status"], root),
                          (["clone", "research", str(copy), "--remote", git_daemon.url("hub.git")], tmp_path)):
            proc, _, _ = _run(args, cwd, {**env, "MEMSYNC_V2_LISTING": v2})
            assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
            warned = [line for line in proc.stderr.splitlines() if "MEMSYNC_MAX_REFS" in line]
            assert len(warned) <= 1 and all(w.startswith("warning: ") for w in warned), proc.stderr
            assert v2 == "1" or "advertises 6 refs, more than MEMSYNC_MAX_REFS (4)" in warned[0], proc.stderr
        assert (copy / "notes.md").read_text() == "notes that must not be lost\n"
    assert memsync_cmd("list", "--remote", git_daemon.url("hub.git"), cwd=tmp_path).returncode == 0  # default cap
    figures.add("security attacks refused")


def test_an_endless_server_message_is_kept_short(git_daemon: GitDaemon, tmp_path: Path, figures: Figures) -> None:
    """A hook printing 80 MB of messages, then refusing: memsync keeps the last few lines, each cut
    short (it kept every line: ~2x the messages' size in memory), quotes them in one short error,
    and the commit stays local (exit 5); past MEMSYNC_MAX_ADVERTISEMENT it stops reading (exit 4)."""
    figures.add("security attacks")
    hub = make_bare_hub(git_daemon.base_path / "hub.git")
    hook = install_reject_hook(hub, "refused")
    hook.write_text("#!/bin/sh\nline=$(head -c 20000 /dev/zero | tr '\\0' x)\n"
                    "i=0; while [ $i -lt 4000 ]; do echo \"$line\" >&2; i=$((i+1)); done\nexit 1\n")
    root = _memory(tmp_path / "research", git_daemon.url("hub.git"))
    proc, _, peak = _run(["push"], root, _env(MEMSYNC_IO_TIMEOUT="20", MEMSYNC_MAX_ADVERTISEMENT=str(2**30)))
    _one_clear_error(proc, "refused the push", code=5)
    assert len(proc.stderr) < 4000, f"{len(proc.stderr)} characters of error"
    assert peak < MEMORY_BOUND_MB - 30, f"memsync grew to {peak} MB"
    assert "notes.md" in git("ls-tree", "-r", "--name-only", "HEAD", cwd=root)
    # with the default cap (32 MiB), reading stops there
    proc, _, peak = _run(["push"], root, _env(MEMSYNC_IO_TIMEOUT="20"))
    _one_clear_error(proc, "the server sent more than 32 MiB in answer to a push")
    assert peak < MEMORY_BOUND_MB - 30, f"memsync grew to {peak} MB"
    assert "notes.md" in git("ls-tree", "-r", "--name-only", "HEAD", cwd=root)
    figures.add("security attacks refused")


def test_ordinary_operations_pass_tight_limits(git_daemon: GitDaemon, tmp_path: Path) -> None:
    """A healthy server is never cut: the minimum rate judges only after MEMSYNC_LOW_SPEED_TIME."""
    make_bare_hub(git_daemon.base_path / "hub.git")
    url = git_daemon.url("hub.git")
    root = _memory(tmp_path / "research", url)
    write(root, "big.md", os.urandom(3_000_000).hex())
    env = _env(MEMSYNC_LOW_SPEED_TIME="1", MEMSYNC_NET_DEADLINE="30", MEMSYNC_MAX_ADVERTISEMENT="4096")
    for args, cwd in ((["push"], root), (["list", "--remote", url], tmp_path),
                      (["clone", "research", str(tmp_path / "copy"), "--remote", url], tmp_path), (["pull"], root)):
        proc, _, _ = _run(args, cwd, env)
        assert proc.returncode == 0, (args, proc.stderr)
    assert (tmp_path / "copy" / "big.md").stat().st_size == 6_000_000


@pytest.mark.parametrize("name,value", [("MEMSYNC_NET_DEADLINE", "soon"), ("MEMSYNC_LOW_SPEED_LIMIT", "-1"),
                                        ("MEMSYNC_LOW_SPEED_TIME", "nan"), ("MEMSYNC_MAX_ADVERTISEMENT", "1.5"),
                                        ("MEMSYNC_MAX_REFS", "0"), ("MEMSYNC_IO_TIMEOUT", "abc"),
                                        ("MEMSYNC_CONNECT_TIMEOUT", "-3")])
def test_a_bad_limit_is_a_usage_error(name: str, value: str, tmp_path: Path) -> None:
    proc, _, _ = _run(["list", "--remote", "git://127.0.0.1:9/hub.git"], tmp_path, _env(**{name: value}))
    _one_clear_error(proc, f"{name}={value!r}", code=2)


def test_a_socket_counts_for_one_operation_only() -> None:
    """Two operations of one process on one hub (a run's checkpoints of two memories): a socket
    is counted, and cut, by the operation that saw it first, never by both."""
    from memsync.git import netlimits

    with HostileServer("git", "flood") as server, netlimits.watch(server.port, "hub", "cannot list") as first, \
            netlimits.watch(server.port, "hub", "cannot list") as second, \
            socket.create_connection(("127.0.0.1", server.port)) as conn:
        conn.sendall(b"0032git-upload-pack /hub.git\0host=127.0.0.1\0")
        received = 0
        while received < 2_000_000:
            received += len(conn.recv(65536))
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and not (first.advertisement_bytes or second.advertisement_bytes):
            time.sleep(0.05)
        time.sleep(3 * netlimits.TICK)
        counted = [first.advertisement_bytes, second.advertisement_bytes]
    assert sorted(c > 0 for c in counted) == [False, True], counted
