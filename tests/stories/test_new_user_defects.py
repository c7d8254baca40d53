"""What a new user hit (issue 25, part 6): each defect, reproduced and fixed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import Cli, git, memsync_cmd, write


def test_gc_with_nothing_to_do_succeeds(cli: Cli, memory: Path) -> None:
    assert cli("gc", cwd=memory).code == 0
    r = cli("gc", cwd=memory)
    assert r.code == 0, r.err
    assert "Nothing to repack in memory 'research'" in r.out and r.err == ""
    proc = subprocess.run(["git", "fsck", "--strict"], cwd=memory, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize(("name", "value"), [("MEMSYNC_QUIET", "abc"), ("MEMSYNC_SETTLE", "-1"),
                                             ("MEMSYNC_IO_TIMEOUT", "1.5"), ("MEMSYNC_LOCK_TIMEOUT", "nan"),
                                             ("MEMSYNC_GC_LOOSE", "many"), ("MEMSYNC_TURN_TIMEOUT", "soon"),
                                             ("MEMSYNC_PUSH_QUEUE", "off")])
def test_a_bad_numeric_variable_is_a_usage_error(memory: Path, name: str, value: str) -> None:
    proc = memsync_cmd("run", "--", "touch", "ran.md", cwd=memory, env=dict(os.environ, **{name: value}))
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert lines[0].startswith(f"error: {name}=") and lines[1].startswith("hint: ") and len(lines) == 2
    assert "bug" not in proc.stderr and "Traceback" not in proc.stderr
    assert not (memory / "ran.md").exists()  # refused before the command ran


def test_every_variable_memsync_reads_is_documented() -> None:
    import re

    root = Path(__file__).resolve().parents[2]
    read = set()
    for source in (root / "memsync").rglob("*.py"):
        read |= set(re.findall(r"\bMEMSYNC_[A-Z][A-Z_]*[A-Z]\b", source.read_text(encoding="utf-8")))
    read -= {"MEMSYNC_MEMORY"}  # the prefix of MEMSYNC_MEMORY_<NAME>_DIR
    documented = (root / "docs" / "ENVIRONMENT.md").read_text(encoding="utf-8")
    assert sorted(v for v in read if f"`{v}`" not in documented) == []


def test_push_with_the_hub_down_says_the_commit_is_kept(cli: Cli, tmp_path: Path, refusing_port) -> None:  # type: ignore[no-untyped-def]
    root = tmp_path / "mem"
    root.mkdir()
    assert cli("init", "--name", "notes", "--remote", refusing_port.url("hub.git", "git"), cwd=root).code == 0
    write(root, "a.md", "a\n")
    r = cli("push", cwd=root)
    assert r.code == 4
    error, hint = r.err.strip().splitlines()
    head = git("rev-parse", "HEAD", cwd=root).strip()
    assert f"committed locally ({head[:8]}), not pushed" in error
    assert "--offline" not in hint and "memsync push" in hint


@pytest.mark.slow
def test_status_during_a_run_says_the_operator_verbs_are_refused(memory: Path) -> None:
    started, stop = memory.parent / "started", memory.parent / "stop"
    script = f"touch {started}; while [ ! -e {stop} ]; do sleep 0.05; done"
    proc = subprocess.Popen([sys.executable, "-m", "memsync", "run", "--run-id", "long-1", "--no-push",
                             "--checkpoint", "0", "--", "sh", "-c", script], cwd=memory,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not started.exists():
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.05)
        status = memsync_cmd("status", cwd=memory).stdout
        assert "refused (exit 6) until it ends" in status and "wait for it" not in status
        assert memsync_cmd("push", cwd=memory).returncode == 6
    finally:
        stop.touch()
        proc.communicate(timeout=60)


def test_leftovers_recovered_by_run_say_run(cli: Cli, memory: Path) -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    marker = memory / ".git" / "memsync-run.json"
    marker.write_text(json.dumps({"run_id": "killed-1", "pid": dead.pid, "started": None}))
    write(memory, "runs/killed-1.md", "written before the kill\n")
    r = cli("run", "--run-id", "next-1", "--", "true", cwd=memory)
    assert r.code == 0, r.err
    log = git("log", "--format=%(trailers:key=Memsync-Run-Id,key=Memsync-Recovered-By,valueonly,separator=%x20)",
              cwd=memory)
    assert "killed-1 run" in log, log
    assert "push" not in log


def test_counted_nouns_agree(cli: Cli, memory: Path) -> None:
    r = cli("init", "--name", "a", cwd=memory.parent)
    assert "it has 1 character;" in r.err
    write(memory, "summary.md", "# Summary\n\nfirst line\nsecond\n")
    assert cli("push", cwd=memory).code == 0
    r = cli("diff", "--stat", "HEAD", cwd=memory)
    assert "1 file changed, 1 insertion(+), 0 deletions(-)" in r.out, r.out
    r = cli("status", cwd=memory)
    assert "(s)" not in r.out


@pytest.mark.parametrize("verb", ["run", "diff", "restore", "mcp", "hooks install", "clone", "log"])
def test_help_shows_no_python_types(cli: Cli, verb: str) -> None:
    r = cli(*verb.split(), "--help")
    assert r.code == 0
    assert "<str>" not in r.out and "list[" not in r.out and "<float>" not in r.out and "<int>" not in r.out


def test_a_symlink_out_of_the_memory_is_reported(cli: Cli, memory: Path) -> None:
    os.symlink("/etc/passwd", memory / "passwd")
    os.symlink("summary.md", memory / "inside")
    r = cli("push", cwd=memory)
    assert r.code == 0, r.err
    assert "passwd is a symbolic link to /etc/passwd, outside the memory" in r.err
    assert "inside is a symbolic link" not in r.err


@pytest.mark.slow
def test_watch_reports_a_run_once_and_exits_at_the_current_version(memory: Path) -> None:
    from tests.stories.test_watch import wait_until, watching

    started, stop = memory.parent / "started", memory.parent / "stop"
    script = f"touch {started}; while [ ! -e {stop} ]; do sleep 0.05; done; echo done > runs/late.md"
    with watching(memory) as w:
        run = subprocess.Popen([sys.executable, "-m", "memsync", "run", "--run-id", "holder-1", "--checkpoint", "0",
                                "--", "sh", "-c", script], cwd=memory, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
        try:
            wait_until(started.exists, 30, "the run to start")
            write(memory, "operator.md", "while the run holds it\n")
            wait_until(lambda: "run holder-1 is using this memory" in w.text(), 20, "the busy report")
            time.sleep(3)  # several retries (backoff 0.25 s doubling, capped at 2 s) while the run holds it
        finally:
            stop.touch()
            _, err = run.communicate(timeout=60)
        assert run.returncode == 0, err
        wait_until(lambda: "back in sync" in w.text(), 20, "watch to resume")
        assert w.stop() == 0
    text = w.text()
    assert text.count("run holder-1 is using this memory") == 1, text
    head = git("rev-parse", "HEAD", cwd=memory).strip()
    last = text.strip().splitlines()[-1]
    assert f"at {head[:8]}" in last, (last, head)


@pytest.mark.slow
def test_the_demo_leaves_no_directory_behind(tmp_path: Path) -> None:
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    demo = Path(__file__).resolve().parents[2] / "demo" / "demo.py"
    proc = subprocess.run([sys.executable, str(demo)], cwd=tmp_path, env=dict(os.environ, TMPDIR=str(scratch)),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "removed" in proc.stdout
    assert list(scratch.iterdir()) == []
