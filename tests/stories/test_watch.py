"""memsync watch: live two-way sync, tested as a real subprocess against real hubs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.conftest import git, hub_path, hub_tree, memsync_cmd, write
from tests.helpers.gathered import losers
from tests.helpers.servers import make_bare_hub
from tests.helpers.trees import tree_files

pytestmark = pytest.mark.slow

DEBOUNCE = 0.5
POLL = 1.0


class Watch:
    """A running `memsync watch`; its stderr goes to a file (a pipe could fill up and block it)."""

    def __init__(self, root: Path, *extra: str) -> None:
        self.root = root
        self.log = root.parent / f"watch-{root.name}-{time.monotonic_ns()}.log"
        self._log_fh = open(self.log, "w")  # noqa: SIM115  (closed in stop())
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "memsync", "watch", "--debounce", str(DEBOUNCE), "--poll", str(POLL), *extra],
            cwd=root, env=dict(os.environ), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=self._log_fh)
        wait_until(lambda: "watching " in self.text() or self.proc.poll() is not None, 15, "watch to start")
        assert self.proc.poll() is None, self.text()

    def text(self) -> str:
        return self.log.read_text()

    def stop(self, sig: int = signal.SIGTERM) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            code = self.proc.wait(timeout=30)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            self._log_fh.close()
        return code


@contextmanager
def watching(root: Path, *extra: str) -> Iterator[Watch]:
    w = Watch(root, *extra)
    try:
        yield w
    finally:
        if w.proc.poll() is None:
            w.proc.kill()
            w.proc.wait()
        w._log_fh.close()


def wait_until(check: Callable[[], object], timeout: float, what: str) -> float:
    """Poll `check` until it is truthy; the seconds it took. Fails after `timeout`."""
    started = time.monotonic()
    while True:
        try:
            if check():
                return time.monotonic() - started
        except (subprocess.CalledProcessError, FileNotFoundError, KeyError):
            pass
        if time.monotonic() - started > timeout:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.05)


def hub_files(branch: str = "memory/research") -> dict[str, bytes]:
    """Like hub_tree(), read in-process: one git process per file is slow on a loaded machine."""
    import pygit2

    repo = pygit2.Repository(str(hub_path()))
    return tree_files(repo, str(repo.revparse_single(branch).id))


def hub_has(path: str, content: bytes) -> bool:
    return hub_files().get(path) == content


def commits(where: Path, rev: str = "memory/research") -> list[str]:
    return git("log", "--format=%H %(trailers:key=Memsync-Actor,valueonly,separator=)", rev, cwd=where).splitlines()


def second_clone(tmp_path: Path, name: str = "other") -> Path:
    memsync_cmd("clone", "research", str(tmp_path / name), cwd=tmp_path, check=True)
    return tmp_path / name


def test_local_edit_reaches_the_hub_and_remote_change_reaches_disk(memory: Path, tmp_path: Path) -> None:
    other = second_clone(tmp_path)
    with watching(memory) as w:
        write(memory, "summary.md", "# Summary\n\nedited live\n")
        took = wait_until(lambda: hub_has("summary.md", b"# Summary\n\nedited live\n"), 10, "the edit on the hub")
        assert took < DEBOUNCE + 2.5, f"edit took {took:.1f}s to reach the hub"
        tip = commits(hub_path())[0]
        assert tip.endswith(" watch"), tip

        write(other, "notes/from-laptop.md", "pushed elsewhere\n")
        memsync_cmd("push", cwd=other, check=True)
        took = wait_until(lambda: (memory / "notes/from-laptop.md").read_text() == "pushed elsewhere\n", 10,
                          "the remote change on disk")
        assert took < POLL + 3, f"remote change took {took:.1f}s to arrive"
        time.sleep(DEBOUNCE + 0.5)  # the checkout's own file events must not turn into a commit
        assert w.stop() == 0
    head = git("rev-parse", "HEAD", cwd=memory).strip()
    assert head == git("rev-parse", "memory/research", cwd=hub_path()).strip()
    assert git("status", "--porcelain", cwd=memory) == ""
    # the merge of the remote version is a fast-forward: watch made exactly one commit
    assert sum(c.endswith(" watch") for c in commits(memory)) == 1
    assert "in sync at" in w.text()


def test_concurrent_edits_of_one_file_keep_both(memory: Path, tmp_path: Path) -> None:
    other = second_clone(tmp_path)
    write(other, "summary.md", "# Summary\n\nremote wording\n")
    memsync_cmd("push", cwd=other, check=True)
    write(memory, "summary.md", "# Summary\n\nlocal wording\n")
    with watching(memory) as w:
        wait_until(lambda: "summary.conflicts.md" in hub_files(), 10, "a gathered conflict file on the hub")
        tree = hub_tree()
        assert [p for p in tree if ".conflict" in p] == ["summary.conflicts.md"]
        assert tree["summary.md"] == b"# Summary\n\nlocal wording\n"
        assert losers(tree, "summary.md") == [b"# Summary\n\nremote wording\n"]
        assert (memory / "summary.conflicts.md").read_bytes() == tree["summary.conflicts.md"]
        assert (memory / "summary.md").read_text() == "# Summary\n\nlocal wording\n"
        wait_until(lambda: "conflict in summary.md" in w.text(), 5, "the conflict report")
        # watch keeps syncing after the conflict
        write(memory, "after.md", "still syncing\n")
        wait_until(lambda: hub_has("after.md", b"still syncing\n"), 10, "a later edit on the hub")
        assert w.stop() == 0


def test_a_burst_of_saves_becomes_one_commit(memory: Path) -> None:
    before = len(commits(hub_path()))
    with watching(memory) as w:
        for i in range(100):
            with open(memory / "summary.md", "w") as fh:
                fh.write(f"# Summary\n\nsave {i}\n")
        wait_until(lambda: hub_has("summary.md", b"# Summary\n\nsave 99\n"), 15, "the last save on the hub")
        time.sleep(DEBOUNCE + 0.5)
        assert w.stop() == 0
    made = len(commits(hub_path())) - before
    assert 1 <= made <= 3, f"{made} commits for one burst"


def test_churn_in_git_vm0_and_ignored_files_makes_no_commit(memory: Path) -> None:
    head = git("rev-parse", "HEAD", cwd=memory).strip()
    with watching(memory) as w:
        git("gc", "--quiet", cwd=memory)
        git("pack-refs", "--all", cwd=memory)
        write(memory, ".git/scratch/file.txt", "inside .git\n")
        write(memory, ".vm0/cache.txt", "memsync's own\n")
        write(memory, ".summary.md.swp", "vim swap\n")
        write(memory, "notes.md~", "backup\n")
        (memory / "emptydir").mkdir()
        time.sleep(DEBOUNCE + POLL + 1.0)  # a commit would have happened by now
        assert git("rev-parse", "HEAD", cwd=memory).strip() == head
        assert git("rev-parse", "memory/research", cwd=hub_path()).strip() == head
        assert "saved" not in w.text()
        assert w.stop() == 0
    assert git("rev-parse", "HEAD", cwd=memory).strip() == head


def test_remote_down_recovers_without_restart(memory: Path) -> None:
    hub, away = hub_path(), hub_path().with_name("hub.git.away")
    with watching(memory) as w:
        hub.rename(away)  # the hub disappears while watch runs (watch never re-creates it)
        write(memory, "while-down-1.md", "one\n")
        wait_until(lambda: "offline:" in w.text(), 15, "the offline report")
        write(memory, "while-down-2.md", "two\n")
        write(memory, "summary.md", "v2\n")
        time.sleep(POLL * 2 + DEBOUNCE)  # several retries while down
        assert w.proc.poll() is None
        assert not hub.exists()
        away.rename(hub)
        wait_until(lambda: hub_has("while-down-2.md", b"two\n") and hub_has("summary.md", b"v2\n"), 20, "recovery")
        wait_until(lambda: "back in sync" in w.text(), 10, "the recovery report")
        assert w.stop() == 0
    text = w.text()
    assert text.count("offline:") == 1, text  # one line per state change, not one per retry
    assert hub_tree()["while-down-1.md"] == b"one\n"
    assert git("status", "--porcelain", cwd=memory) == ""


def test_sigterm_mid_push_leaves_a_consistent_state(memory: Path) -> None:
    payload = {f"bulk/f{i:03}.bin": os.urandom(40_000) for i in range(150)}
    ref = memory / ".git" / "refs" / "heads" / "memory" / "research"
    before = ref.read_text()
    with watching(memory) as w:
        for rel, data in payload.items():
            write(memory, rel, data)
        wait_until(lambda: ref.read_text() != before, 20, "the commit")
        assert w.stop(signal.SIGTERM) == 0
    git("fsck", "--strict", cwd=memory)
    git("fsck", "--strict", cwd=hub_path())
    result = memsync_cmd("push", cwd=memory)
    assert result.returncode == 0, result.stderr
    tree = hub_files()
    assert all(tree.get(rel) == data for rel, data in payload.items())


def test_a_second_signal_abandons_cleanly(memory: Path) -> None:
    with watching(memory) as w:
        for i in range(150):
            write(memory, f"bulk/g{i:03}.bin", os.urandom(40_000))
        time.sleep(DEBOUNCE + 0.2)
        w.proc.send_signal(signal.SIGTERM)
        time.sleep(0.05)
        assert w.stop(signal.SIGTERM) == 0
    git("fsck", "--strict", cwd=memory)
    result = memsync_cmd("push", cwd=memory)
    assert result.returncode == 0, result.stderr
    assert len([p for p in hub_files() if p.startswith("bulk/g")]) == 150


def test_run_and_watch_on_one_directory(memory: Path, tmp_path: Path) -> None:
    script = "for i in $(seq 1 30); do echo run $i > runs/r$i.md; sleep 0.03; done"
    with watching(memory) as w:
        run = subprocess.Popen([sys.executable, "-m", "memsync", "run", "--checkpoint", "0.5", "--",
                                "sh", "-c", script], cwd=memory, env=dict(os.environ),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for i in range(20):
            write(memory, f"operator/o{i}.md", f"operator {i}\n")
            time.sleep(0.05)
        _, run_err = run.communicate(timeout=60)
        assert run.returncode == 0, run_err
        wanted = {f"runs/r{i}.md": f"run {i}\n".encode() for i in range(1, 31)}
        wanted |= {f"operator/o{i}.md": f"operator {i}\n".encode() for i in range(20)}
        wait_until(lambda: all(hub_files().get(k) == v for k, v in wanted.items()), 20, "everything on the hub")
        wait_until(lambda: git("rev-parse", "HEAD", cwd=memory).strip()
                   == git("rev-parse", "memory/research", cwd=hub_path()).strip(), 10, "watch in sync")
        assert w.stop() == 0
    git("fsck", "--strict", cwd=memory)
    git("fsck", "--strict", cwd=hub_path())
    assert git("status", "--porcelain", cwd=memory) == ""
    actors = {c.split(" ", 1)[1] for c in commits(hub_path()) if " " in c}
    assert "run" in actors
    added_by = git("log", "--diff-filter=A", "--format=%(trailers:key=Memsync-Actor,valueonly,separator=)",
                   "memory/research", "--", "runs/r*.md", cwd=hub_path()).split()
    assert added_by and set(added_by) == {"run"}, "watch left the run's files to the run"


def test_once_commits_merges_pushes_and_exits(memory: Path, tmp_path: Path) -> None:
    other = second_clone(tmp_path)
    write(other, "remote.md", "from elsewhere\n")
    memsync_cmd("push", cwd=other, check=True)
    write(memory, "local.md", "from here\n")
    result = memsync_cmd("watch", "--once", cwd=memory)
    assert result.returncode == 0, result.stderr
    assert "in sync at" in result.stderr
    assert (memory / "remote.md").read_text() == "from elsewhere\n"
    assert hub_tree()["local.md"] == b"from here\n"
    assert any(c.endswith(" watch") for c in commits(hub_path()))


def test_once_with_the_hub_down_keeps_the_commit_and_says_so(tmp_path: Path) -> None:
    hub = make_bare_hub(tmp_path / "team-hub.git")
    memory = tmp_path / "research"
    memory.mkdir()
    memsync_cmd("init", "--remote", str(hub), cwd=memory, check=True)
    memsync_cmd("push", cwd=memory, check=True)
    hub.rename(tmp_path / "team-hub.git.away")
    write(memory, "local.md", "from here\n")
    result = memsync_cmd("watch", "--once", cwd=memory)
    assert result.returncode == 8, result.stderr
    assert "not pushed" in result.stderr and "memsync push" in result.stderr
    assert "local.md" in git("show", "--name-only", "HEAD", cwd=memory)


@pytest.mark.parametrize("args", [["--poll", "0"], ["--debounce", "-1"]])
def test_bad_timings_are_usage_errors(memory: Path, args: list[str]) -> None:
    result = memsync_cmd("watch", *args, cwd=memory)
    assert result.returncode == 2
    assert result.stderr.startswith("error: ")


def test_status_line_is_compact() -> None:
    from memsync.cli.watch import status_line
    from memsync.live.watch import WatchStatus

    line = status_line(WatchStatus("offline", "hub unreachable", version="0123456789abcdef", last_sync=100.0,
                                   pending=2, commits=3), now=112.0)
    assert line == "● offline (hub unreachable) · synced 12s ago · 2 pending · 01234567 · 3 commits"


def test_a_held_memory_lock_is_waited_out_and_reported_once(memory: Path) -> None:
    from filelock import FileLock

    with watching(memory) as w:
        lock = FileLock(str(memory / ".git" / "memsync.lock"))  # what `memsync run` holds during a commit
        lock.acquire()
        try:
            write(memory, "while-locked.md", "waited\n")
            wait_until(lambda: "busy:" in w.text(), 10, "the busy report")
            time.sleep(2.5)  # several retries while it is held
            assert w.proc.poll() is None
        finally:
            lock.release()
        wait_until(lambda: hub_has("while-locked.md", b"waited\n"), 10, "the change after the lock was freed")
        assert w.stop() == 0
    assert w.text().count("busy:") == 1, w.text()
