"""The foundation's bad inputs: each a one-line error with a hint, its exit code, nothing lost."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import Cli, git, hub_path, hub_tree, memsync_cmd, write


def assert_clean_error(r, code: int, fragment: str) -> None:  # type: ignore[no-untyped-def]
    assert r.code == code, (r.code, r.out, r.err)
    first = r.err.splitlines()[0]
    assert first.startswith("error: ") and fragment in first, r.err
    assert "Traceback" not in r.err


def test_not_a_memory(tmp_path: Path, cli: Cli) -> None:
    for command in ("push", "pull", "status"):
        r = cli(command, cwd=tmp_path)
        assert_clean_error(r, 3, "is not a memory directory")
        assert "hint: run `memsync init`" in r.err


def test_malformed_storage_yaml_names_file_and_line(memory: Path, cli: Cli) -> None:
    (memory / ".vm0" / "storage.yaml").write_text("name: research\ntype: [memory\n")
    r = cli("push", cwd=memory)
    assert_clean_error(r, 3, "storage.yaml:3")


def test_storage_yaml_without_name(memory: Path, cli: Cli) -> None:
    (memory / ".vm0" / "storage.yaml").write_text("type: memory\n")
    assert_clean_error(cli("status", cwd=memory), 3, "`name` is missing")


def test_storage_yaml_is_a_directory(tmp_path: Path, cli: Cli) -> None:
    (tmp_path / ".vm0" / "storage.yaml").mkdir(parents=True)
    assert_clean_error(cli("init", cwd=tmp_path), 3, "is a directory")
    assert_clean_error(cli("push", cwd=tmp_path), 3, "is a directory")


def test_unknown_key_is_a_warning(memory: Path, cli: Cli) -> None:
    path = memory / ".vm0" / "storage.yaml"
    path.write_text(path.read_text() + "colour: blue\n")
    write(memory, "x.md", "x\n")
    r = cli("pull", cwd=memory)
    assert r.code == 0, r.err
    assert r.err.count("unknown key 'colour' ignored") == 1


@pytest.mark.slow
def test_remote_that_does_not_exist(tmp_path: Path, cli: Cli) -> None:
    root = tmp_path / "research"
    root.mkdir()
    missing = tmp_path / "nowhere.git"
    assert cli("init", "--remote", str(missing), cwd=root).code == 0
    write(root, "a.md", "a\n")
    r = cli("push", cwd=root)
    assert_clean_error(r, 4, "does not exist")
    assert "git init --bare" in r.err
    assert git("show", "HEAD:a.md", cwd=root) == "a\n"  # committed locally, nothing lost
    assert not missing.exists()


def test_remote_with_unsupported_scheme(tmp_path: Path, cli: Cli) -> None:
    r = cli("clone", "research", "--remote", "ftp://example.org/x.git", cwd=tmp_path)
    assert_clean_error(r, 2, "unsupported remote scheme 'ftp'")


def test_remote_refusing_connections(tmp_path: Path, cli: Cli) -> None:
    from tests.helpers.servers import RefusingPort

    with RefusingPort() as port:
        started = time.monotonic()
        r = cli("list", "--remote", port.url("hub.git", scheme="git"), cwd=tmp_path)
    assert_clean_error(r, 4, "Connection refused")
    assert time.monotonic() - started < 20


def test_unrelated_history(memory: Path, tmp_path: Path, cli: Cli) -> None:
    stranger = tmp_path / "stranger"
    stranger.mkdir()
    git("init", "-q", "-b", "memory/research", cwd=stranger)
    write(stranger, "mine.md", "unrelated\n")
    git("add", "-A", cwd=stranger)
    git("-c", "user.name=x", "-c", "user.email=x@y", "commit", "-qm", "unrelated", cwd=stranger)
    assert cli("init", "--name", "research", cwd=stranger).code == 0
    r = cli("pull", cwd=stranger)
    assert_clean_error(r, 7, "share no history")
    assert "hint:" in r.err
    assert (stranger / "mine.md").read_text() == "unrelated\n"
    assert "mine.md" not in hub_tree()


def test_adopting_an_existing_git_repository(tmp_path: Path, cli: Cli) -> None:
    root = tmp_path / "old-notes"
    root.mkdir()
    git("init", "-q", "-b", "main", cwd=root)
    write(root, "old.md", "old\n")
    git("add", "-A", cwd=root)
    git("-c", "user.name=x", "-c", "user.email=x@y", "commit", "-qm", "old history", cwd=root)
    git("remote", "add", "origin", "https://example.org/acme/project.git", cwd=root)
    r = cli("init", cwd=root)
    assert r.code == 0, r.err
    assert "adopted the history of branch 'main' as 'memory/old-notes'" in r.out
    assert "kept this repository's own remote 'origin'" in r.out
    assert git("remote", "get-url", "origin", cwd=root).strip() == "https://example.org/acme/project.git"
    assert git("rev-parse", "main", cwd=root) == git("rev-parse", "HEAD", cwd=root)
    assert cli("push", cwd=root).code == 0
    assert hub_tree("memory/old-notes")["old.md"] == b"old\n"
    assert "old history" in git("log", "--format=%s", "memory/old-notes", cwd=hub_path())


def test_pull_while_a_git_merge_is_half_done(memory: Path, tmp_path: Path, cli: Cli) -> None:
    other = tmp_path / "other"
    assert cli("clone", "research", str(other)).code == 0
    write(other, "summary.md", "theirs\n")
    assert cli("push", cwd=other).code == 0
    write(memory, "summary.md", "ours\n")
    git("-c", "user.name=x", "-c", "user.email=x@y", "commit", "-qam", "ours", cwd=memory)
    git("fetch", "-q", "origin", cwd=memory)
    subprocess.run(["git", "-c", "user.name=x", "-c", "user.email=x@y", "merge", "origin/memory/research"],
                   cwd=memory, capture_output=True)
    assert (memory / ".git" / "MERGE_HEAD").exists()
    r = cli("pull", cwd=memory)
    assert_clean_error(r, 7, "git merge is in progress")
    assert "git merge --abort" in r.err
    assert (memory / ".git" / "MERGE_HEAD").exists()  # the user's merge is left for them


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes to read-only directories")
def test_read_only_directory(tmp_path: Path, cli: Cli) -> None:
    root = tmp_path / "locked-dir"
    root.mkdir()
    root.chmod(0o555)
    try:
        assert_clean_error(cli("init", cwd=root), 7, "cannot write in")
    finally:
        root.chmod(0o755)


def test_read_only_directory_as_unprivileged_user(tmp_path: Path) -> None:
    """As root the check above cannot fail; run the same case as `nobody` when we can."""
    if os.geteuid() != 0:
        pytest.skip("covered by test_read_only_directory")
    import tempfile

    base = Path(tempfile.mkdtemp(prefix="memsync-ro-"))
    base.chmod(0o755)
    root = base / "locked-dir"
    root.mkdir()
    root.chmod(0o555)
    code = ("import sys; from memsync.cli.app import main; sys.exit(main(['init']))")
    env = {"PATH": os.environ["PATH"], "HOME": str(root), "MEMSYNC_HOME": str(root / "h"),
           "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
                           sys.executable, "-c", code], cwd=root, env=env, capture_output=True, text=True)
    root.chmod(0o755)
    shutil.rmtree(base)
    if "setpriv" in proc.stderr and proc.returncode != 7:
        pytest.skip(f"cannot drop privileges here: {proc.stderr.strip()}")
    assert proc.returncode == 7, proc.stderr
    assert proc.stderr.startswith("error: cannot write in") and "Traceback" not in proc.stderr


def test_stale_git_lock_files_are_recovered(memory: Path, cli: Cli) -> None:
    # what a memsync killed while holding the memory's and the hub's lock leaves: its record in
    # memsync.lock (pid, host, start) and git lock files made after it started
    dead = subprocess.Popen(["true"])
    dead.wait()
    started = time.time() - 120
    for holder in (memory / ".git" / "memsync.lock", hub_path() / "memsync.lock"):
        holder.write_text(f"{dead.pid} {socket.gethostname()} {started:.3f}\n")
    for lock in (memory / ".git" / "index.lock", memory / ".git" / "refs" / "heads" / "memory" / "research.lock",
                 hub_path() / "refs" / "heads" / "memory" / "research.lock"):
        lock.write_text("left by a killed process")
        old = time.time() - 60
        os.utime(lock, (old, old))
    write(memory, "after-crash.md", "x\n")
    r = cli("push", cwd=memory)
    assert r.code == 0, r.err
    assert hub_tree()["after-crash.md"] == b"x\n"
    assert not (memory / ".git" / "index.lock").exists()


@pytest.mark.slow
def test_a_live_lock_makes_others_wait_then_fail(memory: Path) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from filelock import FileLock;"
         " l = FileLock(sys.argv[1]); l.acquire(); print('held', flush=True); time.sleep(30)",
         str(memory / ".git" / "memsync.lock")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        env = dict(os.environ, MEMSYNC_LOCK_TIMEOUT="1")
        started = time.monotonic()
        proc = memsync_cmd("push", cwd=memory, env=env)
        waited = time.monotonic() - started
        assert proc.returncode == 6, proc.stderr
        assert proc.stderr.startswith("error: memory 'research' is busy") and "MEMSYNC_LOCK_TIMEOUT" in proc.stderr
        assert 1 <= waited < 15
    finally:
        holder.kill()
        holder.wait()
    assert memsync_cmd("push", cwd=memory).returncode == 0  # the kernel dropped the dead holder's lock


def test_usage_errors_are_one_line(tmp_path: Path, cli: Cli) -> None:
    r = cli("push", "--no-such-flag", cwd=tmp_path)
    assert r.code == 2
    assert r.err.splitlines()[0] == "error: No such option: --no-such-flag"
    assert r.err.splitlines()[1].startswith("hint: see `memsync push --help`")
    r = cli("frobnicate")
    assert r.code == 2 and r.err.startswith("error: No such command 'frobnicate'")


@pytest.mark.slow
def test_installed_entry_point(tmp_path: Path) -> None:
    exe = Path(sys.executable).parent / "memsync"
    assert exe.exists(), "pip install . provides the memsync command"
    version = subprocess.run([str(exe), "--version"], capture_output=True, text=True, check=True)
    assert version.stdout.startswith("memsync ")
    root = tmp_path / "via-entry"
    root.mkdir()
    proc = subprocess.run([str(exe), "init"], cwd=root, capture_output=True, text=True)
    assert proc.returncode == 0 and (root / ".vm0" / "storage.yaml").exists()
    helped = subprocess.run([sys.executable, "-m", "memsync", "--help"], capture_output=True, text=True)
    assert helped.returncode == 0
    for command in ("init", "push", "pull", "clone", "status", "list", "run", "log", "diff", "restore",
                    "revert", "watch", "contract"):
        assert f"  {command} " in helped.stdout or f"  {command}\n" in helped.stdout, command


def test_ctrl_c_during_a_transfer_is_one_line_and_exit_130(tmp_path: Path, hanging_server) -> None:  # type: ignore[no-untyped-def]
    """A Ctrl-C inside libgit2's network call: raised in a pygit2 callback, a KeyboardInterrupt
    would be swallowed by cffi (printing a traceback and carrying on); memsync's is not."""
    url = hanging_server.url("hub.git", scheme="git")
    proc = subprocess.Popen([str(Path(sys.executable).parent / "memsync"), "clone", "research", "--remote", url],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 20
    while hanging_server.accepted == 0:  # memsync is now inside the fetch
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=20)
    assert proc.returncode == 130, err
    assert err == "error: interrupted\n"
    assert not (tmp_path / "research").exists() and not list(tmp_path.glob(".memsync-clone-*"))


