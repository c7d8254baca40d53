"""The memory's lock taken first and the walk under it (core/lockfirst.py, git/earlyscan.py).

A push or status takes the memory's lock at the top of the command line and walks the work tree
under it while the command imports; the command's own `held` takes the lock over, and its first
scan takes the walk's deltas. These tests begin that as the command line does (lockfirst.walking)
and run the command in process, checking what the command did, whether the walk was taken, and
that the lock was taken once.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from memsync.core import lockfirst, locking, memory, readonly
from memsync.git import checkoutjournal, earlyscan
from memsync.git import scan as scanmod
from memsync.git.repo import GitRepo
from memsync.git.scan import scan
from tests.conftest import Cli, fresh_for_a_minute, git, hub_tree, write
from tests.helpers.servers import GitDaemon

Taken = Callable[[], dict[str, int]]


@pytest.fixture(autouse=True)
def no_walk_left() -> Any:
    yield
    assert not locking._early  # every lock taken early was taken over or let go
    earlyscan.forget()


@pytest.fixture
def taken() -> Taken:
    """What became of the walks begun under the lock that scans found since the test began:
    {"used": n, "set aside": m} (scan.EARLY_WALKS, what the scan counts)."""
    before = Counter(scanmod.EARLY_WALKS)
    return lambda: dict(scanmod.EARLY_WALKS - before)


@pytest.fixture
def once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A command that took the memory's lock a second time, rather than taking over the one taken
    early (which this process still holds), would wait for itself: with no wait, it fails at once."""
    monkeypatch.setenv("MEMSYNC_LOCK_TIMEOUT", "0")


