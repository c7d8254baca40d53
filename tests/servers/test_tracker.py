"""Change trackers (memsync/serve/tracker.py): a narrowed scan reports exactly what a full scan does.

Real watchdog (inotify) on a real memory. The differential tests make random changes of every
kind a user, an agent or git can make (new folders, renames, deletions, mode changes, symlinks,
.gitignore edits, nested repositories, agent commits, `git rm --cached`, `git reset`, memsync's
own pushes) and after each one compare the scan a tracker narrowed with a full scan of the same
tree. No test sleeps for the observer's threads: a tracker's answer flushes them (its cookie).
"""

from __future__ import annotations

import mmap
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from memsync.git import hints
from memsync.git.repo import GitRepo
from memsync.git.scan import ScanResult, scan
from memsync.serve import treewatch
from memsync.serve.tracker import Limits, Tracker, Trackers
from memsync.serve.tracklink import Local
from tests.conftest import Cli, fresh_for_a_minute, git, hub_path, hub_tree, memsync_cmd, write

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux")
    or treewatch.filesystem(os.path.realpath(tempfile.gettempdir())) not in treewatch.LOCAL_FILESYSTEMS,
    reason="inotify (Linux) on a local file system")


class Direct(Local):
    """The server's trackers reached in-process, as a worker's line reaches them; counts narrowed scans."""

    def __init__(self, limits: Limits | None = None) -> None:
        super().__init__(Trackers(limits=limits))
        self.narrowed = 0
        self.asked = 0

    def since(self, root: str) -> hints.Since | None:
        found = super().since(root)
        self.asked += 1
        self.narrowed += found is not None and found.paths is not None
        return found


@pytest.fixture
def direct() -> Iterator[Direct]:
    source = Direct()
    hints.source = source
    yield source
    hints.source = None
    source.trackers.close()


def scan_both(root: Path, source: Direct) -> tuple[ScanResult, ScanResult]:
    hints.source = source
    try:
        g = GitRepo.open(root)
        narrowed = scan(g)
    finally:
        hints.source = None
    g = GitRepo.open(root)
    full = scan(g)
    hints.source = source
    return narrowed, full


def _files(root: Path) -> list[Path]:
    found = []
    for top, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if d != ".git" and not (Path(top) / d / ".git").exists()]
        found += [Path(top) / n for n in names if not (Path(top) / n).is_symlink()]
    return [f for f in found if ".vm0" not in f.parts]


def _dirs(root: Path) -> list[Path]:
    return [Path(top) / d for top, dirs, _ in os.walk(root) for d in dirs
            if d != ".git" and ".git" not in (Path(top) / d).parts and ".vm0" not in (Path(top) / d).parts]


def map_and_write(path: Path) -> mmap.mmap:
    """Write the first byte of `path` through a shared memory map, and keep the map: inotify
    reports the open and, when the last reference goes (the map's), the close; not the write."""
    with path.open("r+b") as fh:
        mapped = mmap.mmap(fh.fileno(), 0)
    mapped[0:1] = b"!"
    return mapped


FOLDERS = ["", "notes", "notes/deep", "notes/deep/er", "runs", "build", "logs", "x y"]


