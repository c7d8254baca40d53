"""Change trackers (memsync/serve/tracker.py): a narrowed scan reports exactly what a full scan does.

Real inotify on a real memory. The differential tests make random changes of every kind a user,
an agent or git can make (new folders, renames, deletions, mode changes, symlinks, .gitignore
edits, nested repositories, agent commits, `git rm --cached`, `git reset`, memsync's own
pushes) and after each one compare the scan a tracker narrowed with a full scan of the same tree.
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
from memsync.serve import tracker as tracker_mod
from memsync.serve.tracker import Tracker, Trackers
from memsync.serve.tracklink import Local
from tests.conftest import Cli, fresh_for_a_minute, git, hub_path, hub_tree, memsync_cmd, write

pytestmark = pytest.mark.skipif(
    tracker_mod.INotify is None  # type: ignore[attr-defined]
    or tracker_mod.filesystem(os.path.realpath(tempfile.gettempdir()))
    not in tracker_mod.LOCAL_FILESYSTEMS, reason="inotify (Linux) on a local file system")


class Direct(Local):
    """The server's trackers reached in-process, as a worker's line reaches them; counts narrowed scans."""

    def __init__(self) -> None:
        super().__init__(Trackers())
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
    this limit; the next full scan (here: after the tracker starts over) reports it."""
    scan_both(memory, direct)
    target = memory / "summary.md"
    with target.open("r+b") as fh, mmap.mmap(fh.fileno(), 0) as mapped:
        mapped[0:1] = b"!"
    g = GitRepo.open(memory)
    assert scan(g).changes == []
    assert direct.narrowed == 1
    direct.trackers.by_root[os.path.realpath(memory)]._forget()
    assert [c.path for c in scan(GitRepo.open(memory)).changes] == ["summary.md"]


def test_the_tracker_starts_over_when_it_cannot_be_sure(memory: Path, direct: Direct) -> None:
    scan_both(memory, direct)
    root = os.path.realpath(memory)
    tracked = direct.trackers.by_root[root]
    assert tracked.since().get("paths") is not None
    before = tracked.inotify
    (memory / "runs").rename(memory / "runs2")  # a folder renamed: the watches under it name old paths
    assert "paths" not in tracked.since() and tracked.inotify is not before
    scan_both(memory, direct)
    assert tracked.since().get("paths") is not None
    with pytest.raises(tracker_mod._Restart):
        tracked._take(-1, int(tracker_mod.flags.Q_OVERFLOW), "")  # type: ignore[attr-defined]
    for name in range(2 * hints.MAX_PATHS + 1):  # more touched paths than a narrowed scan saves
        tracked.gen += 1
        tracked.dirty[f"p{name}"] = tracked.gen
    tracked.drain()
    assert "paths" not in tracked.since()
    scan_both(memory, direct)
    shutil.rmtree(memory / ".git")  # the repository itself replaced: never the old baseline
    subprocess.run(["git", "init", "-q", str(memory)], check=True)
    assert "paths" not in tracked.since()


def test_an_older_scan_never_replaces_a_newer_baseline(memory: Path) -> None:
    tracked = Tracker(os.path.realpath(memory))
    try:
        write(memory, "a.md", "a\n")
        tracked.drain()
        tracked.settled(tracked.gen, "t" * 40, "fp", ["a.md"], False)
        assert tracked.baseline is None  # a narrowed scan never starts a baseline
        tracked.settled(tracked.gen, "t" * 40, "fp", ["a.md"], True)
        newer = tracked.baseline
        tracked.settled(tracked.gen - 1, "u" * 40, "fp", [], True)
        assert tracked.baseline == newer
        write(memory, "b.md", "b\n")
        assert tracked.since()["paths"] == ["a.md", "b.md"]
    finally:
        tracked.close()


