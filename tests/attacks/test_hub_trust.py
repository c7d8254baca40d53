"""What a hub, or anyone sharing its directory, can make memsync do (issue 15):

- a `.gitignore` from the hub never hides a run's files silently, and files over max_file_size
  are listed by `status`;
- MEMSYNC_HOME and the embedded hub are private (0700); cache files are never written through a
  planted symlink;
- a git lock file held by a live process is never deleted (only a dead owner's are);
- the embedded hub refuses non-fast-forward pushes and branch deletions from plain git.
"""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import Cli, git, hub_path, hub_tree, memsync_cmd, write
from tests.helpers.figures import Figures, figures
from tests.helpers.servers import GitDaemon, make_bare_hub

pytestmark = [pytest.mark.attack, pytest.mark.stress]
__all__ = ["figures"]


def _hub_commit(tmp_path: Path, files: dict[str, str]) -> None:
    """A version pushed to the hub with plain git by someone else."""
    work = tmp_path / "other"
    if not work.exists():
        git("clone", "-q", "-b", "memory/research", str(hub_path()), str(work), cwd=tmp_path)
    git("pull", "-q", cwd=work)
    for rel, text in files.items():
        write(work, rel, text)
    git("add", "-A", cwd=work)
    git("-c", "user.name=other", "-c", "user.email=o@h", "commit", "-qm", "from the hub", cwd=work)
    git("push", "-q", "origin", "HEAD:memory/research", cwd=work)


# -- nothing silently dropped --------------------------------------------------------------------
def test_files_a_hub_gitignore_names_are_committed_and_named(memory: Path, tmp_path: Path,
                                                            figures: Figures) -> None:
    """The operator's push and status: a .gitignore from the hub decides nothing (issue 33; a run
    commits such files too: test_ignore_trust.py). Before, the files were left out."""
    figures.add("security attacks")
    _hub_commit(tmp_path, {".gitignore": "*.log\nscratch/\n", "deep/.gitignore": "*.md\n"})
    assert memsync_cmd("pull", cwd=memory).returncode == 0
    write(memory, "notes.log", "a\n")
    write(memory, "scratch/x.md", "b\n")
    write(memory, "deep/found.md", "c\n")
    data = json.loads(memsync_cmd("status", "--json", cwd=memory).stdout)
    assert data["ignored"] == []
    assert {c["path"] for c in data["uncommitted"]} == {"deep/found.md", "notes.log", "scratch/x.md"}
    push = memsync_cmd("push", cwd=memory)
    assert push.returncode == 0, push.stderr
    assert "committed 3 new files that a .gitignore in the memory names" in push.stderr
    assert set(git("ls-tree", "-r", "--name-only", "memory/research", cwd=hub_path()).split()) >= {
        "deep/found.md", "notes.log", "scratch/x.md"}
    # memsync's own excludes (.vm0/, editor swap files) are not news
    write(memory, ".notes.md.swp", "swap")
    data = json.loads(memsync_cmd("status", "--json", cwd=memory).stdout)
    assert data["ignored"] == []
    figures.add("security attacks refused")


def test_status_lists_files_over_max_file_size(memory: Path, figures: Figures) -> None:
    figures.add("security attacks")
    cfg = memory / ".vm0" / "storage.yaml"
    cfg.write_text(cfg.read_text() + "max_file_size: 1KiB\n")
    write(memory, "big.bin", "x" * 5000)
    status = memsync_cmd("status", cwd=memory)
    assert "Too large to commit (over max_file_size): 1\n  big.bin" in status.stdout, status.stdout
    assert json.loads(memsync_cmd("status", "--json", cwd=memory).stdout)["too_large"] == ["big.bin"]
    push = memsync_cmd("push", cwd=memory)
    assert "not committed: big.bin (5000 bytes" in push.stderr
    assert "No changes" not in push.stdout and "Nothing committed: 1 file left out" in push.stdout
    figures.add("security attacks refused")


# -- the embedded hub and its caches -------------------------------------------------------------
def test_memsync_home_and_the_embedded_hub_are_private(tmp_path: Path, figures: Figures) -> None:
    figures.add("security attacks")
    home = Path(os.environ["MEMSYNC_HOME"])
    assert not home.exists()
    root = tmp_path / "research"
    root.mkdir()
    old = os.umask(0o022)
    try:
        assert memsync_cmd("init", cwd=root).returncode == 0
        write(root, "a.md", "a\n")
        assert memsync_cmd("push", cwd=root).returncode == 0
    finally:
        os.umask(old)
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    assert stat.S_IMODE(hub_path().stat().st_mode) == 0o700
    figures.add("security attacks refused")