def step(rng: random.Random, root: Path, cli: Cli) -> str:
    files, dirs = _files(root), _dirs(root)
    op = rng.choice(["new", "new", "append", "append", "same", "delete", "rmtree", "rename", "rename_dir",
                     "chmod", "symlink", "ignore", "nested", "agent_commit", "rm_cached", "reset", "push",
                     "touch", "ignored_file", "move_in", "unnest", "unnest"])
    n = rng.randrange(10_000)
    if op == "new" or not files:
        rel = "/".join(p for p in (rng.choice(FOLDERS), f"f{n}.{rng.choice(['md', 'log', 'txt'])}") if p)
        write(root, rel, f"new {n}\n")
    elif op == "append":
        target = rng.choice(files)
        with target.open("a") as fh:
            fh.write(f"more {n}\n")
    elif op == "same":
        target = rng.choice(files)
        target.write_bytes(target.read_bytes())
    elif op == "touch":
        os.utime(rng.choice(files), None)
    elif op == "delete":
        rng.choice(files).unlink()
    elif op == "rmtree" and dirs:
        shutil.rmtree(rng.choice(dirs))
    elif op == "rename":
        source = rng.choice(files)
        dest = root / rng.choice(FOLDERS) / f"moved{n}.md"
        dest.parent.mkdir(parents=True, exist_ok=True)
        source.rename(dest)
    elif op == "rename_dir" and dirs:
        source = rng.choice(dirs)
        source.rename(source.parent / f"{source.name}-r{n}")
    elif op == "chmod":
        target = rng.choice(files)
        target.chmod(target.stat().st_mode ^ 0o100)
    elif op == "symlink":
        target = rng.choice(files)
        target.unlink()
        target.symlink_to(f"elsewhere-{n}")
    elif op == "ignore":
        rules = rng.choice(["*.log\n", "build/\n", "*.txt\nlogs/\n", ""])
        write(root, rng.choice(["", "notes/"]) + ".gitignore", rules)
    elif op == "ignored_file":
        write(root, rng.choice(["build", "logs"]) + f"/i{n}.o", "ignored?\n")
    elif op == "nested":
        sub = root / rng.choice(["notes", "runs", "x y"])
        sub.mkdir(exist_ok=True)
        if not (sub / ".git").exists():
            subprocess.run(["git", "init", "-q", str(sub)], check=True)
    elif op == "unnest":
        for name in ("notes", "runs", "x y"):
            shutil.rmtree(root / name / ".git", ignore_errors=True)
    elif op == "agent_commit":
        subprocess.run(["git", "add", "-A", "."], cwd=root, capture_output=True)
        subprocess.run(["git", "-c", "user.name=a", "-c", "user.email=a@b", "commit", "-qm", "agent"], cwd=root,
                       capture_output=True)
    elif op == "rm_cached":
        tracked = git("ls-files", cwd=root).split("\n")
        tracked = [t for t in tracked if t]
        if tracked:
            git("rm", "-q", "--cached", "--", rng.choice(tracked), cwd=root)
    elif op == "reset":
        subprocess.run(["git", "reset", "-q", "HEAD~1"], cwd=root, capture_output=True)
    elif op == "push":
        cli("push", cwd=root)
    elif op == "move_in":
        outside = root.parent / f"outside{n}"  # a folder made elsewhere, moved in whole
        write(outside, "a/b.md", "from outside\n")
        dest = root / rng.choice(["notes", "runs"])
        dest.mkdir(exist_ok=True)
        outside.rename(dest / f"in{n}")
    return op


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.slow
def test_a_narrowed_scan_reports_what_a_full_scan_does(memory: Path, cli: Cli, direct: Direct, seed: int) -> None:
    rng = random.Random(seed)
    scan_both(memory, direct)  # the first scan starts the tracker and sets the baseline
    done = []
    for _ in range(60):
        done.append(step(rng, memory, cli))
        narrowed, full = scan_both(memory, direct)
        assert narrowed == full, " ".join(done)
    assert direct.narrowed >= 5, (direct.narrowed, direct.asked)  # scans really were narrowed (not all can be)


def test_a_narrowed_scan_is_narrow(memory: Path, direct: Direct) -> None:
    """A change inotify cannot see (a write through a shared memory map) is what tells a narrowed
    scan from a full one: the narrowed one does not look at that file. docs/SECURITY.md states
    this limit; a full scan reports it."""
    scan_both(memory, direct)
    mapped = map_and_write(memory / "summary.md")
    try:
        narrowed, full = scan_both(memory, direct)
        assert narrowed.changes == [] and direct.narrowed == 1
        assert [c.path for c in full.changes] == ["summary.md"]
    finally:
        mapped.close()  # the last reference: now the close is reported
    assert [c.path for c in scan_both(memory, direct)[0].changes] == ["summary.md"]


def _answer(trackers: Trackers, root: Path) -> dict[str, object]:
    tracked = trackers.by_root[os.path.realpath(root)]
    return tracked.since()