def _busy(lock_file: Path) -> bool:
    """Whether some holder has `lock_file` (tried with flock(2) on a descriptor of the test's own)."""
    fd = os.open(lock_file, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # (lets go of the probe's lock, if it got one)
    return False


@contextmanager
def _other_holder(lock_file: Path) -> Iterator[None]:
    """Another holder of the memory's lock (flock(2) on a descriptor of its own)."""
    fd = os.open(lock_file, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        yield
    finally:
        os.close(fd)


def _index_stat(root: Path, rel: str) -> str:
    lines = git("ls-files", "--debug", rel, cwd=root).splitlines()
    return next(line.split(":", 1)[1].strip() for line in lines if line.strip().startswith("mtime:"))


def test_push_takes_the_lock_once_and_the_walk(memory: Path, cli: Cli, taken: Taken, once: None) -> None:
    write(memory, "summary.md", "# Summary\n\nfirst line\nsecond line\n")
    write(memory, "new/deep/file.md", "a new file\n")
    (memory / "runs" / "first.md").unlink()
    lock_file = memory / ".git" / "memsync.lock"
    with lockfirst.walking(memory):
        assert _busy(lock_file)  # taken first, before any import
        r = cli("push", cwd=memory)
        assert r.code == 0, r.err  # (taking it again would have failed: `once`)
        assert not _busy(lock_file)  # the command took it over, and let it go at its end
    assert taken() == {"used": 1}
    tree = hub_tree()
    assert tree["summary.md"].endswith(b"second line\n")
    assert tree["new/deep/file.md"] == b"a new file\n"
    assert "runs/first.md" not in tree
    assert git("status", "--porcelain", cwd=memory) == ""


def test_the_walk_refreshes_the_index_under_the_lock(memory: Path, cli: Cli, taken: Taken) -> None:
    """As git's status: lock, refresh (libgit2 writes the refreshed index), then the scan."""
    fresh_for_a_minute(write(memory, "fresh.md", "staged without stat data\n"))
    assert cli("push", cwd=memory).code == 0
    assert _index_stat(memory, "fresh.md") == "0:0"  # snapshot's 2-second rule
    with lockfirst.walking(memory):
        earlyscan.wait()
        assert _index_stat(memory, "fresh.md") != "0:0"  # refreshed by the walk, the lock held
        r = cli("status", cwd=memory)
        assert r.code == 0, r.err
    assert taken() == {"used": 1}
    assert "fresh.md" not in r.out


def test_a_busy_lock_means_no_early_walk(memory: Path, cli: Cli, taken: Taken) -> None:
    lock_file = memory / ".git" / "memsync.lock"
    with _other_holder(lock_file), lockfirst.walking(memory):
        assert earlyscan._walk is None
    write(memory, "notes.md", "after the other holder\n")
    with lockfirst.walking(memory):
        assert cli("push", cwd=memory).code == 0
    assert hub_tree()["notes.md"] == b"after the other holder\n"


def test_the_markers_named_at_the_top_are_the_modules_own() -> None:
    assert lockfirst.RECOVERIES == ("index.lock", checkoutjournal.JOURNAL, readonly.MARK, memory.RUN_MARKER)


@pytest.mark.parametrize("marker", lockfirst.RECOVERIES)
def test_no_walk_when_the_command_recovers_first(memory: Path, marker: str) -> None:
    """The command writes the index or the work tree before it scans: it walks itself then."""
    (memory / ".git" / marker).write_text("{}")
    try:
        with lockfirst.walking(memory):
            assert earlyscan._walk is None
            assert _busy(memory / ".git" / "memsync.lock")  # the lock is still taken first
    finally:
        (memory / ".git" / marker).unlink()


def test_no_walk_after_a_holder_died(memory: Path) -> None:
    """Its git lock files are cleared under the lock, before anything looks: no walk meanwhile."""
    lock_file = memory / ".git" / "memsync.lock"
    lock_file.write_text("999999 elsewhere 1.000 - -\n")  # a record only a holder that died leaves
    with lockfirst.walking(memory):
        assert earlyscan._walk is None


def test_switched_off_nothing_is_taken_early(memory: Path, cli: Cli, taken: Taken,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMSYNC_NO_EARLY_WALK", "1")
    write(memory, "notes.md", "walked by the scan itself\n")
    with lockfirst.walking(memory):
        assert not _busy(memory / ".git" / "memsync.lock") and earlyscan._walk is None
        assert cli("push", cwd=memory).code == 0
    assert taken() == {}
    assert hub_tree()["notes.md"] == b"walked by the scan itself\n"


def test_a_command_that_stops_early_lets_the_lock_go(memory: Path, cli: Cli) -> None:
    (memory / ".vm0" / "storage.yaml").write_text("name: [unclosed\n")
    with lockfirst.walking(memory):
        r = cli("status", cwd=memory)
    assert r.code != 0 and "storage.yaml" in r.err
    assert earlyscan._walk is None  # joined and dropped with the lock: never used under another
    assert not _busy(memory / ".git" / "memsync.lock")


def test_a_walk_is_taken_only_by_a_first_look_at_the_index(memory: Path, taken: Taken) -> None:
    write(memory, "notes.md", "seen by the walk\n")
    with lockfirst.walking(memory):
        g = GitRepo.open(memory)
        g.index.read(force=False)  # this repository looked at its index before scanning
        changes = scan(g).changes
    assert taken() == {"set aside": 1}
    assert [c.path for c in changes] == ["notes.md"]


def test_a_walk_of_another_memory_is_not_taken(memory: Path, tmp_path: Path, cli: Cli, taken: Taken) -> None:
    other = tmp_path / "other"
    other.mkdir()
    assert cli("init", "--name", "other", cwd=other).code == 0
    write(other, "theirs.md", "the other memory's\n")
    write(memory, "ours.md", "ours\n")
    with lockfirst.walking(other):
        assert cli("push", cwd=memory).code == 0
    assert taken() == {}  # (the other memory's walk was never this scan's)
    assert hub_tree()["ours.md"] == b"ours\n"
    assert "theirs.md" not in hub_tree()


@pytest.mark.slow
def test_a_cold_push_process_takes_the_walk(memory: Path) -> None:
    """The command line takes the lock and begins the walk (fastpath): a real `memsync push` and
    `status`, with the walk's use reported as the scan counted it, give the same result as without it."""
    write(memory, "cold.md", "pushed by a cold process\n")
    probe = memory.parent / "probe.py"
    probe.write_text(
        "import sys\n"
        "from memsync.cli import fastpath\n"
        "code = fastpath.dispatch(sys.argv[1:])\n"
        "from memsync.git import scan\n"
        "sys.stderr.write(f'walks: {dict(scan.EARLY_WALKS)}\\n')\n"
        "sys.exit(code)\n")
    for verb in ("push", "status"):
        done = subprocess.run([sys.executable, str(probe), verb], cwd=memory, env=dict(os.environ),
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0 and "walks: {'used': 1}" in done.stderr, done.stderr
    assert hub_tree()["cold.md"] == b"pushed by a cold process\n"


@pytest.mark.slow
def test_concurrent_pushes_in_one_memory_lose_nothing(memory: Path) -> None:
    """Eight cold `memsync push` processes in one memory at once, each after writing its own file
    and rewriting a shared one: each takes the lock first or waits for it, and one that waited
    walks under the lock it then holds. Every file and the last rewrite reach the hub; the tree
    ends clean."""
    env = dict(os.environ)
    for round_no in range(3):
        procs = []
        for i in range(8):
            write(memory, f"writers/{round_no}-{i}.md", f"writer {i}, round {round_no}\n")
            write(memory, "shared.md", f"round {round_no}, writer {i}\n")
            procs.append(subprocess.Popen([sys.executable, "-m", "memsync", "push"], cwd=memory, env=env,
                                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
        for proc in procs:
            _, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err
    tree = hub_tree()
    assert {f"writers/{r}-{i}.md" for r in range(3) for i in range(8)} <= set(tree)
    assert tree["shared.md"] == b"round 2, writer 7\n"
    assert git("status", "--porcelain", cwd=memory) == ""


def _added_by(root: Path, rel: str) -> str:
    """The message of the commit that added `rel`."""
    return git("log", "--diff-filter=A", "--format=%B", "--", rel, cwd=root)


@pytest.mark.parametrize("early", ["on", "off"])
def test_a_runs_pull_walks_beside_its_fetch(memory: Path, tmp_path: Path, cli: Cli, taken: Taken, early: str,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A run in a memory with a local change while the hub has a newer version: the walk for the
    snapshot before the run is begun under the pull's lock and runs beside the fetch (off:
    MEMSYNC_NO_EARLY_WALK=1, one after the other). Either way the local change is saved as the
    operator's before the hub's version is merged, and the agent's change is the run's own."""
    if early == "off":
        monkeypatch.setenv("MEMSYNC_NO_EARLY_WALK", "1")
    other = tmp_path / "other"
    assert cli("clone", "research", str(other)).code == 0
    write(other, "theirs.md", "from another sandbox\n")
    assert cli("push", cwd=other).code == 0
    write(memory, "local.md", "written before the run\n")
    r = cli("run", "--", "sh", "-c", "echo agent > agent.md", cwd=memory)
    assert r.code == 0, r.err
    assert taken() == ({"used": 1} if early == "on" else {})
    assert earlyscan._walk is None and not _busy(memory / ".git" / "memsync.lock")
    tree = hub_tree()
    assert (tree["local.md"], tree["theirs.md"], tree["agent.md"]) == (
        b"written before the run\n", b"from another sandbox\n", b"agent\n")
    assert "Memsync-Run-Id" not in _added_by(memory, "local.md")  # the operator's, saved first
    assert "Memsync-Run-Id" in _added_by(memory, "agent.md")
    assert git("status", "--porcelain", cwd=memory) == ""


@pytest.mark.parametrize("early", ["on", "off"])
def test_a_runs_pull_that_cannot_reach_the_hub_drops_its_walk(daemon_memory: Path, git_daemon: GitDaemon, cli: Cli,
                                                              taken: Taken, early: str,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The hub down when the run's pull asks it (`git daemon` stopped): the fetch beside the walk
    leaves the hub to converge's retries, which give up as they did with the walk off (exit 4,
    nothing run); the snapshot before them took the walk, the local change is saved, and
    nothing is left under the lock."""
    if early == "off":
        monkeypatch.setenv("MEMSYNC_NO_EARLY_WALK", "1")
    monkeypatch.setenv("MEMSYNC_NETWORK_TRIES", "1")
    write(daemon_memory, "local.md", "written before the run\n")
    git_daemon.stop()
    r = cli("run", "--", "sh", "-c", "echo agent > agent.md", cwd=daemon_memory)
    assert r.code == 4 and "nothing is listening there" in r.err, r.err
    assert not (daemon_memory / "agent.md").exists()
    assert taken() == ({"used": 1} if early == "on" else {})
    assert earlyscan._walk is None and not _busy(daemon_memory / ".git" / "memsync.lock")
    assert git("status", "--porcelain", cwd=daemon_memory) == ""
    assert "Memsync-Run-Id" not in _added_by(daemon_memory, "local.md")