def test_a_planted_symlink_never_redirects_a_cache_write(memory: Path, tmp_path: Path, cli: Cli,
                                                         figures: Figures) -> None:
    """The tree-statistics cache is written into the hub, a directory others may share: a
    symlink planted at any name it could use is never written through."""
    figures.add("security attacks")
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    cache = hub_path() / "memsync-tree-stats.json"
    cache.unlink(missing_ok=True)
    planted = [cache.with_name(f"memsync-tree-stats.json.{os.getpid()}.tmp")]
    for link in planted:
        link.symlink_to(victim)
    _hub_commit(tmp_path, {"new.md": "new\n"})  # a version the cache has not counted yet
    r = cli("list")
    assert r.code == 0, r.err
    assert victim.read_text() == "precious\n"
    assert not cache.is_symlink() and json.loads(cache.read_text())  # the cache itself was written
    cache.unlink()
    cache.symlink_to(victim)  # a planted cache file is not read through either
    assert cli("list").code == 0
    assert victim.read_text() == "precious\n"
    figures.add("security attacks refused")


# -- git lock files ------------------------------------------------------------------------------
HOLDER = """
import os, sys, time
path = sys.argv[1]
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)  # as git takes a lock
print("held", flush=True)
sys.stdin.readline()  # until told to finish
os.close(fd)
os.unlink(path)
"""


def test_a_lock_held_by_a_live_git_is_not_deleted(memory: Path, figures: Figures) -> None:
    figures.add("security attacks")
    lock = memory / ".git" / "index.lock"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(lock)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        old = time.time() - 120  # older than any grace period a plain git command would need
        os.utime(lock, (old, old))
        write(memory, "while-locked.md", "x\n")
        env = dict(os.environ, MEMSYNC_LOCK_TIMEOUT="2")
        started = time.monotonic()
        proc = memsync_cmd("push", cwd=memory, env=env)
        assert proc.returncode == 6, proc.stderr
        assert "index.lock is held by another git command" in proc.stderr and "hint: " in proc.stderr
        assert time.monotonic() - started < 15
        assert lock.exists(), "a live process's lock was deleted"
        assert "while-locked.md" not in hub_tree()
    finally:
        assert holder.stdin is not None
        holder.stdin.write("done\n")
        holder.stdin.close()
        holder.wait(timeout=10)
    proc = memsync_cmd("push", cwd=memory)  # its owner finished: nothing is left to wait for
    assert proc.returncode == 0, proc.stderr
    assert hub_tree()["while-locked.md"] == b"x\n"
    figures.add("security attacks refused")