def test_a_change_made_just_before_since_is_always_in_the_answer(memory: Path, direct: Direct) -> None:
    """The flush: whatever was changed before the question is in the answer, though the events
    reach the tracker on watchdog's threads (without the cookie this fails within a few rounds)."""
    scan_both(memory, direct)  # the baseline
    rng = random.Random(7)
    files: list[str] = []
    for n in range(150):
        op = rng.choice(["new", "append", "chmod", "rename", "delete"]) if files else "new"
        if op == "new":
            name = f"quick/{n % 7}/f{n}.md"
            write(memory, name, "x\n")
            files.append(name)
        else:
            name = files.pop(rng.randrange(len(files)))
            path = memory / name
            if op == "append":
                with path.open("a") as fh:
                    fh.write("more\n")
            elif op == "chmod":
                path.chmod(path.stat().st_mode ^ 0o100)
            elif op == "rename":
                path.rename(path.with_name(f"r{n}.md"))
                files.append(path.with_name(f"r{n}.md").relative_to(memory).as_posix())
            else:
                path.unlink()
            if op in ("append", "chmod"):
                files.append(name)
        answer = _answer(direct.trackers, memory)
        assert "paths" in answer, (n, op)
        assert name in answer["paths"] and (op != "rename" or files[-1] in answer["paths"]), (n, op)  # type: ignore[operator]


def test_the_cookie_never_shows_up_in_a_scan_a_status_or_a_commit(memory: Path, cli: Cli, direct: Direct) -> None:
    scan_both(memory, direct)
    for n in range(3):
        write(memory, f"notes/n{n}.md", f"{n}\n")
        narrowed, full = scan_both(memory, direct)
        assert narrowed == full
        for result in (narrowed, full):
            seen = [c.path for c in result.changes] + list(result.ignored)
            assert not any(treewatch.COOKIE_PREFIX in p for p in seen)
        status = cli("status", "--json", cwd=memory)
        assert status.code == 0 and treewatch.COOKIE_PREFIX not in status.out
        assert cli("push", cwd=memory).code == 0
    assert direct.narrowed >= 3
    everything = git("ls-tree", "-r", "--name-only", "HEAD", cwd=memory) + git("status", "--porcelain", "--ignored",
                                                                               cwd=memory)
    assert treewatch.COOKIE_PREFIX not in everything and "notes/n2.md" in everything
    assert treewatch.COOKIE_PREFIX not in str(hub_tree())
    assert not [p for p in os.listdir(memory / ".git") if p.startswith(treewatch.COOKIE_PREFIX)]  # cleaned up


def test_reads_are_not_events(memory: Path) -> None:
    """Opening and reading files (a scan hashing them, git reading .git) asks nothing of the tracker."""
    tracked = Tracker(os.path.realpath(memory))
    try:
        token = tracked.since()["token"]
        for path in [*memory.rglob("*")]:
            if path.is_file() and not path.is_symlink():
                path.read_bytes()
        assert tracked.since()["token"] == token
        write(memory, "new.md", "x\n")
        assert tracked.since()["token"] > token
    finally:
        tracked.close()


def test_a_killed_servers_cookie_is_removed(memory: Path) -> None:
    stale = memory / ".git" / f"{treewatch.COOKIE_PREFIX}1-dead"
    fresh = memory / ".git" / f"{treewatch.COOKIE_PREFIX}2-live"
    stale.write_bytes(b"")
    fresh.write_bytes(b"")
    os.utime(stale, (1, 1))
    tracked = Tracker(os.path.realpath(memory))
    try:
        assert not stale.exists() and fresh.exists()  # another server's, in flight: left alone
    finally:
        tracked.close()


