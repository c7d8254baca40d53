"""`memsync run`, as a separate process: exit codes, attribution, checkpoints, signals, failures."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memsync import api
from tests.conftest import Cli, git, hub_path, hub_tree, memsync_cmd, write

AGENT = """\
import os, pathlib, sys
mem = pathlib.Path(os.environ["MEMSYNC_MEMORY_DIR"])
rid = os.environ["MEMSYNC_RUN_ID"]
(mem / "runs").mkdir(exist_ok=True)
(mem / "runs" / f"{rid}.md").write_text(f"notes of {rid}\\n")
with open(mem / "log.md", "a") as fh:
    fh.write(f"- {rid}\\n")
tmp = mem / ".tmp.summary.md"
tmp.write_text((mem / "summary.md").read_text() + f"summary line from {rid}\\n")
os.replace(tmp, mem / "summary.md")
sys.exit(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
"""


@pytest.fixture
def agent(tmp_path: Path) -> Path:
    path = tmp_path / "agent.py"
    path.write_text(AGENT)
    return path


def trailers(rev: str, cwd: Path) -> dict[str, str]:
    body = git("log", "-1", "--format=%B", rev, cwd=cwd)
    parsed = subprocess.run(["git", "interpret-trailers", "--parse"], input=body, capture_output=True,
                            text=True, check=True).stdout
    return dict(line.split(": ", 1) for line in parsed.splitlines())


def commits(cwd: Path, rev: str = "memory/research") -> int:
    return int(git("rev-list", "--count", rev, cwd=cwd))


@pytest.mark.parametrize("code", [0, 1, 3])
@pytest.mark.slow
def test_exit_code_passes_through_and_failure_still_commits(memory: Path, agent: Path, code: int) -> None:
    before = commits(hub_path())
    proc = memsync_cmd("run", "--run-id", f"exit-{code}", "--", sys.executable, str(agent), str(code), cwd=memory)
    assert proc.returncode == code, proc.stderr
    assert commits(hub_path()) == before + 1
    assert hub_tree()[f"runs/exit-{code}.md"] == f"notes of exit-{code}\n".encode()
    t = trailers("memory/research", hub_path())
    assert t["Memsync-Actor"] == "run" and t["Memsync-Run-Id"] == f"exit-{code}"
    assert t["Memsync-Exit-Code"] == str(code)
    assert "agent.py" in t["Memsync-Command"] and t["Memsync-Host"] and t["Memsync-Duration"].endswith("s")
    author = git("log", "-1", "--format=%an", "memory/research", cwd=hub_path()).strip()
    assert author == f"memsync run exit-{code}"


@pytest.mark.slow
def test_killed_child_gives_137(memory: Path) -> None:
    proc = memsync_cmd("run", "--", "sh", "-c", "echo partial > partial.md; kill -9 $$", cwd=memory)
    assert proc.returncode == 137, proc.stderr
    assert hub_tree()["partial.md"] == b"partial\n"
    assert trailers("memory/research", hub_path())["Memsync-Exit-Code"] == "137"


@pytest.mark.slow
def test_run_that_changes_nothing_leaves_a_record(memory: Path) -> None:
    before = commits(hub_path())
    proc = memsync_cmd("run", "--run-id", "idle-1", "--", "cat", "summary.md", cwd=memory)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "# Summary\n\nfirst line\n"
    assert commits(hub_path()) == before + 1  # an empty commit: the record of the run
    assert git("diff", "--stat", "memory/research~1", "memory/research", cwd=hub_path()) == ""
    found = trailers("memory/research", hub_path())
    assert found["Memsync-Run-Id"] == "idle-1"
    assert found["Memsync-Exit-Code"] == "0"
    assert "no changes, run recorded" in proc.stderr


def test_command_that_cannot_start_is_recorded(memory: Path) -> None:
    proc = memsync_cmd("run", "--run-id", "missing-1", "--", "no-such-program-xyz", cwd=memory)
    assert proc.returncode == 127, proc.stderr
    found = trailers("memory/research", hub_path())
    assert (found["Memsync-Run-Id"], found["Memsync-Exit-Code"]) == ("missing-1", "127")


@pytest.mark.slow
def test_failed_run_quiet_before_exit_has_its_exit_code_on_the_hub(memory: Path) -> None:
    """The checkpoint saves every file; the run then fails after a quiet spell. Its exit code
    was nowhere before (no final commit was made); now the closing version carries it."""
    script = "echo partial > notes.md; sleep 2.5; exit 3"
    proc = memsync_cmd("run", "--run-id", "quiet-3", "--checkpoint", "1", "--", "sh", "-c", script, cwd=memory,
                       env=dict(os.environ, MEMSYNC_QUIET="0.3", MEMSYNC_SETTLE="0.1"))
    assert proc.returncode == 3, proc.stderr
    assert hub_tree()["notes.md"] == b"partial\n"
    found = trailers("memory/research", hub_path())
    assert found["Memsync-Exit-Code"] == "3"
    assert found["Memsync-Checkpoints"] == "1"
    assert "Memsync-Duration" in found
    status = memsync_cmd("status", "--json", cwd=memory)
    assert status.returncode == 0, status.stderr
    import json

    last = json.loads(status.stdout)["last_run"]
    assert (last["run_id"], last["exit_code"]) == ("quiet-3", 3)
    assert "exit 3" in memsync_cmd("status", cwd=memory).stdout
    lines = memsync_cmd("log", "--run", "quiet-3", cwd=memory).stdout.splitlines()
    assert "run quiet-3 end" in lines[0] and "exit 3" in lines[0]
    assert "run quiet-3 checkpoint 1" in lines[-1]
    entries = json.loads(memsync_cmd("log", "--run", "quiet-3", "--json", cwd=memory).stdout)["versions"]
    assert [(e["end"], e["checkpoint"]) for e in entries] == [(True, None), (False, 1)]


@pytest.mark.slow
def test_environment_of_the_command(memory: Path, tmp_path: Path) -> None:
    other = tmp_path / "mnt" / "ref-mem"
    setup = tmp_path / "ref-src"
    setup.mkdir()
    assert memsync_cmd("init", "--name", "ref-mem", cwd=setup).returncode == 0
    write(setup, "a.md", "reference\n")
    assert memsync_cmd("push", cwd=setup).returncode == 0
    script = "import os,json; print(json.dumps({k: v for k, v in os.environ.items() if k.startswith('MEMSYNC_')}))"
    proc = memsync_cmd("run", "--run-id", "env-check", "--memory", f"research:{memory}",
                       "--memory", f"ref-mem:{other}:ro", "--", sys.executable, "-c", script, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    import json

    env = json.loads(proc.stdout)
    assert env["MEMSYNC_RUN_ID"] == "env-check"
    assert env["MEMSYNC_MEMORY_DIR"] == str(memory)
    assert env["MEMSYNC_MEMORY_RESEARCH_DIR"] == str(memory)
    assert env["MEMSYNC_MEMORY_REF_MEM_DIR"] == str(other)


@pytest.mark.slow
def test_generated_run_ids_are_sortable_and_unique(memory: Path) -> None:
    ids = []
    for _ in range(3):
        proc = memsync_cmd("run", "--", "sh", "-c", 'echo "$MEMSYNC_RUN_ID" >> ids.txt', cwd=memory)
        assert proc.returncode == 0, proc.stderr
    ids = (memory / "ids.txt").read_text().split()
    assert len(set(ids)) == 3 and ids == sorted(ids)
    assert all(len(i) == len("20261122T101500123Z-3f9a1c0b7e2d") and i[8] == "T" for i in ids)


@pytest.mark.parametrize("bad", ["../escape", "a/b", "", "x" * 200, "-lead"])
@pytest.mark.slow
def test_bad_run_id_is_refused_before_running(memory: Path, bad: str) -> None:
    proc = memsync_cmd("run", "--run-id", bad, "--", "touch", "ran.md", cwd=memory)
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: invalid run id") and "hint:" in proc.stderr
    assert not (memory / "ran.md").exists()


def test_missing_command_and_unknown_program(memory: Path) -> None:
    proc = memsync_cmd("run", cwd=memory)
    assert proc.returncode == 2 and "error: no command to run" in proc.stderr
    proc = memsync_cmd("run", "--", "no-such-program-xyz", cwd=memory)
    assert proc.returncode == 127 and "cannot start 'no-such-program-xyz'" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.slow
def test_two_concurrent_runs_lose_nothing(memory: Path, tmp_path: Path, agent: Path) -> None:
    write(memory, ".gitattributes", "log.md merge=union\n")
    write(memory, "log.md", "# log\n")
    assert memsync_cmd("push", cwd=memory).returncode == 0
    procs = []
    for n in (1, 2):
        sandbox = tmp_path / f"sandbox{n}"
        sandbox.mkdir()
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "memsync", "run", "--run-id", f"both-{n}", "--checkpoint", "0",
             "--memory", "research", "--", sys.executable, str(agent)],
            cwd=sandbox, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    tree = hub_tree()
    assert tree["runs/both-1.md"] == b"notes of both-1\n" and tree["runs/both-2.md"] == b"notes of both-2\n"
    log = tree["log.md"].decode()
    assert "- both-1\n" in log and "- both-2\n" in log
    summaries = b"".join(v for k, v in tree.items() if k.startswith("summary"))
    assert b"summary line from both-1" in summaries and b"summary line from both-2" in summaries
    history = git("log", "--format=%(trailers:key=Memsync-Run-Id,valueonly)", "memory/research", cwd=hub_path())
    assert "both-1" in history and "both-2" in history
    git("fsck", "--strict", cwd=hub_path())


@pytest.mark.slow
def test_eight_memories_one_read_only(tmp_path: Path) -> None:
    names = [f"mem-{i}" for i in range(8)]
    for name in names:
        src = tmp_path / "src" / name
        src.mkdir(parents=True)
        assert memsync_cmd("init", cwd=src).returncode == 0
        write(src, "base.md", f"{name}\n")
        assert memsync_cmd("push", cwd=src).returncode == 0
    ro = names[-1]
    before_ro = git("rev-parse", f"memory/{ro}", cwd=hub_path())
    args = []
    for name in names:
        args += ["--memory", f"{name}:mnt/{name}" + (":ro" if name == ro else "")]
    script = ("import os,pathlib\n"
              "for k, v in os.environ.items():\n"
              "    if k.startswith('MEMSYNC_MEMORY_') and k.endswith('_DIR'):\n"
              "        p = pathlib.Path(v)\n"
              "        (p / 'touched.md').write_text(k + '\\n')\n"
              "        try:\n"
              "            (p / 'base.md').write_text('overwritten\\n')\n"
              "        except PermissionError:\n"
              "            print('denied', p.name)\n")
    work = tmp_path / "work"
    work.mkdir()
    proc = memsync_cmd("run", *args, "--run-id", "eight", "--", sys.executable, "-c", script, cwd=work)
    assert proc.returncode == 9, proc.stderr  # the command changed a read-only memory
    assert f"denied {ro}" in proc.stdout or os.geteuid() == 0  # root ignores file modes
    for name in names[:-1]:
        tree = hub_tree(f"memory/{name}")
        assert tree["touched.md"].startswith(b"MEMSYNC_MEMORY_MEM_")
        assert tree["base.md"] == b"overwritten\n"
    assert git("rev-parse", f"memory/{ro}", cwd=hub_path()) == before_ro
    assert f"read-only memory '{ro}' was changed during the run (not saved, not pushed)" in proc.stderr
    assert "touched.md" in proc.stderr
    assert not (work / "mnt" / ro / "touched.md").exists()  # undone, and kept aside outside the memory
    kept = Path(os.environ["MEMSYNC_HOME"]) / "runs" / "eight" / "ro" / ro
    assert (kept / "touched.md").read_text() == f"MEMSYNC_MEMORY_{ro.upper().replace('-', '_')}_DIR\n"
    assert (work / "mnt" / ro / "base.md").read_text() == f"{ro}\n"
    assert os.access(work / "mnt" / ro / "base.md", os.W_OK)  # permissions restored
    assert git("status", "--porcelain", cwd=work / "mnt" / ro) == ""


@pytest.mark.slow
def test_remote_down_before_the_run(tmp_path: Path) -> None:
    hub = tmp_path / "own-hub.git"
    git("init", "-q", "--bare", str(hub), cwd=tmp_path)
    root = tmp_path / "research"
    root.mkdir()
    assert memsync_cmd("init", "--remote", str(hub), cwd=root).returncode == 0
    write(root, "a.md", "a\n")
    assert memsync_cmd("push", cwd=root).returncode == 0
    hub.rename(hub.with_name("own-hub.moved"))
    started = time.monotonic()
    proc = memsync_cmd("run", "--", "touch", "ran.md", cwd=root)
    assert proc.returncode == 4, proc.stderr
    assert time.monotonic() - started < 30
    assert f"error: remote {hub} does not exist" in proc.stderr and "hint:" in proc.stderr
    assert not (root / "ran.md").exists()
    proc = memsync_cmd("run", "--offline", "--no-push", "--", "touch", "ran.md", cwd=root)
    assert proc.returncode == 0, proc.stderr
    assert "offline: running on the local copies" in proc.stderr
    assert (root / "ran.md").exists()
    assert git("log", "-1", "--format=%(trailers:key=Memsync-Actor,valueonly)", cwd=root).strip() == "run"


@pytest.mark.slow
def test_remote_down_after_the_run_keeps_the_commit(memory: Path, tmp_path: Path) -> None:
    hub = hub_path()
    moved = hub.with_name("hub.moved")
    script = f"import os; open('late.md','w').write('late\\n'); os.rename({str(hub)!r}, {str(moved)!r})"
    proc = memsync_cmd("run", "--run-id", "late-run", "--", sys.executable, "-c", script, cwd=memory)
    assert proc.returncode == 8, proc.stderr
    assert "NOT PUSHED" in proc.stderr and "memsync push" in proc.stderr
    local_head = git("rev-parse", "HEAD", cwd=memory).strip()
    assert local_head[:8] in proc.stderr
    moved.rename(hub)
    assert "late.md" not in hub_tree()
    push = memsync_cmd("push", cwd=memory)
    assert push.returncode == 0, push.stderr
    assert hub_tree()["late.md"] == b"late\n"
    assert git("rev-parse", "memory/research", cwd=hub).strip() == local_head


def test_no_push_commits_locally(memory: Path) -> None:
    before = git("rev-parse", "memory/research", cwd=hub_path())
    proc = memsync_cmd("run", "--no-push", "--", "touch", "local-only.md", cwd=memory)
    assert proc.returncode == 0, proc.stderr
    assert git("rev-parse", "memory/research", cwd=hub_path()) == before
    assert "local-only.md" in git("show", "--name-only", "HEAD", cwd=memory)


@pytest.mark.slow
def test_sigterm_is_forwarded_and_the_work_saved(memory: Path, tmp_path: Path) -> None:
    script = ("import signal, sys, time, pathlib\n"
              "def bye(sig, frame):\n"
              "    pathlib.Path('got-signal.md').write_text(f'signal {sig}\\n'); sys.exit(130)\n"
              "signal.signal(signal.SIGINT, bye); signal.signal(signal.SIGTERM, bye)\n"
              "pathlib.Path('started').write_text('x')\n"
              "time.sleep(60)\n")
    for sig in (signal.SIGINT, signal.SIGTERM):
        (memory / "started").unlink(missing_ok=True)
        proc = subprocess.Popen([sys.executable, "-m", "memsync", "run", "--checkpoint", "0", "--",
                                 sys.executable, "-c", script], cwd=memory, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 30
        while not (memory / "started").exists():
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.05)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 130, err
        assert hub_tree()["got-signal.md"] == f"signal {int(sig)}\n".encode()


@pytest.mark.slow
def test_kill_minus_nine_keeps_checkpoints(memory: Path, tmp_path: Path) -> None:
    """kill -9 of the whole process group: what was written well before is on the hub."""
    script = ("import time, pathlib\n"
              "for i in range(400):\n"
              "    pathlib.Path(f'notes/n{i:03d}.md').parent.mkdir(exist_ok=True)\n"
              "    pathlib.Path(f'notes/n{i:03d}.md').write_text(f'{time.time()}\\n')\n"
              "    time.sleep(0.1)\n")
    env = dict(os.environ, MEMSYNC_QUIET="0.5", MEMSYNC_SETTLE="0.2")
    proc = subprocess.Popen([sys.executable, "-m", "memsync", "run", "--checkpoint", "1", "--",
                             sys.executable, "-c", script], cwd=memory, env=env, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    # wait for the agent's 30th note (a loaded machine starts it late), then for the checkpoints
    deadline = time.monotonic() + 60
    while not (memory / "notes" / "n029.md").exists():
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.05)
    time.sleep(3.5)
    killed_at = time.time()
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    on_hub = {k for k in hub_tree() if k.startswith("notes/")}
    # a note the kill cut mid-write is empty: it was not written "well before" the kill anyway
    written = {p.relative_to(memory).as_posix(): float(text) for p in (memory / "notes").iterdir()
               if (text := p.read_text().strip())}
    # interval (1 s) + settle (0.2 s) + a push: allow two intervals of slack on a loaded machine
    must_have = {k for k, t in written.items() if t < killed_at - 3.0}
    assert len(must_have) >= 20
    assert must_have <= on_hub, sorted(must_have - on_hub)[:5]
    checkpoints = git("log", "--format=%(trailers:key=Memsync-Checkpoint,valueonly)", "memory/research",
                      cwd=hub_path()).split()
    assert len(checkpoints) >= 2
    # the next ordinary command recovers by itself (stale locks, half-done state)
    after = memsync_cmd("push", cwd=memory)
    assert after.returncode == 0, after.stderr
    assert set(written) <= set(hub_tree())
    git("fsck", "--strict", cwd=hub_path())


@pytest.mark.slow
def test_checkpoint_skips_temp_files_being_written(memory: Path) -> None:
    script = ("import time, os, pathlib\n"
              "p = pathlib.Path('.tmp.summary.md')\n"
              "p.write_text('half')\n"
              "time.sleep(2.5)\n"
              "p.write_text('whole summary\\n'); os.replace(p, 'summary.md')\n")
    env = dict(os.environ, MEMSYNC_QUIET="0.3")
    proc = memsync_cmd("run", "--checkpoint", "1", "--", sys.executable, "-c", script, cwd=memory, env=env)
    assert proc.returncode == 0, proc.stderr
    every_version = git("log", "--all", "--format=%H", "--", ".tmp.summary.md", cwd=hub_path())
    assert every_version == ""
    assert hub_tree()["summary.md"] == b"whole summary\n"


def test_run_on_git_daemon(git_daemon, tmp_path: Path, agent: Path) -> None:  # type: ignore[no-untyped-def]
    from tests.helpers.servers import make_bare_hub

    make_bare_hub(git_daemon.base_path / "hub.git")
    url = git_daemon.url("hub.git")
    src = tmp_path / "research"
    src.mkdir()
    assert memsync_cmd("init", "--remote", url, cwd=src).returncode == 0
    write(src, "summary.md", "# s\n")
    assert memsync_cmd("push", cwd=src).returncode == 0, "push"
    sandbox = tmp_path / "sandbox"
    sandbox.mkdir()
    proc = memsync_cmd("run", "--remote", url, "--memory", "research", "--run-id", "daemon-run", "--",
                       sys.executable, str(agent), cwd=sandbox)
    assert proc.returncode == 0, proc.stderr
    tree = hub_tree("memory/research", git_daemon.base_path / "hub.git")
    assert tree["runs/daemon-run.md"] == b"notes of daemon-run\n"


def test_contract_mentions_the_rules() -> None:
    proc = memsync_cmd("contract", "--path", "/mnt/memory", cwd=Path.cwd())
    assert proc.returncode == 0
    for needle in ("/mnt/memory", "summary.md", "runs/$MEMSYNC_RUN_ID.md", ".tmp.summary.md", "rename"):
        assert needle in proc.stdout


def test_second_ctrl_c_abandons_a_hanging_final_push(tmp_path: Path, hanging_server) -> None:  # type: ignore[no-untyped-def]
    root = tmp_path / "research"
    root.mkdir()
    assert memsync_cmd("init", cwd=root).returncode == 0
    url = hanging_server.url("hub.git", scheme="git")
    proc = subprocess.Popen([sys.executable, "-m", "memsync", "run", "--offline", "--remote", url, "--",
                             "touch", "made-offline.md"], cwd=root, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not hanging_server.accepted:  # the command is done; memsync is in the push to a silent server
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)  # the first lets the push go on (tests/stories/test_reliability_signals.py)
    assert proc.stderr is not None
    seen = ""
    while "asked to stop" not in seen:
        line = proc.stderr.readline()
        assert line, f"memsync ended on the first Ctrl-C: {seen}"
        seen += line
    assert proc.poll() is None
    interrupted = time.monotonic()
    proc.send_signal(signal.SIGINT)
    _, rest = proc.communicate(timeout=20)
    err = seen + rest
    assert time.monotonic() - interrupted < 5
    assert proc.returncode == 8, err
    assert "interrupted: the final push was abandoned (a second signal)" in err
    assert "made-offline.md" in git("show", "--name-only", "HEAD", cwd=root)  # the commit stays local


@pytest.mark.slow
def test_steady_appends_still_checkpoint_every_interval(memory: Path) -> None:
    """An agent appending to one file every second: a checkpoint lands at least every interval,
    even though every checkpoint finds the file freshly written (it is retried once it settles)."""
    script = ("import time\n"
              "for i in range(60):\n"
              "    with open('progress.md', 'a') as fh:\n"
              "        fh.write(f'step {i} {time.time()}\\n')\n"
              "    time.sleep(1.0)\n")
    proc = subprocess.Popen([sys.executable, "-m", "memsync", "run", "--checkpoint", "2", "--",
                             sys.executable, "-c", script], cwd=memory, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(10)
    killed_at = time.time()
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    written = [float(line.split()[2]) for line in (memory / "progress.md").read_text().splitlines()]
    on_hub = hub_tree().get("progress.md", b"").decode().splitlines()
    # interval 2 s + the settle retry + a push; keep slack for a loaded machine
    due = [t for t in written if t < killed_at - 4.5]
    assert len(due) >= 4
    assert len(on_hub) >= len(due), (len(on_hub), len(due))


def test_a_secret_in_the_command_is_never_recorded_or_printed(memory: Path) -> None:
    token = "ghp_" + "a1B2c3D4e5" * 3 + "f6G7h8"  # well-formed, fake, built at run time
    proc = memsync_cmd("run", "--run-id", "with-token", "--", "sh", "-c",
                       f"echo 'token = {token}' > /dev/null; echo done > done.md", cwd=memory)
    assert proc.returncode == 0, proc.stderr
    assert token not in proc.stderr and token not in proc.stdout
    assert "token = <redacted>" in proc.stderr
    history = git("log", "--format=%B", "memory/research", cwd=hub_path())
    assert token not in history
    # only the secret is redacted: the rest of the script stays readable
    assert "Memsync-Command: sh -c 'echo '\"'\"'token = <redacted>'\"'\"' > /dev/null; echo done > done.md'" in history


@pytest.mark.slow
def test_read_only_changes_are_reported_once_and_block_only_when_they_conflict(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    assert memsync_cmd("init", "--name", "ref-mem", cwd=src).returncode == 0
    write(src, "fact.md", "v1\n")
    assert memsync_cmd("push", cwd=src).returncode == 0
    work = tmp_path / "work"
    work.mkdir()
    first = memsync_cmd("run", "--memory", "ref-mem:ref:ro", "--", "sh", "-c", "echo x > ref/new.md", cwd=work)
    assert first.returncode == 9 and "was changed during the run" in first.stderr and "new.md" in first.stderr
    assert not (work / "ref" / "new.md").exists()
    second = memsync_cmd("run", "--memory", "ref-mem:ref:ro", "--", "true", cwd=work)
    assert second.returncode == 0, second.stderr
    assert "was changed during the run" not in second.stderr  # the leftover is not this run's doing
    (work / "ref" / "fact.md").write_text("edited locally\n")
    write(src, "fact.md", "v2\n")
    assert memsync_cmd("push", cwd=src).returncode == 0
    blocked = memsync_cmd("run", "--memory", "ref-mem:ref:ro", "--", "true", cwd=work)
    assert blocked.returncode == 7, blocked.stderr
    assert "has local changes that block its update: fact.md" in blocked.stderr
    assert "hint: move them out" in blocked.stderr
    assert (work / "ref" / "fact.md").read_text() == "edited locally\n"


@pytest.mark.slow
def test_memsync_lines_never_land_inside_the_command_output(tmp_path: Path) -> None:
    """The hub disappears mid-run while the command writes stderr a character at a time: the
    checkpoint's failure message waits until the command has exited."""
    hub = tmp_path / "own-hub.git"
    git("init", "-q", "--bare", str(hub), cwd=tmp_path)
    root = tmp_path / "research"
    root.mkdir()
    assert memsync_cmd("init", "--remote", str(hub), cwd=root).returncode == 0
    assert memsync_cmd("push", cwd=root).returncode == 0
    script = ("import os, sys, time\n"
              f"os.rename({str(hub)!r}, {str(hub) + '.gone'!r})\n"
              "open('a.md', 'w').write('a')\n"
              "for _ in range(30):\n"
              "    for ch in 'CHARS-FROM-THE-COMMAND':\n"
              "        sys.stderr.write(ch); sys.stderr.flush(); time.sleep(0.002)\n"
              "    sys.stderr.write('\\n')\n")
    env = dict(os.environ, MEMSYNC_QUIET="0.2", MEMSYNC_SETTLE="0.1")
    proc = memsync_cmd("run", "--checkpoint", "0.5", "--", sys.executable, "-c", script, cwd=root, env=env)
    assert proc.returncode == 8, proc.stderr
    for line in proc.stderr.splitlines():
        assert line == "CHARS-FROM-THE-COMMAND" or line.startswith(("memsync:", "error:", "hint:")), line
    assert "checkpoint push failed" in proc.stderr


def test_a_run_in_a_memory_holding_memsync_home_commits_only_its_files(tmp_path: Path, cli: Cli,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """MEMSYNC_HOME inside the memory (core/ownfolders.py): a run's commit holds the run's file,
    nothing of the hub beside the notes, and reports nothing the operator's rules hide."""
    root = tmp_path / "workspace"
    root.mkdir()
    monkeypatch.setenv("MEMSYNC_HOME", str(root / "state" / "memsync"))
    assert cli("init", "--name", "research", cwd=root).code == 0
    write(root, "notes.md", "one\n")
    assert cli("push", cwd=root).code == 0
    ran = cli("run", "--", sys.executable, "-c", "open('run.md', 'w').write('ran')", cwd=root)
    assert ran.code == 0, ran.err  # nothing the operator's rules hide is reported: memsync's own folder
    assert git("ls-tree", "-r", "--name-only", "HEAD", cwd=root).split() == ["notes.md", "run.md"]
    assert "/state/memsync" in (root / ".git" / "info" / "exclude").read_text().splitlines()


def test_api_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    api.init(notes, name="research")
    api.push(notes)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    code = "import os; open(os.environ['MEMSYNC_MEMORY_DIR'] + '/x.md', 'w').write('x')"
    report = api.run([sys.executable, "-c", code], [api.Mount("research", work / "mem")],
                     api.RunOptions(run_id="api-run", checkpoint=0))
    assert report.status == 0 and report.memories[0].pushed
    assert hub_tree()["x.md"] == b"x"