def test_invalid_branch_in_storage_yaml(memory: Path, cli: Cli) -> None:
    path = memory / ".vm0" / "storage.yaml"
    path.write_text(path.read_text() + "branch: bad..branch\n")
    assert_clean_error(cli("push", cwd=memory), 3, "`branch: bad..branch` is not a valid git branch name")


@pytest.mark.parametrize("args", [["run", "--checkpoint", "nan", "--", "true"],
                                  ["run", "--checkpoint", "-1", "--", "true"],
                                  ["watch", "--once", "--poll", "inf"],
                                  ["watch", "--once", "--debounce", "nan"]])
def test_timings_must_be_finite(memory: Path, cli: Cli, args: list[str]) -> None:
    r = cli(*args, cwd=memory)
    assert r.code == 2, (r.out, r.err)
    assert r.err.startswith("error: --") and "hint: e.g." in r.err


@pytest.mark.parametrize("text, line", [
    ("name: research\nsecrets: block\nsecrets: off\n", 3),      # a later line would silently win
    ("name: research\nprotect:\n  - {path: a, mode: read-only, mode: append-only}\n", 3),
])
def test_storage_yaml_key_given_twice_is_refused(memory: Path, cli: Cli, text: str, line: int) -> None:
    (memory / ".vm0" / "storage.yaml").write_text(text)
    r = cli("status", cwd=memory)
    assert_clean_error(r, 3, f"storage.yaml:{line}: the key")
    assert "given twice" in r.err and "hint: keep one" in r.err


def test_renamed_memory_gets_a_hint_that_works(memory: Path, cli: Cli) -> None:
    path = memory / ".vm0" / "storage.yaml"
    path.write_text(path.read_text().replace("name: research", "name: research-two"))
    r = cli("push", cwd=memory)
    assert_clean_error(r, 7, "but this memory lives on memory/research-two")
    assert "git switch" not in r.err  # the branch does not exist here: switching to it would fail
    hint = r.err.split("hint: ", 1)[1]
    command = hint.split("`")[1]
    assert command == "git branch -m memory/research memory/research-two"
    subprocess.run(command.split(), cwd=memory, check=True)
    assert cli("push", cwd=memory).code == 0