def test_the_tracker_starts_over_when_it_cannot_be_sure(memory: Path, direct: Direct) -> None:
    from watchdog.observers.inotify_c import InotifyConstants, InotifyEvent, WatchDescriptor

    scan_both(memory, direct)
    tracked = direct.trackers.by_root[os.path.realpath(memory)]
    assert tracked.since().get("paths") is not None
    before = tracked.observer
    (memory / "runs").rename(memory / "runs2")  # a folder renamed: its watches are set up again
    assert "paths" not in tracked.since() and tracked.observer is not before
    assert not before.is_alive()
    for move in ((memory.parent / "outside", memory / "inbound"), (memory / "inbound", memory.parent / "out")):
        scan_both(memory, direct)
        assert tracked.since().get("paths") is not None
        if not move[0].exists():
            write(move[0], "a/b.md", "made elsewhere\n")
        move[0].rename(move[1])  # a folder moved in, then out
        assert "paths" not in tracked.since()
    scan_both(memory, direct)
    assert tracked.since().get("paths") is not None
    # the kernel's queue overflowed: watchdog's own reader is told so, as the kernel tells it
    tracked.observer.reader.handle_event(InotifyEvent(WatchDescriptor(-1), InotifyConstants.IN_Q_OVERFLOW, 0, b""))
    assert "paths" not in tracked.since()
    scan_both(memory, direct)
    assert tracked.since().get("paths") is not None
    shutil.rmtree(memory / ".git")  # the repository itself replaced: never the old baseline
    subprocess.run(["git", "init", "-q", str(memory)], check=True)
    assert "paths" not in tracked.since()


def test_more_touched_paths_than_a_narrowed_scan_saves(memory: Path) -> None:
    source = Direct(Limits(max_paths=6))
    try:
        scan_both(memory, source)  # its baseline: .vm0/storage.yaml differs (ignored)
        for n in range(3):
            write(memory, f"few/{n}.md", "x\n")
        assert len(_answer(source.trackers, memory)["paths"]) == 5  # type: ignore[arg-type]
        for n in range(13):  # more than twice max_paths: the tracker starts over
            write(memory, f"many/{n}.md", "x\n")
        assert "paths" not in _answer(source.trackers, memory)
        narrowed, full = scan_both(memory, source)
        assert narrowed == full
    finally:
        hints.source = None
        source.trackers.close()


def test_an_older_scan_never_replaces_a_newer_baseline(memory: Path) -> None:
    tracked = Tracker(os.path.realpath(memory))
    try:
        write(memory, "a.md", "a\n")
        token = tracked.since()["token"]
        tracked.hand_back(token, "t" * 40, "fp", ["a.md"], False)
        assert tracked.baseline is None  # a narrowed scan never starts a baseline
        tracked.hand_back(token, "t" * 40, "fp", ["a.md"], True)
        newer = tracked.baseline
        tracked.hand_back(token - 1, "u" * 40, "fp", [], True)
        assert tracked.baseline == newer
        write(memory, "b.md", "b\n")
        assert tracked.since()["paths"] == ["a.md", "b.md"]
    finally:
        tracked.close()


def test_every_so_often_a_scan_is_a_full_one(memory: Path) -> None:
    for every, narrowed in ((0.0, False), (300.0, True)):
        source = Direct(Limits(full_every=every))
        try:
            scan_both(memory, source)
            write(memory, "later.md", f"{every}\n")
            assert ("paths" in _answer(source.trackers, memory)) is narrowed
        finally:
            hints.source = None
            source.trackers.close()


def test_a_memory_with_too_many_folders_is_not_tracked(memory: Path) -> None:
    small = Direct(Limits(max_dirs=2))
    try:
        assert small.trackers.since(os.path.realpath(memory)) is None
        assert small.trackers.by_root == {}
        narrowed, full = scan_both(memory, small)
        assert narrowed == full and small.narrowed == 0
    finally:
        hints.source = None
    growing = Trackers(limits=Limits(max_dirs=4))  # the root, runs/, .vm0/ and one more
    try:
        root = os.path.realpath(memory)
        assert growing.since(root) is not None
        for n in range(3):
            (memory / f"d{n}").mkdir()
        assert growing.since(root) is None and root not in growing.by_root  # dropped as it grew past
        assert growing.since(root) is None  # and not tried again at once
    finally:
        growing.close()


