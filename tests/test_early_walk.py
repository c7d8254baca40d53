"""The early walk (git/earlyscan.py) and the entries it settles (git/unsettled.py).

A push or status walks the work tree in a thread while it starts; its first scan, under the
memory's lock, takes that walk only if the repository is as the walk saw it. These tests start
the walk as the command line does, then run the command in process, and check both what the
command did and whether the walk was taken.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from memsync.core import snapshot
from memsync.git import checkoutjournal, earlyscan, unsettled
from memsync.git.repo import GitRepo
from memsync.git.workdiff import scan_flags
from memsync.util.dirfd import Tree
from tests.conftest import Cli, git, hub_tree, write

Taken = list[bool]


@pytest.fixture
def taken(monkeypatch: pytest.MonkeyPatch) -> Taken:
    """For each scan that found an early walk waiting: whether it took it (in order)."""
    seen: Taken = []
    real = GitRepo._early_walk

    def spy(self: GitRepo, flags: Any, meanwhile: Any = None) -> Any:
        waiting = earlyscan._pending is not None
        found = real(self, flags, meanwhile)
        if waiting:
            seen.append(found is not None)
        return found

    monkeypatch.setattr(GitRepo, "_early_walk", spy)
    return seen


def _walked(root: Path) -> None:
    """Start the walk as `memsync push` does, and let it finish."""
    earlyscan.start(root, int(scan_flags()))
    pending = earlyscan._pending
    assert pending is not None
    pending.thread.join(30)


def _index_stat(root: Path, rel: str) -> str:
    lines = git("ls-files", "--debug", rel, cwd=root).splitlines()
    return next(line.split(":", 1)[1].strip() for line in lines if line.strip().startswith("mtime:"))


def _stamp(path: Path) -> tuple[int, int, int]:
    st = path.stat()
    return st.st_ino, st.st_mtime_ns, st.st_size


def test_push_takes_the_walk_and_commits_what_it_found(memory: Path, cli: Cli, taken: Taken) -> None:
    write(memory, "summary.md", "# Summary\n\nfirst line\nsecond line\n")
    write(memory, "new/deep/file.md", "a new file\n")
    (memory / "runs" / "first.md").unlink()
    _walked(memory)
    r = cli("push", cwd=memory)
    assert r.code == 0, r.err
    assert taken == [True]
    tree = hub_tree()
    assert tree["summary.md"].endswith(b"second line\n")
    assert tree["new/deep/file.md"] == b"a new file\n"
    assert "runs/first.md" not in tree
    assert git("status", "--porcelain", cwd=memory) == ""


def test_the_walk_writes_nothing(memory: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(snapshot, "_SETTLED_NS", 60 * 10**9)
    write(memory, "fresh.md", "staged without stat data\n")
    assert cli("push", cwd=memory).code == 0
    assert _index_stat(memory, "fresh.md") == "0:0"  # a scan with UPDATE_INDEX would write the index
    index = memory / ".git" / "index"
    before = _stamp(index)
    _walked(memory)
    walk = earlyscan._pending.walk if earlyscan._pending else None
    assert walk is not None and walk.hashed == 1  # it hashed the file ...
    assert _stamp(index) == before  # ... and wrote no index
    assert _index_stat(memory, "fresh.md") == "0:0"
    earlyscan.drop()


@pytest.mark.parametrize("meanwhile", ["git commit", "index rewritten", "HEAD moved", "exclude file"])
def test_a_walk_the_repository_moved_past_is_dropped(memory: Path, cli: Cli, taken: Taken, meanwhile: str) -> None:
    """Whatever rewrites the index, moves HEAD or changes the ignore rules after the walk (another
    process, before this one holds the lock) makes the scan walk again."""
    write(memory, "notes.md", "seen by the walk\n")
    _walked(memory)
    if meanwhile == "git commit":
        git("add", "notes.md", cwd=memory)
        git("-c", "user.name=Other", "-c", "user.email=o@example.invalid", "commit", "-qm", "other", cwd=memory)
    elif meanwhile == "index rewritten":
        git("update-index", "--really-refresh", cwd=memory)
        os.utime(memory / ".git" / "index")
    elif meanwhile == "HEAD moved":
        head = git("rev-parse", "HEAD", cwd=memory).strip()
        git("update-ref", "HEAD", f"{head}~0", cwd=memory)
        git("-c", "user.name=Other", "-c", "user.email=o@example.invalid", "commit", "-q", "--allow-empty",
            "-m", "empty", cwd=memory)
    else:
        write(memory, ".git/info/exclude", "notes.md\n")
    r = cli("push", cwd=memory)
    assert r.code == 0, r.err
    assert taken == [False]
    if meanwhile == "exclude file":
        assert "notes.md" not in hub_tree()  # the rules the scan holds now, not the walk's
    else:
        assert hub_tree()["notes.md"] == b"seen by the walk\n"


@pytest.mark.parametrize("marker", ["index.lock", checkoutjournal.JOURNAL])
def test_no_walk_while_the_repository_is_mid_write(memory: Path, cli: Cli, taken: Taken, marker: str) -> None:
    assert marker in earlyscan._WATCHED
    write(memory, "notes.md", "new\n")
    (memory / ".git" / marker).write_text("{}")
    _walked(memory)
    pending = earlyscan._pending
    assert pending is not None and pending.walk is None
    earlyscan.drop()


def test_a_walk_of_another_memory_is_not_taken(memory: Path, tmp_path: Path, cli: Cli, taken: Taken) -> None:
    other = tmp_path / "other"
    other.mkdir()
    assert cli("init", "--name", "other", cwd=other).code == 0
    write(other, "theirs.md", "the other memory's\n")
    _walked(other)
    write(memory, "ours.md", "ours\n")
    assert cli("push", cwd=memory).code == 0
    assert taken == [False]
    assert hub_tree()["ours.md"] == b"ours\n"
    assert "theirs.md" not in hub_tree()


def test_settled_entries_get_their_stat_data(memory: Path, cli: Cli, taken: Taken,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(snapshot, "_SETTLED_NS", 60 * 10**9)
    write(memory, "a.md", "first\n")
    write(memory, "b.md", "second\n")
    assert cli("push", cwd=memory).code == 0
    ledger = memory / ".git" / unsettled.LEDGER
    assert {"a.md", "b.md"} <= set(unsettled._read(memory / ".git"))
    monkeypatch.setattr(unsettled, "SETTLED_NS", 0)  # both count as settled now
    write(memory, "b.md", "second, edited\n")
    _walked(memory)
    r = cli("push", cwd=memory)
    assert r.code == 0, r.err
    assert taken == [True]
    assert _index_stat(memory, "a.md") != "0:0"  # settled from the list
    assert hub_tree()["b.md"] == b"second, edited\n"
    assert ledger.read_bytes() == b"b.md\0"  # staged fresh again (snapshot's rule), listed again


def test_an_unlisted_entry_to_refresh_sends_the_scan_back_to_a_full_walk(memory: Path, cli: Cli, taken: Taken,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(snapshot, "_SETTLED_NS", 60 * 10**9)
    write(memory, "a.md", "first\n")
    assert cli("push", cwd=memory).code == 0
    (memory / ".git" / unsettled.LEDGER).unlink()
    _walked(memory)
    r = cli("status", cwd=memory)
    assert r.code == 0, r.err
    assert taken == [False]
    assert _index_stat(memory, "a.md") != "0:0"  # the full scan's UPDATE_INDEX refreshed it


@pytest.mark.attack
def test_a_planted_list_settles_nothing_it_should_not(memory: Path, tmp_path: Path, cli: Cli, taken: Taken,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """An agent writes .git/memsync-unsettled: a changed file, a path out of the tree, a path
    through a symlinked folder. None gets stat data it should not; the change is still pushed."""
    monkeypatch.setattr(snapshot, "_SETTLED_NS", 60 * 10**9)
    write(memory, "a.md", "first\n")
    assert cli("push", cwd=memory).code == 0
    monkeypatch.setattr(unsettled, "SETTLED_NS", 0)
    outside = write(tmp_path, "outside/secret.md", "first\n")  # the same bytes as a.md's entry
    (memory / "linked").symlink_to(outside.parent)
    (memory / ".git" / unsettled.LEDGER).write_bytes(b"a.md\0../outside/secret.md\0linked/secret.md\0summary.md\0")
    write(memory, "a.md", "first\nchanged after the push\n")
    opened: list[str] = []
    real_read = Tree.read

    def reading(self: Any, rel: str, limit: int) -> Any:
        opened.append(rel)
        return real_read(self, rel, limit)

    monkeypatch.setattr(Tree, "read", reading)
    _walked(memory)
    r = cli("push", cwd=memory)
    assert r.code == 0, r.err
    assert hub_tree()["a.md"] == b"first\nchanged after the push\n"
    assert "../outside/secret.md" not in opened and "linked/secret.md" not in opened
    assert git("status", "--porcelain", cwd=memory) == ""


def test_the_list_is_bounded(tmp_path: Path) -> None:
    git_dir = tmp_path / ".git"
    git_dir.mkdir()
    unsettled.note(git_dir, [f"f{i}.md" for i in range(10)])
    unsettled.note(git_dir, ["f3.md", "g.md"])
    assert unsettled._read(git_dir) == [*(f"f{i}.md" for i in range(10)), "g.md"]
    unsettled.note(git_dir, [f"h{i}" for i in range(unsettled.MAX_PATHS)])
    assert not (git_dir / unsettled.LEDGER).exists()  # past the bound: dropped, a full scan settles them


def test_a_cold_push_process_takes_the_walk(memory: Path) -> None:
    """The command line starts the walk (fastpath): a real `memsync push` and `status`, with the
    walk's use reported through a test hook, give the same result as without it."""
    write(memory, "cold.md", "pushed by a cold process\n")
    env = dict(os.environ)
    probe = memory.parent / "probe.py"
    probe.write_text(
        "import sys\n"
        "from memsync.git import earlyscan\n"
        "real = earlyscan.claim\n"
        "def claim(*a, **k):\n"
        "    w = real(*a, **k)\n"
        "    sys.stderr.write(f'walk taken: {w is not None}\\n')\n"
        "    return w\n"
        "earlyscan.claim = claim\n"
        "from memsync.cli import fastpath\n"
        "sys.exit(fastpath.dispatch(sys.argv[1:]))\n")
    done = subprocess.run([sys.executable, str(probe), "push"], cwd=memory, env=env, capture_output=True, text=True,
               timeout=120)
    assert done.returncode == 0, done.stderr
    assert "walk taken: True" in done.stderr
    assert hub_tree()["cold.md"] == b"pushed by a cold process\n"
    done = subprocess.run([sys.executable, str(probe), "status"], cwd=memory, env=env, capture_output=True, text=True,
               timeout=120)
    assert done.returncode == 0 and "walk taken: True" in done.stderr, done.stderr


