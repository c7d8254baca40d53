"""`run --as-user`: an agent under another uid that races memsync never reaches root's files.

Each attack loops its swap (a folder of the work tree replaced by a symlink to a root-only folder
and back) while memsync works on the tree as root; what memsync reads, commits, chowns or writes
must never be what the symlink names. The agent is a throwaway user made for this module (never
`nobody`: memsync ends every process of the user after a run)."""

from __future__ import annotations

import os
import pwd
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import git, hub_path, hub_tree, memsync_cmd, write
from tests.helpers.agent_user import SYSTEM_PYTHON, end_all, live, skip_unless_root
from tests.helpers.figures import Figures, figures

pytestmark = [pytest.mark.attack, pytest.mark.slow]

__all__ = ["figures"]

# How long each in-process race loops (seconds); a campaign sets more (MEMSYNC_RACE_SECONDS=60)
RACE_SECONDS = float(os.environ.get("MEMSYNC_RACE_SECONDS", "4"))

# Swaps `d` for a symlink to the root-only folder and back, rewriting d's files between swaps so
# the scan keeps finding them changed; stops when `stop` appears (or after `seconds`).
SWAPPER = r"""
import os, sys, time
root, target, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
hold = float(sys.argv[4]) if len(sys.argv) > 4 else 0.0
rewrite = int(sys.argv[5]) if len(sys.argv) > 5 else 20  # 0: write d's files once, at the start
count = int(sys.argv[6]) if len(sys.argv) > 6 else 10
os.chdir(root)
end = time.monotonic() + seconds
n = 0
while time.monotonic() < end and not os.path.exists("stop"):
    n += 1
    try:
        if n == 1 or (rewrite and n % rewrite == 0):
            for i in range(count):
                with open(f"d/f{i}", "w") as fh:
                    fh.write(f"agent {n}\n")
        os.rename("d", "d.real")
        os.symlink(target, "d")
        if hold:
            time.sleep(hold)
        os.rename("d", "d.link")
        os.rename("d.real", "d")
        os.unlink("d.link")
    except OSError:
        for name in ("d.link",):
            try:
                os.unlink(name)
            except OSError:
                pass
        if not os.path.isdir("d") and os.path.isdir("d.real"):
            try:
                os.rename("d.real", "d")
            except OSError:
                pass
"""


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A directory other users can enter (pytest's tmp_path is private to root)."""
    base = Path(tempfile.mkdtemp(prefix="memsync-race-"))
    base.chmod(0o755)
    yield base
    shutil.rmtree(base, ignore_errors=True)


def _secret_folder(base: Path) -> Path:
    """A folder of root's the agent cannot read, holding files named like the agent's."""
    secret = base / "root-only"
    secret.mkdir()
    for i in range(10):
        (secret / f"f{i}").write_text(f"ROOT-SECRET-{i}\n")
        (secret / f"f{i}").chmod(0o600)
    (secret / "key").write_text("ROOT-KEY\n")
    (secret / "key").chmod(0o600)
    secret.chmod(0o700)
    return secret


def _memory(base: Path, count: int = 10) -> Path:
    mem = base / "mem"
    mem.mkdir()
    assert memsync_cmd("init", "--name", "research", cwd=mem).returncode == 0
    for i in range(count):
        write(mem, f"d/f{i}", f"base {i}\n")
    assert memsync_cmd("push", cwd=mem).returncode == 0
    return mem


def _swapper(mem: Path, target: Path, seconds: float, user: pwd.struct_passwd | None,
             hold: float = 0.0, rewrite: int = 20, count: int = 10) -> subprocess.Popen[bytes]:
    extra: dict[str, object] = {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []} if user else {}
    proc: subprocess.Popen[bytes] = subprocess.Popen(  # type: ignore[call-overload]
        [SYSTEM_PYTHON, "-c", SWAPPER, str(mem), str(target), str(seconds), str(hold), str(rewrite), str(count)],
        cwd="/", **extra)
    return proc


def _secret_committed(mem: Path) -> list[str]:
    revs = git("rev-list", "--all", cwd=mem).split()
    found = subprocess.run(["git", "grep", "-l", "-e", "ROOT-SECRET", "-e", "ROOT-KEY", *revs], cwd=mem,
                           capture_output=True, text=True, check=False)
    return found.stdout.split()


def test_snapshot_never_commits_what_a_swapped_folder_points_to(open_dir: Path, figures: Figures) -> None:
    """The snapshot reads the changed files while `d` flips between a folder and a symlink to
    root's folder: every read goes through folder descriptors, so root's files never reach a
    commit, and no snapshot fails."""
    skip_unless_root()
    from memsync.core.attribution import Attribution
    from memsync.core.memory import open_memory
    from memsync.core.snapshot import take

    secret = _secret_folder(open_dir)
    mem = _memory(open_dir)
    memory = open_memory(mem)
    proc = _swapper(mem, secret, 30, None)
    taken = 0
    errors: list[str] = []
    try:
        deadline = time.monotonic() + RACE_SECONDS
        while time.monotonic() < deadline:
            taken += 1
            try:
                with memory.locked():
                    take(memory, Attribution("run", f"Checkpoint {taken}", "race"))
            except Exception as exc:  # a race must not fail a snapshot either
                errors.append(f"{type(exc).__name__}: {exc}")
            if _secret_committed(mem):
                break
    finally:
        (mem / "stop").touch()
        proc.wait(timeout=30)
    figures.add("as-user race: snapshots while d flips", taken)
    assert _secret_committed(mem) == [], f"root's files committed after {taken} snapshots"
    assert taken >= 5
    assert errors == []


def test_protect_policy_never_writes_through_a_swapped_folder(open_dir: Path, agent_user: pwd.struct_passwd,
                                                             figures: Figures) -> None:
    """`d/*` is read-only: each snapshot puts the previous version back at `d/fN` and keeps the
    agent's beside it, while the agent flips `d` between a folder and a symlink to root's folder.
    Those writes go through folder descriptors: root's folder is never written to."""
    from memsync.core.attribution import Attribution
    from memsync.core.memory import open_memory
    from memsync.core.snapshot import take
    from memsync.run import runas

    secret = _secret_folder(open_dir)
    before = {p.name: p.read_bytes() for p in secret.iterdir()}
    mem = _memory(open_dir, 100)
    with (mem / ".vm0" / "storage.yaml").open("a") as fh:
        fh.write("protect:\n  - path: 'd/*'\n    mode: read-only\n")
    memory = open_memory(mem)
    runas.hand_over(mem, runas.resolve(agent_user.pw_name))
    proc = _swapper(mem, secret, 30, agent_user, hold=0.0002, rewrite=20, count=100)
    taken = 0
    errors: list[str] = []
    try:
        deadline = time.monotonic() + RACE_SECONDS
        while time.monotonic() < deadline:
            taken += 1
            try:
                with memory.locked():
                    take(memory, Attribution("run", f"Checkpoint {taken}", "race"))
            except Exception as exc:  # a race must not fail a snapshot either
                errors.append(f"{type(exc).__name__}: {exc}")
            if {p.name: p.read_bytes() for p in secret.iterdir()} != before:
                break
    finally:
        (mem / "stop").touch()
        proc.wait(timeout=30)
    figures.add("as-user race: protect restores while d flips (snapshots)", taken)
    after = {p.name: p.read_bytes() for p in secret.iterdir()}
    assert after == before, f"root's folder written to after {taken} snapshots"
    assert taken >= 5
    assert errors == []


def test_hand_over_never_chowns_what_a_swapped_folder_points_to(open_dir: Path, agent_user: pwd.struct_passwd,
                                                               figures: Figures) -> None:
    """A process of the agent's left running swaps `d` while the next run lends it the tree:
    root's 0600 files behind the symlink keep their owner, and the hand-over never fails."""
    from memsync.run import runas

    secret = _secret_folder(open_dir)
    mem = _memory(open_dir)
    user = runas.resolve(agent_user.pw_name)
    runas.hand_over(mem, user)  # the agent owns `d` and may rename it, as during a run
    proc = _swapper(mem, secret, 30, agent_user, hold=0.001)
    rounds = errors = 0
    try:
        deadline = time.monotonic() + RACE_SECONDS
        while time.monotonic() < deadline:
            rounds += 1
            try:
                runas.hand_over(mem, user)
            except OSError:
                errors += 1
            if any(p.stat().st_uid != 0 for p in secret.iterdir()):
                break
    finally:
        (mem / "stop").touch()
        proc.wait(timeout=30)
    figures.add("as-user race: hand-overs while d flips", rounds)
    taken = [p.name for p in secret.iterdir() if p.stat().st_uid != 0]
    assert taken == [], f"root's files chowned to the agent after {rounds} hand-overs"
    assert rounds >= 5
    assert errors == 0


def test_hand_back_never_changes_what_a_swapped_folder_points_to(open_dir: Path, agent_user: pwd.struct_passwd,
                                                                figures: Figures) -> None:
    """Hand-back sets owners and modes (0644 for a file it does not know): looped with hand-overs
    while the agent flips `d`, root's 0600 files behind the symlink keep their owner and mode."""
    from memsync.run import runas

    secret = _secret_folder(open_dir)
    before = {p.name: (p.stat().st_uid, p.stat().st_mode) for p in secret.iterdir()}
    mem = _memory(open_dir)
    user = runas.resolve(agent_user.pw_name)
    proc = _swapper(mem, secret, 30, agent_user, hold=0.001)
    rounds = 0
    errors: list[str] = []
    try:
        deadline = time.monotonic() + RACE_SECONDS
        while time.monotonic() < deadline:
            rounds += 1
            try:
                lent = runas.hand_over(mem, user)
                time.sleep(0.002)  # the agent's turn
                runas.hand_back(mem, lent, user)
            except OSError as exc:
                errors.append(f"{type(exc).__name__}: {exc}")
            if {p.name: (p.stat().st_uid, p.stat().st_mode) for p in secret.iterdir()} != before:
                break
    finally:
        (mem / "stop").touch()
        proc.wait(timeout=30)
    figures.add("as-user race: hand-backs while d flips", rounds)
    assert {p.name: (p.stat().st_uid, p.stat().st_mode) for p in secret.iterdir()} == before
    assert rounds >= 5
    assert errors == []


def test_checkpoints_during_an_as_user_run_never_push_what_a_swapped_folder_points_to(
        open_dir: Path, agent_user: pwd.struct_passwd, figures: Figures) -> None:
    """The attack as reported: the command itself swaps `d` for a symlink to root's folder in a
    loop while memsync checkpoints (as root) every 0.3 s; nothing of root's reaches the hub."""
    secret = _secret_folder(open_dir)
    mem = _memory(open_dir)
    env = dict(os.environ, MEMSYNC_QUIET="0.2", MEMSYNC_SETTLE="0.1")
    proc = memsync_cmd("run", "--as-user", agent_user.pw_name, "--memory", "research:mem", "--run-id", "swapper",
                       "--checkpoint", "0.3", "--", SYSTEM_PYTHON, "-c", SWAPPER, str(mem), str(secret), "4", "0", "0",
                       cwd=open_dir, env=env)
    end_all(agent_user.pw_uid)
    assert proc.returncode == 0, proc.stderr
    checkpoints = git("log", "--format=%s", "memory/research", cwd=hub_path()).count("Checkpoint")
    found = subprocess.run(["git", "grep", "-l", "-e", "ROOT-SECRET", "-e", "ROOT-KEY",
                            *git("rev-list", "--all", cwd=hub_path()).split()],
                           cwd=hub_path(), capture_output=True, text=True, check=False).stdout.split()
    figures.add("as-user race: checkpoints pushed while the command flips d", checkpoints)
    assert found == [], f"root's files pushed ({checkpoints} checkpoints)"
    assert checkpoints >= 1  # memsync did work during the race (how often depends on the load)
    assert "Traceback" not in proc.stderr


LEAVE_BEHIND = r"""
import os, sys, subprocess
memory = os.environ["MEMSYNC_MEMORY_DIR"]
target = sys.argv[1]
# what an agent can see of memsync's own state during the run
for own in (".git", ".vm0"):
    try:
        os.listdir(os.path.join(memory, own))
        print("read", own)
    except OSError:
        print("denied", own)
# modes a later run or user could use: world-writable, set-uid, a world-writable new folder
for name in ("top.md", "d/f0", "d/f1"):
    os.chmod(os.path.join(memory, name), 0o4777)
os.mkdir(os.path.join(memory, "open"))
os.chmod(os.path.join(memory, "open"), 0o777)
with open(os.path.join(memory, "open", "new.md"), "w") as fh:
    fh.write("new\n")
os.chmod(os.path.join(memory, "open", "new.md"), 0o666)
# and a swapper left running after the command exits
subprocess.Popen([sys.executable, "-c", sys.argv[2], memory, target, "60"], start_new_session=True,
                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print("left a swapper")
"""


def test_as_user_run_ends_the_agents_processes_and_takes_the_tree_back(open_dir: Path,
                                                                       agent_user: pwd.struct_passwd) -> None:
    """The command leaves a swapper running and loose modes behind: memsync ends every process of
    the agent's uid before it hands the tree back and saves it, the saved tree holds none of
    root's files, every entry is root's again with a sane mode, and .git / .vm0 were closed to
    the agent during the run."""
    secret = _secret_folder(open_dir)
    mem = _memory(open_dir)
    write(mem, "top.md", "top\n").chmod(0o640)
    assert memsync_cmd("push", cwd=mem).returncode == 0
    git_mode = stat.S_IMODE((mem / ".git").stat().st_mode)
    proc = memsync_cmd("run", "--as-user", agent_user.pw_name, "--memory", "research:mem", "--run-id", "left-behind",
                       "--checkpoint", "0", "--", SYSTEM_PYTHON, "-c", LEAVE_BEHIND, str(secret), SWAPPER,
                       cwd=open_dir)
    left = live(agent_user.pw_uid)
    end_all(agent_user.pw_uid)  # whatever the outcome, nothing keeps running
    assert proc.returncode == 0, proc.stderr
    assert "left a swapper" in proc.stdout
    assert left == [], "the agent's processes outlived the run"
    assert "denied .git" in proc.stdout and "denied .vm0" in proc.stdout, proc.stdout
    assert _secret_committed(mem) == []
    for path in _entries(mem):
        st = path.lstat()
        assert (st.st_uid, st.st_gid) == (0, 0), path
        assert not st.st_mode & 0o7002 or stat.S_ISLNK(st.st_mode), (path, oct(st.st_mode))
    assert stat.S_IMODE((mem / "top.md").lstat().st_mode) == 0o640  # as lent (`d` may be the swapper's symlink)
    assert stat.S_IMODE((mem / "open").lstat().st_mode) == 0o777 & ~_umask()
    assert stat.S_IMODE((mem / "open" / "new.md").lstat().st_mode) == 0o666 & ~_umask()
    assert stat.S_IMODE((mem / ".git").lstat().st_mode) == git_mode


def _entries(mem: Path) -> list[Path]:
    """The memory folder and everything in its work tree (never following a symlink)."""
    found = [mem]
    for here, dirs, files in os.walk(mem):
        if Path(here) == mem:
            dirs[:] = [d for d in dirs if d != ".git"]
        found += [Path(here, n) for n in dirs + files]
    return found


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_a_process_left_by_an_earlier_run_is_ended_before_the_pre_run_save(open_dir: Path,
                                                                           agent_user: pwd.struct_passwd) -> None:
    """memsync was killed during a run: the tree is still the agent's and its swapper still runs.
    The next run ends it before it saves what the dead run left, so that save commits none of
    root's files and does not fail."""
    from memsync.run import runas

    secret = _secret_folder(open_dir)
    mem = _memory(open_dir)
    runas.hand_over(mem, runas.resolve(agent_user.pw_name))  # as the killed run left it
    swapper = _swapper(mem, secret, 60, agent_user)
    try:
        time.sleep(0.3)  # the swapper is under way (it stops by itself after 60 s)
        proc = memsync_cmd("run", "--as-user", agent_user.pw_name, "--memory", "research:mem",
                           "--run-id", "after-crash", "--checkpoint", "0", "--", "true", cwd=open_dir)
    finally:
        (mem / "stop").touch()
        swapper.wait(timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert swapper.returncode == -9  # ended by memsync, not by the stop file
    assert _secret_committed(mem) == []
    assert all(p.stat().st_uid == 0 for p in secret.iterdir())


def test_change_monitor_survives_a_symlink_loop(tmp_path: Path) -> None:
    """A symlink pointing at itself (resolving it raises) must not kill the monitor's thread:
    later changes are still seen."""
    from memsync.live.changes import ChangeMonitor

    root = tmp_path / "tree"
    (root / "d").mkdir(parents=True)
    git("init", "-q", cwd=root)
    monitor = ChangeMonitor(root)
    monitor.start()
    try:
        os.symlink("loop", root / "d" / "loop")
        os.symlink("a", root / "d" / "b")
        os.symlink("b", root / "d" / "a")
        time.sleep(0.3)
        monitor.take()
        write(root, "d/after.md", "after\n")
        deadline = time.monotonic() + 5
        while "d/after.md" not in monitor.changed and time.monotonic() < deadline:
            time.sleep(0.05)
        assert "d/after.md" in monitor.changed
    finally:
        monitor.stop()


def test_end_processes_leaves_other_users_alone(agent_user: pwd.struct_passwd) -> None:
    from memsync.run import runas

    mine = subprocess.Popen(["sleep", "30"])
    theirs = subprocess.Popen(["sleep", "30"], user=agent_user.pw_uid, group=agent_user.pw_gid, extra_groups=[])
    try:
        assert runas.end_processes(runas.resolve(agent_user.pw_name)) == []
        assert theirs.wait(timeout=10) == -9
        assert mine.poll() is None
    finally:
        mine.kill()
        theirs.kill()
        mine.wait()
        theirs.wait()


def test_as_user_root_is_refused(tmp_path: Path) -> None:
    """Root as the command's user keeps nothing from it, and ending "its" processes would end
    every process on the machine: a usage error, before anything is pulled."""
    skip_unless_root()
    proc = memsync_cmd("run", "--as-user", "root", "--", "true", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "error: --as-user root: that user is root" in proc.stderr and "hint: " in proc.stderr
    assert "Traceback" not in proc.stderr


def test_hard_links_protected_reads_the_kernel_setting(tmp_path: Path) -> None:
    from memsync.run.runas import hard_links_protected

    setting = tmp_path / "protected_hardlinks"
    setting.write_text("0\n")
    assert not hard_links_protected(setting)
    setting.write_text("1\n")
    assert hard_links_protected(setting)
    assert hard_links_protected(tmp_path / "absent")


WRITE_UNTIL_RELEASED = r"""
import os, sys, time
memory, release = os.environ["MEMSYNC_MEMORY_DIR"], sys.argv[1]
os.makedirs(os.path.join(memory, "notes"), exist_ok=True)
n = 0
end = time.monotonic() + 60
while not os.path.exists(release) and time.monotonic() < end:
    n += 1
    with open(os.path.join(memory, "notes", f"{n % 5}.md"), "w") as fh:
        fh.write(f"note {n}\n")
    if os.path.exists(os.path.join(memory, "other.md")):
        print("saw other.md during the run", flush=True)
    time.sleep(0.05)
"""


def _local_checkpoints(mem: Path) -> int:
    return git("log", "--format=%s", cwd=mem).count("Checkpoint")


def test_checkpoints_under_as_user_leave_the_hubs_new_versions_for_after_the_command(
        open_dir: Path, agent_user: pwd.struct_passwd, tmp_path: Path) -> None:
    """Another writer pushes while an --as-user command runs: merging it into the tree would have
    root write where the command can swap folders (libgit2's checkout goes by name). The
    checkpoints merge aside and push (the hub gets both sides while the command runs); the work
    tree gets the other writer's file only once the command has ended (and its processes)."""
    mem = _memory(open_dir)
    release = open_dir / "release"
    env = dict(os.environ, MEMSYNC_QUIET="0.2", MEMSYNC_SETTLE="0.1")
    run = subprocess.Popen([sys.executable, "-m", "memsync", "run", "--as-user", agent_user.pw_name,
                            "--memory", "research:mem", "--run-id", "held", "--checkpoint", "0.3", "--",
                            SYSTEM_PYTHON, "-c", WRITE_UNTIL_RELEASED, str(release)],
                           cwd=open_dir, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(lambda: "Checkpoint" in git("log", "--format=%s", "memory/research", cwd=hub_path()))
        other = tmp_path / "other"
        assert memsync_cmd("clone", "research", str(other), cwd=tmp_path).returncode == 0
        write(other, "other.md", "from another writer\n")
        assert memsync_cmd("push", cwd=other).returncode == 0
        seen = _local_checkpoints(mem)
        _wait_for(lambda: _local_checkpoints(mem) >= seen + 2)  # checkpoints made after the other push
        # a checkpoint pushed a merge of the run's notes and the other writer's file meanwhile
        _wait_for(lambda: git("log", "-1", "--format=%s", "memory/research", cwd=hub_path()).startswith("Merge"))
        assert not (mem / "other.md").exists()
    finally:
        release.touch()
        out, err = run.communicate(timeout=120)
    assert run.returncode == 0, err
    assert "saw other.md" not in out  # never written into the tree while the command ran
    tree = hub_tree("memory/research")
    assert tree["other.md"] == b"from another writer\n" and "notes/1.md" in tree
    assert (mem / "other.md").read_bytes() == b"from another writer\n"


def _wait_for(condition: Callable[[], bool], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)