def test_only_memories_on_a_local_file_system_are_tracked(tmp_path: Path) -> None:
    """A network or FUSE file system can change without an event here: never tracked."""
    info = tmp_path / "mountinfo"
    info.write_text("22 1 8:1 / / rw - ext4 /dev/sda1 rw\n"
                    "30 22 0:40 / /mnt/nfs rw - nfs4 server:/x rw\n"
                    "31 22 0:41 / /home/a\\040b rw - fuse.sshfs host: rw\n"
                    "32 30 0:42 / /mnt/nfs/local rw - tmpfs tmpfs rw\n")
    assert treewatch.filesystem("/srv/mem", str(info)) == "ext4"
    assert treewatch.filesystem("/mnt/nfs/mem", str(info)) == "nfs4"
    assert treewatch.filesystem("/mnt/nfsx", str(info)) == "ext4"
    assert treewatch.filesystem("/home/a b/mem", str(info)) == "fuse.sshfs"
    assert treewatch.filesystem("/mnt/nfs/local/m", str(info)) == "tmpfs"
    assert treewatch.filesystem("/x", str(tmp_path / "none")) is None
    for kind in ("nfs4", "fuse.sshfs", "cifs", "9p", "virtiofs", None):
        assert kind not in treewatch.LOCAL_FILESYSTEMS


def test_only_a_real_memory_root_is_tracked(tmp_path: Path, memory: Path, direct: Direct) -> None:
    assert direct.trackers.since(str(tmp_path / "nowhere")) is None
    assert direct.trackers.since("relative/path") is None
    (tmp_path / "link").symlink_to(memory)
    assert direct.trackers.since(str(tmp_path / "link")) is None  # only the resolved path
    assert direct.trackers.by_root == {}


# -- through a real server ----------------------------------------------------------------------
needs_peercred = pytest.mark.skipif(not hasattr(socket, "SO_PEERCRED"), reason="Linux peer credentials")


AGENT = """\
import os, pathlib, sys
root, n = pathlib.Path("."), sys.argv[1]
(root / "notes" / n).mkdir(parents=True, exist_ok=True)
(root / "notes" / n / "a.md").write_text(n)
(root / "summary.md").write_text("summary " + n)
for old in root.glob("gone-*.md"):
    old.unlink()
(root / f"gone-{n}.md").write_text("x")
if n == "3":
    os.rename("notes", "notes-moved")
for fd in os.listdir("/proc/self/fd"):
    try:
        print(fd, os.readlink(f"/proc/self/fd/{fd}"))
    except OSError:
        pass
"""


@needs_peercred
@pytest.mark.slow
def test_served_runs_record_every_change_an_agent_makes(tmp_path: Path, memory: Path) -> None:
    from tests.servers.test_serve import start_server, stop

    server = start_server(tmp_path / "s.sock")
    try:
        env = server.env()
        agent = tmp_path / "agent.py"
        agent.write_text(AGENT)
        for n in range(1, 6):
            proc = subprocess.run([sys.executable, "-m", "memsync", "run", "--", sys.executable, str(agent), str(n)],
                                  cwd=memory, env=env, capture_output=True, text=True, timeout=120,
                                  stdin=subprocess.DEVNULL)
            assert proc.returncode == 0, proc.stderr
            on_disk = {str(p.relative_to(memory)): p.read_bytes() for p in _files(memory)}
            assert hub_tree() == on_disk, n  # everything the agent did is in the run's version
            assert "socket:" not in proc.stdout  # the agent holds no line to the server (nor any socket)
            assert "inotify" not in proc.stdout  # nor any of its watches, whose events it could take
            write(memory, f"between-{n}.md", "written between runs\n")
            plain = memsync_cmd("status", "--json", cwd=memory)
            served = memsync_cmd("status", "--json", cwd=memory, env=env)
            assert served.stdout == plain.stdout
        # The served scans really are narrowed: a write inotify cannot see (through a shared memory
        # map, the documented limit) is not looked for by the server's status, only by a full one.
        mapped = map_and_write(memory / "summary.md")
        try:
            assert "summary.md" not in memsync_cmd("status", cwd=memory, env=env).stdout
            assert "summary.md" in memsync_cmd("status", cwd=memory).stdout
        finally:
            mapped.close()
    finally:
        stop(server)
    untracked = start_server(tmp_path / "s2.sock", options=("--no-track",))
    try:
        for _ in range(2):
            assert "summary.md" in memsync_cmd("status", cwd=memory, env=untracked.env()).stdout
    finally:
        stop(untracked)