def test_every_so_often_a_scan_is_a_full_one(memory: Path, direct: Direct, monkeypatch: pytest.MonkeyPatch) -> None:
    scan_both(memory, direct)
    tracked = direct.trackers.by_root[os.path.realpath(memory)]
    assert "paths" in tracked.since()
    scan_both(memory, direct)  # a narrowed scan: the baseline keeps the time of the full one
    monkeypatch.setattr(tracker_mod, "FULL_EVERY", 0.0)
    assert "paths" not in tracked.since()
    monkeypatch.setattr(tracker_mod, "FULL_EVERY", 300.0)
    scan_both(memory, direct)
    assert "paths" in tracked.since()


def test_a_memory_with_too_many_folders_is_not_tracked(memory: Path, direct: Direct,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tracker_mod, "MAX_DIRS", 2)
    assert direct.trackers.since(os.path.realpath(memory)) is None
    assert direct.trackers.by_root == {}
    narrowed, full = scan_both(memory, direct)
    assert narrowed == full and direct.narrowed == 0


def test_only_memories_on_a_local_file_system_are_tracked(tmp_path: Path) -> None:
    """A network or FUSE file system can change without an event here: never tracked."""
    info = tmp_path / "mountinfo"
    info.write_text("22 1 8:1 / / rw - ext4 /dev/sda1 rw\n"
                    "30 22 0:40 / /mnt/nfs rw - nfs4 server:/x rw\n"
                    "31 22 0:41 / /home/a\\040b rw - fuse.sshfs host: rw\n"
                    "32 30 0:42 / /mnt/nfs/local rw - tmpfs tmpfs rw\n")
    assert tracker_mod.filesystem("/srv/mem", str(info)) == "ext4"
    assert tracker_mod.filesystem("/mnt/nfs/mem", str(info)) == "nfs4"
    assert tracker_mod.filesystem("/mnt/nfsx", str(info)) == "ext4"
    assert tracker_mod.filesystem("/home/a b/mem", str(info)) == "fuse.sshfs"
    assert tracker_mod.filesystem("/mnt/nfs/local/m", str(info)) == "tmpfs"
    assert tracker_mod.filesystem("/x", str(tmp_path / "none")) is None
    for kind in ("nfs4", "fuse.sshfs", "cifs", "9p", "virtiofs", None):
        assert kind not in tracker_mod.LOCAL_FILESYSTEMS


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
            write(memory, f"between-{n}.md", "written between runs\n")
            plain = memsync_cmd("status", "--json", cwd=memory)
            served = memsync_cmd("status", "--json", cwd=memory, env=env)
            assert served.stdout == plain.stdout
        # The served scans really are narrowed: a write inotify cannot see (through a shared memory
        # map, the documented limit) is not looked for by the server's status, only by a full one.
        with (memory / "summary.md").open("r+b") as fh, mmap.mmap(fh.fileno(), 0) as mapped:
            mapped[0:1] = b"!"
        assert "summary.md" not in memsync_cmd("status", cwd=memory, env=env).stdout
        assert "summary.md" in memsync_cmd("status", cwd=memory).stdout
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
        with (memory / "summary.md").open("r+b") as fh, mmap.mmap(fh.fileno(), 0) as mapped:
            mapped[0:1] = b"!"
        proc = memsync_cmd("restore", "summary.md", "--at", "HEAD~1", cwd=memory, env=env)
        assert proc.returncode != 0 and "uncommitted" in proc.stderr
        assert (memory / "summary.md").read_bytes() == b"!" + b"# Summary\n\nsecond line\n"[1:]
    finally:
        stop(server)


def test_a_dropped_tracker_is_never_drained(memory: Path, direct: Direct) -> None:
    """The server's selector may report a tracker ready after a newer memory evicted it."""
    root = os.path.realpath(memory)
    assert direct.trackers.since(root) is not None
    tracked = direct.trackers.by_root[root]
    direct.trackers.drop(root)
    write(memory, "late.md", "x\n")
    direct.trackers.drain(tracked)  # no error, nothing done
    assert tracked.inotify is None and root not in direct.trackers.by_root


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
