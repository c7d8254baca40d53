"""The agent inside `memsync run` tries to read the operator's credentials by every route it has.

Each route is tried by a small Python script run as the command; it prints what it found as JSON.
A route that yields a credential is an attack that got through.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import git, hub_tree, memsync_cmd, write
from tests.helpers.figures import Figures, figures
from tests.helpers.server_fixtures import HTTP_USER
from tests.helpers.servers import HttpGitServer, make_bare_hub

__all__ = ["figures"]

pytestmark = pytest.mark.attack

PASSPHRASE = "pass-" + "Zq8vR2" * 4  # built at run time, fake

PROBE = r"""
import ctypes, json, os, subprocess, sys
from pathlib import Path

secrets = [s[::-1].encode() for s in json.loads(sys.argv[1])]  # given reversed: argv is a route too
ppid = os.getppid()
found = {}

def has(data):
    return any(s in data for s in secrets)

def attempt(route, read):
    try:
        found[route] = "FOUND" if has(read()) else "clean"
    except OSError as exc:
        found[route] = "denied: " + type(exc).__name__

attempt("environment", lambda: "\0".join(f"{k}={v}" for k, v in os.environ.items()).encode())
found["credential variables"] = sorted(k for k in os.environ if k in (
    "MEMSYNC_TOKEN", "MEMSYNC_USER", "MEMSYNC_SSH_KEY", "MEMSYNC_SSH_PASSPHRASE", "SSH_AUTH_SOCK"))
attempt("MEMSYNC_REMOTE", lambda: os.environ.get("MEMSYNC_REMOTE", "").encode())
attempt("/proc/PPID/environ", lambda: Path(f"/proc/{ppid}/environ").read_bytes())
attempt("/proc/PPID/cmdline", lambda: Path(f"/proc/{ppid}/cmdline").read_bytes())

def memory_of_parent():
    chunks = []
    with open(f"/proc/{ppid}/maps") as maps, open(f"/proc/{ppid}/mem", "rb", 0) as mem:
        for line in maps:
            span, perms = line.split()[:2]
            if not perms.startswith("rw"):
                continue
            start, end = (int(x, 16) for x in span.split("-"))
            try:
                mem.seek(start)
                chunks.append(mem.read(min(end - start, 1 << 26)))
            except (OSError, ValueError, OverflowError):
                continue
    return b"".join(chunks)

attempt("/proc/PPID/mem", memory_of_parent)
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
if libc.ptrace(0x4206, ppid, None, None) == 0:  # PTRACE_SEIZE: attaches without stopping it
    found["ptrace attach"] = "ATTACHED"  # released when this process exits
else:
    found["ptrace attach"] = "denied: errno %d" % ctypes.get_errno()

def files_under(*roots):
    data = []
    for root in roots:
        for here, _, names in os.walk(root):
            for name in names:
                try:
                    data.append(Path(here, name).read_bytes())
                except OSError:
                    continue
    return b"\0".join(data)

memory = Path(os.environ["MEMSYNC_MEMORY_DIR"])
attempt("memory .git/config", lambda: (memory / ".git" / "config").read_bytes())
attempt("files under the memory and MEMSYNC_HOME",
        lambda: files_under(memory, os.environ["MEMSYNC_HOME"]))
extra = [p for p in json.loads(sys.argv[2])]
attempt("the operator's credential files", lambda: b"".join(Path(p).read_bytes() for p in extra))
host = json.loads(sys.argv[3])
if host:
    helper = subprocess.run(["git", "credential", "fill"], input=f"protocol=http\nhost={host}\n\n",
                            capture_output=True, cwd=memory, text=True,
                            env=dict(os.environ, GIT_TERMINAL_PROMPT="0", GIT_ASKPASS="", SSH_ASKPASS=""))
    found["git credential fill"] = "FOUND" if has(helper.stdout.encode()) else "clean"