def test_narrowed_diffs_around_a_libgit2_path_list_bug(tmp_path: Path) -> None:
    """libgit2 1.9 given the path list [notes, notes-r1] skips index entries under notes/ and
    reports their files as untracked; diff_to_workdir asks one entry at a time."""
    import pygit2
    from pygit2.enums import DiffOption

    from memsync.git.workdiff import diff_to_workdir

    root = tmp_path / "r"
    for rel in ("notes/deep/er/a.md", "notes/deep/c.md", "notes-r1/deep/b.md"):
        write(root, rel, rel)
    git("init", "-q", cwd=root)
    git("add", "-A", cwd=root)
    git("-c", "user.name=a", "-c", "user.email=b@c", "commit", "-qm", "i", cwd=root)
    shutil.rmtree(root / "notes" / "deep" / "er")
    shutil.rmtree(root / "notes-r1")
    repo = pygit2.Repository(str(root))
    flags = DiffOption.INCLUDE_UNTRACKED | DiffOption.RECURSE_UNTRACKED_DIRS | DiffOption.INCLUDE_IGNORED

    def seen(paths: list[str] | None) -> set[str]:
        return diff_to_workdir(repo, repo.index, flags, paths).paths()

    assert seen(["notes", "notes-r1"]) == seen(None) == {"notes/deep/er/a.md", "notes-r1/deep/b.md"}
    assert seen(["notes"]) == {"notes/deep/er/a.md"}
    assert seen([]) == set()


MMAP_AGENT = """\
import mmap
with open("summary.md", "r+b") as fh, mmap.mmap(fh.fileno(), 0) as mapped:
    mapped[0:1] = b"!"
"""


@needs_peercred
@pytest.mark.slow
def test_a_served_run_records_writes_inotify_cannot_see(tmp_path: Path, memory: Path) -> None:
    """An agent that writes through a shared memory map (no inotify event) to keep its change out
    of its run's record: the record is made from a full scan, so the change is in it."""
    from tests.servers.test_serve import start_server, stop

    server = start_server(tmp_path / "s.sock")
    try:
        env = server.env()
        for _ in range(2):  # the tracker's baseline is set: scans from here on could be narrowed
            assert memsync_cmd("status", cwd=memory, env=env).returncode == 0
        agent = tmp_path / "agent.py"
        agent.write_text(MMAP_AGENT)
        proc = subprocess.run([sys.executable, "-m", "memsync", "run", "--run-id", "mapped", "--",
                               sys.executable, str(agent)], cwd=memory, env=env, capture_output=True, text=True,
                              timeout=120, stdin=subprocess.DEVNULL)
        assert proc.returncode == 0, proc.stderr
        assert hub_tree()["summary.md"] == b"!" + b"# Summary\n\nfirst line\n"[1:]
        assert "mapped" in git("log", "-1", "--format=%B", "memory/research", cwd=hub_path())
    finally:
        stop(server)


@needs_peercred
@pytest.mark.slow
def test_a_served_restore_never_overwrites_a_change_inotify_cannot_see(tmp_path: Path, memory: Path) -> None:
    """restore, revert and redact overwrite files on the strength of a scan: theirs are full ones,
    so a change written through a memory map is seen (restore refuses without --force), not lost."""
    from tests.servers.test_serve import start_server, stop

    write(memory, "summary.md", "# Summary\n\nsecond line\n")
    assert memsync_cmd("push", cwd=memory).returncode == 0
    server = start_server(tmp_path / "s.sock")
    try:
        env = server.env()
        for _ in range(2):
            assert memsync_cmd("status", cwd=memory, env=env).returncode == 0
        mapped = map_and_write(memory / "summary.md")
        try:
            proc = memsync_cmd("restore", "summary.md", "--at", "HEAD~1", cwd=memory, env=env)
        finally:
            mapped.close()
        assert proc.returncode != 0 and "uncommitted" in proc.stderr
        assert (memory / "summary.md").read_bytes() == b"!" + b"# Summary\n\nsecond line\n"[1:]
    finally:
        stop(server)