def test_concurrent_pushes_in_one_memory_lose_nothing(memory: Path) -> None:
    """Eight cold `memsync push` processes in one memory at once, each after writing its own file
    and rewriting a shared one: each walk races the others' commits, which move HEAD and rewrite
    the index under the lock, so a walk taken stale would commit a tree that misses a file or
    undoes one. Every file and the last rewrite reach the hub; the tree ends clean."""
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


@pytest.mark.attack
@pytest.mark.parametrize("planted", ["symlink to /dev/zero", "fifo", "directory", "oversized", "symlinked temp name"])
def test_a_planted_list_file_is_never_followed_or_read_past_its_bound(memory: Path, cli: Cli, taken: Taken,
                                                                     planted: str,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """What an agent can put at .git/memsync-unsettled (or where memsync writes it) costs nothing
    but the list: no hang on a device or FIFO, no read of a huge file, no write through a link."""
    monkeypatch.setattr(snapshot, "_SETTLED_NS", 60 * 10**9)
    ledger = memory / ".git" / unsettled.LEDGER
    victim = memory.parent / "operator-file.txt"
    victim.write_text("the operator's own file\n")
    ledger.unlink(missing_ok=True)  # (the fixture's own push listed its files)
    if planted == "symlink to /dev/zero":
        ledger.symlink_to("/dev/zero")
    elif planted == "fifo":
        os.mkfifo(ledger)
    elif planted == "directory":
        ledger.mkdir()
    elif planted == "oversized":
        ledger.write_bytes(b"a.md\0")
        os.truncate(ledger, unsettled._MAX_FILE + 1)  # sparse: past the bound, no list
    else:
        ledger.symlink_to(victim)  # a list written "through" it would land in the operator's file
    write(memory, "a.md", "first\n")
    _walked(memory)
    r = cli("push", cwd=memory)
    assert r.code == 0, r.err
    assert hub_tree()["a.md"] == b"first\n"
    assert victim.read_text() == "the operator's own file\n"
    assert git("status", "--porcelain", cwd=memory) == ""


@pytest.mark.attack
def test_settling_reads_a_bounded_number_of_bytes(memory: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    """An agent can list (and keep touching) many large files: a scan reads them up to a budget,
    and what is past it waits, still listed, for a later scan."""
    monkeypatch.setattr(snapshot, "_SETTLED_NS", 60 * 10**9)
    names = [f"big/{i}.bin" for i in range(4)]
    for name in names:
        write(memory, name, b"x" * 1000)
    assert cli("push", cwd=memory).code == 0
    monkeypatch.setattr(unsettled, "SETTLED_NS", 0)
    monkeypatch.setattr(unsettled, "_BUDGET", 1500)
    opened: list[str] = []
    real_read = Tree.read

    def reading(self: Any, rel: str, limit: int) -> Any:
        opened.append(rel)
        return real_read(self, rel, limit)

    monkeypatch.setattr(Tree, "read", reading)
    g = GitRepo.open(memory)
    ready, _fresh = g._check_unsettled()
    assert sum(1 for rel in opened if rel in names) == 2  # 1,000 bytes, then 2,000: past the budget
    assert set(names) - {path for (path, _oid, _mode), _st in ready} <= set(unsettled._read(memory / ".git"))