def test_a_real_git_commit_in_its_editor_keeps_its_lock(memory: Path, figures: Figures) -> None:
    """`git commit -a` holds index.lock (closed) while its editor is open: memsync must not take
    it away, or git's commit fails when the editor returns."""
    figures.add("security attacks")
    write(memory, "by-git.md", "staged by git\n")
    git("add", "by-git.md", cwd=memory)
    write(memory, "summary.md", "edited, committed by git -a\n")
    marker = memory / ".git" / "editor-open"
    editor = f"sh -c 'touch {marker}; sleep 5; echo by git > \"$1\"' --"
    commit = subprocess.Popen(["git", "-c", f"core.editor={editor}", "-c", "user.name=a", "-c", "user.email=a@b",
                               "commit", "-q", "-a"], cwd=memory, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
    deadline = time.monotonic() + 20
    while not marker.exists():
        assert time.monotonic() < deadline and commit.poll() is None
        time.sleep(0.05)
    assert (memory / ".git" / "index.lock").exists()
    proc = memsync_cmd("push", cwd=memory, env=dict(os.environ, MEMSYNC_LOCK_TIMEOUT="2"))
    assert proc.returncode == 6, proc.stderr
    assert "index.lock is held by another git command" in proc.stderr
    _, errors = commit.communicate(timeout=30)
    assert commit.returncode == 0, errors  # git's own commit went through
    marker.unlink()
    assert memsync_cmd("push", cwd=memory).returncode == 0
    assert hub_tree()["by-git.md"] == b"staged by git\n"
    assert hub_tree()["summary.md"] == b"edited, committed by git -a\n"
    figures.add("security attacks refused")


def test_a_foreign_lock_is_kept_until_it_is_ten_minutes_old(memory: Path, figures: Figures) -> None:
    """`git commit` waiting in an editor holds index.lock closed: no process has it open, and no
    memsync left it, so only its age can say it is orphaned."""
    figures.add("security attacks")
    lock = memory / ".git" / "index.lock"
    lock.write_text("")
    old = time.time() - 120
    os.utime(lock, (old, old))
    write(memory, "waiting.md", "x\n")
    proc = memsync_cmd("push", cwd=memory, env=dict(os.environ, MEMSYNC_LOCK_TIMEOUT="1"))
    assert proc.returncode == 6 and "10 minutes" in proc.stderr, proc.stderr
    assert lock.exists()
    figures.add("security attacks refused")
    older = time.time() - 11 * 60
    os.utime(lock, (older, older))
    proc = memsync_cmd("push", cwd=memory)
    assert proc.returncode == 0, proc.stderr
    assert not lock.exists() and hub_tree()["waiting.md"] == b"x\n"


def test_a_lock_left_by_a_killed_memsync_is_recovered(memory: Path, figures: Figures) -> None:
    """A memsync killed (kill -9) while holding the memory's lock and inside a git write."""
    hold = ("import sys, time; from pathlib import Path; from memsync.core.memory import open_memory;"
            "mem = open_memory(Path(sys.argv[1]));"
            "ctx = mem.locked(); ctx.__enter__();"
            "(Path(sys.argv[1]) / '.git' / 'index.lock').write_text('half');"
            "print('in', flush=True); time.sleep(60)")
    proc = subprocess.Popen([sys.executable, "-c", hold, str(memory)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "in"
    proc.kill()
    proc.wait()
    assert (memory / ".git" / "index.lock").exists()
    write(memory, "after.md", "y\n")
    started = time.monotonic()
    push = memsync_cmd("push", cwd=memory)
    assert push.returncode == 0, push.stderr
    assert time.monotonic() - started < 10
    assert hub_tree()["after.md"] == b"y\n"


# -- server-side protection of the embedded hub --------------------------------------------------
def test_the_embedded_hub_refuses_rewinds_and_deletions(memory: Path, tmp_path: Path, figures: Figures) -> None:
    work = tmp_path / "rewriter"
    git("clone", "-q", "-b", "memory/research", str(hub_path()), str(work), cwd=tmp_path)
    before = git("rev-parse", "memory/research", cwd=hub_path()).strip()
    write(work, "other.md", "rewritten history\n")
    git("add", "-A", cwd=work)
    git("-c", "user.name=x", "-c", "user.email=x@y", "commit", "-q", "--amend", "-m", "rewrite", cwd=work)
    for args in (["push", "--force", "origin", "HEAD:memory/research"],
                 ["push", "origin", "--delete", "memory/research"]):
        figures.add("security attacks")
        proc = subprocess.run(["git", *args], cwd=work, capture_output=True, text=True)
        assert proc.returncode != 0, f"git {' '.join(args)} was accepted"
        assert "denying" in proc.stderr or "denied" in proc.stderr, proc.stderr
        assert git("rev-parse", "memory/research", cwd=hub_path()).strip() == before
        figures.add("security attacks refused")
    write(memory, "still.md", "fine\n")
    assert memsync_cmd("push", cwd=memory).returncode == 0  # memsync itself never needs either


def test_an_existing_embedded_hub_gets_the_protection_and_nothing_else(tmp_path: Path) -> None:
    hub = hub_path()
    hub.parent.mkdir(parents=True)
    git("init", "-q", "--bare", str(hub), cwd=tmp_path)
    git("config", "--file", str(hub / "config"), "receive.denyDeletes", "false", cwd=tmp_path)  # its owner's choice
    git("config", "--file", str(hub / "config"), "core.logAllRefUpdates", "true", cwd=tmp_path)
    before = {line for line in (hub / "config").read_text().splitlines()}
    root = tmp_path / "research"
    root.mkdir()
    assert memsync_cmd("init", cwd=root).returncode == 0
    write(root, "a.md", "a\n")
    assert memsync_cmd("push", cwd=root).returncode == 0
    config = git("config", "--file", str(hub / "config"), "--list", cwd=tmp_path).splitlines()
    assert "receive.denynonfastforwards=true" in config
    assert "receive.denydeletes=false" in config and "core.logallrefupdates=true" in config
    after = {line for line in (hub / "config").read_text().splitlines()}
    assert before <= after and len(after - before) <= 2


def test_a_killed_list_does_not_break_the_listing_cache(git_daemon: GitDaemon, tmp_path: Path) -> None:
    """`memsync list` of a network hub fetches into a cache under MEMSYNC_HOME: a list killed
    mid-fetch leaves a ref lock there, which the next list recovers from."""
    make_bare_hub(git_daemon.base_path / "hub.git")
    url = git_daemon.url("hub.git")
    root = tmp_path / "research"
    root.mkdir()
    assert memsync_cmd("init", "--name", "research", "--remote", url, cwd=root).returncode == 0
    write(root, "a.md", "a\n")
    assert memsync_cmd("push", cwd=root).returncode == 0
    assert memsync_cmd("list", "--remote", url, cwd=tmp_path).returncode == 0
    home = Path(os.environ["MEMSYNC_HOME"])
    (cache,) = (home / "cache").glob("*.git")
    dead = subprocess.Popen(["true"])
    dead.wait()
    (home / "cache.lock").write_text(f"{dead.pid} {socket.gethostname()} {time.time() - 30:.3f}\n")
    lock = cache / "refs" / "hub" / "memory" / "research.lock"
    lock.write_text("half")
    write(root, "b.md", "b\n")
    assert memsync_cmd("push", cwd=root).returncode == 0
    proc = memsync_cmd("list", "--remote", url, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert not lock.exists()