def test_a_dropped_tracker_stops_its_threads(memory: Path, direct: Direct) -> None:
    root = os.path.realpath(memory)
    assert direct.trackers.since(root) is not None
    tracked = direct.trackers.by_root[root]
    observer = tracked.observer
    threads = [observer, observer.reader, *observer.emitters]
    direct.trackers.drop(root)
    assert tracked.observer is None and root not in direct.trackers.by_root
    assert not any(t.is_alive() for t in threads)


def test_a_symlinked_rule_file_means_full_scans(memory: Path, direct: Direct) -> None:
    """A .gitignore that is a symlink changes with its target, and no event names the .gitignore:
    found by the differential test (the narrowed scan still listed a newly ignored file)."""
    write(memory, "rules.txt", "")
    (memory / ".gitignore").symlink_to("rules.txt")
    git("add", "rules.txt", ".gitignore", cwd=memory)
    git("-c", "user.name=a", "-c", "user.email=b@c", "commit", "-qm", "rules", cwd=memory)
    write(memory, "logs/debug.log", "x\n")
    scan_both(memory, direct)
    (memory / "rules.txt").write_text("logs/\n")  # the rules change; the event names rules.txt
    narrowed, full = scan_both(memory, direct)
    # a symlinked .gitignore is no rule of the operator's (git does not follow one either): the file is a change
    assert narrowed == full and "logs/debug.log" in [c.path for c in full.changes]
    (memory / ".gitignore").unlink()
    write(memory, ".gitignore", "*.tmp\n")
    scan_both(memory, direct)
    assert "paths" in direct.trackers.by_root[os.path.realpath(memory)].since()  # narrowed again


def test_files_leaving_the_index_under_an_ignored_folder(memory: Path, direct: Direct) -> None:
    """Found by the differential test: once the index has nothing left under an ignored folder,
    git reports the folder as one entry; a scan narrowed to the file alone missed it."""
    write(memory, "logs/a/run.log", "x\n")
    write(memory, ".gitignore", "logs/\n")
    git("add", "-f", "logs", ".gitignore", cwd=memory)
    git("-c", "user.name=a", "-c", "user.email=b@c", "commit", "-qm", "logs", cwd=memory)
    scan_both(memory, direct)
    git("rm", "-rq", "--cached", "logs", cwd=memory)
    narrowed_before = direct.narrowed
    narrowed, full = scan_both(memory, direct)
    assert direct.narrowed == narrowed_before + 1  # the scan was a narrowed one
    assert narrowed == full and any(p.startswith("logs/") for p in full.ignored)  # file by file


def test_a_narrowed_scan_refreshes_what_it_hashed(memory: Path, cli: Cli, direct: Direct) -> None:
    """Entries memsync staged without stat data (fresh files: snapshot's 2-second rule) are
    hashed by the next scan; a narrowed one refreshes them as a full one does (libgit2 writes the
    index from inside each diff that refreshed one), so the scan after it hashes nothing."""
    names = [f"top{i}/note.md" for i in range(6)]
    scan_both(memory, direct)  # the tracker's baseline
    for name in names:
        fresh_for_a_minute(write(memory, name, f"{name}\n"))
    assert cli("push", cwd=memory).code == 0  # six fresh files: staged without stat data
    for name in names:
        assert any(line.strip() == "mtime: 0:0" for line in git("ls-files", "--debug", name, cwd=memory).splitlines())
    assert scan(GitRepo.open(memory)).changes == []
    assert direct.narrowed >= 2
    for name in names:
        lines = git("ls-files", "--debug", name, cwd=memory).splitlines()
        assert not any(line.strip() == "mtime: 0:0" for line in lines), name