(memory / "probe.json").write_text(json.dumps(found, indent=1, sort_keys=True))
print(json.dumps(found))
"""


def _needles(token: str) -> str:
    return json.dumps([token[::-1], PASSPHRASE[::-1]])


def _leaks(found: dict[str, object]) -> dict[str, object]:
    return {route: outcome for route, outcome in found.items()
            if outcome in ("FOUND", "ATTACHED") or (route == "credential variables" and outcome)}


def _count(figures: Figures, found: dict[str, object], leaks: dict[str, object]) -> None:
    for route in found:
        figures.add("agent attacks")
        if route not in leaks:
            figures.add("agent attacks stopped")


def _probe(stdout: str) -> dict[str, object]:
    line = [x for x in stdout.splitlines() if x.startswith("{")][-1]
    return dict(json.loads(line))


@pytest.fixture
def token_hub(tmp_path: Path) -> Iterator[HttpGitServer]:
    root = tmp_path / "http-root"
    root.mkdir()
    server = HttpGitServer(root, user=HTTP_USER, token="tok" + "9fQ2xL7w" * 4, tls=False)
    with server:
        make_bare_hub(root / "hub.git")
        yield server
    server.cleanup()


def test_the_agent_finds_no_credential_by_any_route(tmp_path: Path, token_hub: HttpGitServer, figures: Figures) -> None:
    """Same uid as memsync. Routes: environment, MEMSYNC_REMOTE, /proc/$PPID/environ and
    cmdline, the memory's .git/config and every readable file under it and MEMSYNC_HOME, `git
    credential fill`. (/proc/$PPID/mem and ptrace are denied only between different uids for root,
    who holds CAP_SYS_PTRACE: see the --as-user test and the same-uid test as `nobody`.)"""
    token = token_hub.token
    key = write(tmp_path, "keys/id_test", "-----BEGIN OPENSSH PRIVATE KEY-----\nfake\n")
    url = token_hub.url("hub.git")
    env = dict(os.environ, MEMSYNC_TOKEN=token, MEMSYNC_USER=HTTP_USER, MEMSYNC_SSH_KEY=str(key),
               MEMSYNC_SSH_PASSPHRASE=PASSPHRASE, SSH_AUTH_SOCK=str(tmp_path / "agent.sock"),
               MEMSYNC_REMOTE=url.replace("://", f"://{HTTP_USER}:{token}@"))
    src = tmp_path / "src"
    src.mkdir()
    assert memsync_cmd("init", "--name", "research", cwd=src, env=env).returncode == 0
    write(src, "a.md", "a\n")
    assert memsync_cmd("push", cwd=src, env=env).returncode == 0, "seeding the hub failed"
    host = url.split("://", 1)[1].split("/", 1)[0]
    proc = memsync_cmd("run", "--memory", "research:mem", "--run-id", "probe-1", "--", sys.executable, "-c", PROBE,
                       _needles(token), json.dumps([]), json.dumps(host), cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    found = _probe(proc.stdout)
    leaks = {k: v for k, v in _leaks(found).items() if k not in ("/proc/PPID/mem", "ptrace attach")
             or os.geteuid() != 0}
    _count(figures, {k: v for k, v in found.items() if k not in ("/proc/PPID/mem", "ptrace attach")}, leaks)
    assert not leaks, found
    assert token not in proc.stderr + proc.stdout
    # the credentials still worked for memsync's own final push
    assert b'"environment": "clean"' in hub_tree("memory/research", token_hub.project_root / "hub.git")["probe.json"]
    assert "environment" in found and "git credential fill" in found


def test_ssh_agent_is_kept_only_on_request(memory: Path, tmp_path: Path) -> None:
    sock = str(tmp_path / "agent.sock")
    env = dict(os.environ, SSH_AUTH_SOCK=sock)
    show = [sys.executable, "-c", "import os; print('SOCK=' + os.environ.get('SSH_AUTH_SOCK', ''))"]
    plain = memsync_cmd("run", "--", *show, cwd=memory, env=env)
    kept = memsync_cmd("run", "--keep-ssh-agent", "--", *show, cwd=memory, env=env)
    assert plain.returncode == 0 and kept.returncode == 0, plain.stderr + kept.stderr
    assert "SOCK=\n" in plain.stdout
    assert f"SOCK={sock}\n" in kept.stdout


def test_a_credential_in_run_remote_is_refused(memory: Path) -> None:
    token = "tok" + "Q4w" * 8
    proc = memsync_cmd("run", "--remote", f"https://user:{token}@example.invalid/hub.git", "--", "true", cwd=memory)
    assert proc.returncode == 2
    assert token not in proc.stderr
    assert "error: --remote https://user:***@example.invalid/hub.git: a credential" in proc.stderr
    assert "hint: set MEMSYNC_TOKEN" in proc.stderr


# -- another uid -----------------------------------------------------------------------------------

def _nobody_python(user: str = "nobody") -> list[str] | None:
    """A Python `user` can start with memsync importable, or None (then the test is skipped)."""
    if os.geteuid() != 0:
        return None
    site = next(Path(sys.prefix, "lib").glob("python3*/site-packages"), None)
    repo = Path(__file__).resolve().parents[2]
    for python in (sys.executable, shutil.which(f"python3.{sys.version_info.minor}"), "/usr/bin/python3"):
        if not python:
            continue
        env = {"PYTHONPATH": f"{site}:{repo}", "PATH": os.environ.get("PATH", "")}
        try:
            ok = subprocess.run([python, "-c", "import memsync.cli.app, pygit2"], user=user, env=env,
                                capture_output=True, check=False, cwd="/")
        except OSError:
            continue
        if ok.returncode == 0:
            return [python]
    return None


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A directory other users can enter (pytest's tmp_path is private to root)."""
    base = Path(tempfile.mkdtemp(prefix="memsync-uid-"))
    base.chmod(0o755)
    yield base
    shutil.rmtree(base, ignore_errors=True)


def test_memsync_as_a_plain_user_is_not_readable_by_its_own_agent(open_dir: Path, figures: Figures) -> None:
    """memsync runs as `nobody`, the agent too (the same uid): the non-dumpable process keeps
    /proc/$PPID/environ, /proc/$PPID/mem and ptrace closed to it."""
    python = _nobody_python()
    if python is None:
        pytest.skip("needs root and a Python that user nobody can run with memsync importable")
    nobody = pwd.getpwnam("nobody")
    os.chown(open_dir, nobody.pw_uid, nobody.pw_gid)
    site = next(Path(sys.prefix, "lib").glob("python3*/site-packages"))
    token = "tok" + "Hh3kP0" * 5
    env = {"PATH": os.environ["PATH"], "HOME": str(open_dir), "MEMSYNC_HOME": str(open_dir / "mh"),
           "PYTHONPATH": f"{site}:{Path(__file__).resolve().parents[2]}", "GIT_CONFIG_NOSYSTEM": "1",
           "MEMSYNC_TOKEN": token, "MEMSYNC_SSH_PASSPHRASE": PASSPHRASE}

    def as_nobody(*args: str, cwd: Path = open_dir) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*python, "-m", "memsync", *args], user="nobody", group=nobody.pw_gid,
                              extra_groups=[], env=env, cwd=cwd, capture_output=True, text=True,
                              timeout=120, check=False)

    (open_dir / "mem").mkdir()
    os.chown(open_dir / "mem", nobody.pw_uid, nobody.pw_gid)
    assert as_nobody("init", "--name", "research", cwd=open_dir / "mem").returncode == 0
    assert as_nobody("push", cwd=open_dir / "mem").returncode == 0

    refused = as_nobody("run", "--as-user", "nobody", "--memory", "research:mem", "--", "true")
    assert refused.returncode == 2 and "only root can run the command as another user" in refused.stderr
    proc = as_nobody("run", "--memory", "research:mem", "--", python[0], "-c", PROBE,
                     _needles(token), "[]", "null")
    assert proc.returncode == 0, proc.stderr
    found = _probe(proc.stdout)
    leaks = _leaks(found)
    _count(figures, found, leaks)
    assert not leaks, found
    assert str(found["/proc/PPID/environ"]).startswith("denied") and str(found["/proc/PPID/mem"]).startswith("denied")
    assert str(found["ptrace attach"]).startswith("denied")


def test_as_user_keeps_the_operators_files_and_process_out_of_reach(open_dir: Path, tmp_path: Path,
                                                                    figures: Figures,
                                                                    agent_user: pwd.struct_passwd) -> None:
    python = _nobody_python(agent_user.pw_name)  # a user of its own: memsync ends its processes after the run
    if python is None:
        pytest.skip("needs root and a Python that the agent's user can run")
    token = "tok" + "Mm5nB1" * 5
    creds = write(open_dir, "operator/credentials", f"{token}\n")
    creds.chmod(0o600)
    netrc = write(open_dir, "operator/netrc", f"machine example.invalid login x password {PASSPHRASE}\n")
    netrc.chmod(0o600)
    env = dict(os.environ, MEMSYNC_TOKEN=token, NETRC=str(netrc))
    work = open_dir / "work"
    work.mkdir()
    src = tmp_path / "src"
    src.mkdir()
    for name in ("research", "refs-mem"):
        (src / name).mkdir()
        assert memsync_cmd("init", "--name", name, cwd=src / name, env=env).returncode == 0
        write(src / name, "base.md", "base\n")
        assert memsync_cmd("push", cwd=src / name, env=env).returncode == 0
    script = PROBE + ("\nfor target in ('new.md', 'base.md', '../ref/base.md', '../ref/new.md'):\n"
                      "    try:\n"
                      "        (memory / target).write_text('agent\\n')\n"
                      "        print('wrote', target)\n"
                      "    except OSError:\n"
                      "        print('denied', target)\n"
                      "for own in ('.git', '.vm0'):\n"
                      "    try:\n"
                      "        (memory / own).rename(memory / (own + '-moved'))\n"
                      "        print('moved', own)\n"
                      "    except OSError:\n"
                      "        print('kept', own)\n")
    proc = memsync_cmd("run", "--as-user", agent_user.pw_name, "--memory", "research:mem",
                       "--memory", "refs-mem:ref:ro", "--run-id", "as-nobody", "--", python[0], "-c", script,
                       _needles(token), json.dumps([str(creds), str(netrc)]), "null", cwd=work, env=env)
    assert proc.returncode == 0, proc.stderr
    found = _probe(proc.stdout)
    leaks = _leaks(found)
    _count(figures, found, leaks)
    assert not leaks, found
    for route in ("/proc/PPID/environ", "/proc/PPID/mem", "the operator's credential files"):
        assert str(found[route]).startswith("denied"), (route, found)
    assert "wrote new.md" in proc.stdout and "wrote base.md" in proc.stdout
    assert "kept .git" in proc.stdout and "kept .vm0" in proc.stdout  # memsync's own, never the command's
    assert "denied ../ref/base.md" in proc.stdout and "denied ../ref/new.md" in proc.stdout
    assert hub_tree("memory/research")["new.md"] == b"agent\n"
    assert (work / "mem" / "new.md").stat().st_uid == 0  # handed back to the operator
    assert (work / "mem").stat().st_gid == 0 and not (work / "mem").stat().st_mode & 0o1020
    assert git("status", "--porcelain", cwd=work / "ref") == ""


def test_as_user_refuses_an_unknown_user(memory: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("the unknown-user check runs after the root check")
    proc = memsync_cmd("run", "--as-user", "no-such-user-x", "--", "true", cwd=memory)
    assert proc.returncode == 2
    assert "error: --as-user no-such-user-x: no such user" in proc.stderr
