"""kill -9 at random moments, and a full disk: the next ordinary command recovers (BRIEF rule 2).

Each crash trial starts one memsync command (push, pull, clone, run, or a run killed around a
checkpoint), kills its whole process group with SIGKILL after a random delay, then runs the one
command a user would run next and checks: it succeeds with no manual repair; every commit a
finished operation reported as pushed is on the hub; every file the agent finished writing before
the last checkpoint that reached the hub is in it; `git fsck --strict` passes on the hub and the
local repositories. CI size: 10 trials; `make stress`: 60. The seed is printed on failure
(MEMSYNC_CRASH_SEED reproduces a sequence).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import resource
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pygit2
import pytest

from memsync.core import readonly
from memsync.core.memory import open_memory
from tests.conftest import git, hub_path, memsync_cmd, write
from tests.helpers.figures import Figures, figures, size

pytestmark = pytest.mark.stress
__all__ = ["figures"]

TRIALS = size(10, 60)
KINDS = ("push", "pull", "clone", "run", "checkpoint")
FILES = 150  # notes in the memory: clone, pull and checkout take long enough to be hit mid-way
WRITER = """\
import os, pathlib, sys, time
trial = sys.argv[1]
out = pathlib.Path(os.environ["MEMSYNC_MEMORY_DIR"]) / "agent"
out.mkdir(exist_ok=True)
for i in range(50):
    (out / f"{trial}-{i:02d}.md").write_text(f"{time.time()}\\n")
    time.sleep(0.1)
"""
RUN_ENV = {"MEMSYNC_QUIET": "0.5", "MEMSYNC_SETTLE": "0.2"}


@dataclass
class World:
    tmp: Path
    work: Path  # the operator's memory
    other: Path  # a second clone, for pull trials
    sandbox: Path  # where runs mount the memory
    writer: Path
    rng: random.Random
    reported: list[str] = field(default_factory=list)  # heads that a finished command pushed
    killed: int = 0  # trials whose command was killed before it finished


def tree_ids(rev: str = "memory/research", cwd: Path | None = None) -> dict[str, str]:
    """path -> blob id of a version, read with plain git."""
    raw = git("ls-tree", "-r", "-z", rev, cwd=cwd or hub_path())
    found = {}
    for entry in raw.split("\0"):
        if entry:
            meta, path = entry.split("\t", 1)
            found[path] = meta.split()[2]
    return found


def disk_ids(root: Path, under: str = "") -> dict[str, str]:
    found = {}
    for path in (root / under).rglob("*") if under else root.rglob("*"):
        rel = path.relative_to(root).as_posix()
        if rel.startswith((".git/", ".vm0/")) or not path.is_file():
            continue
        found[rel] = str(pygit2.hash(path.read_bytes()))
    return found


def kill_after(w: World, args: list[str], cwd: Path, delay: float, env: dict[str, str] | None = None,
               until: Callable[[], bool] | None = None) -> int | None:
    """Start memsync; SIGKILL its process group after `delay` s (counted from `until()` turning
    true, if given). The exit code if it finished first, else None."""
    proc = subprocess.Popen([sys.executable, "-m", "memsync", *args], cwd=cwd, start_new_session=True,
                            env=dict(os.environ, **(env or {})), stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if until is not None:
        deadline = time.monotonic() + 30
        while not until() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
    try:
        return proc.wait(timeout=delay)
    except subprocess.TimeoutExpired:
        pass
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    w.killed += 1
    return None


def fsck_ok(*repos: Path) -> bool:
    return all(subprocess.run(["git", "fsck", "--strict", "--no-dangling"], cwd=r, capture_output=True)
               .returncode == 0 for r in repos)


def hub_tip() -> str:
    return git("rev-parse", "memory/research", cwd=hub_path()).strip()


@pytest.fixture
def world(tmp_path: Path) -> World:
    work = tmp_path / "research"
    work.mkdir()
    assert memsync_cmd("init", cwd=work).returncode == 0
    for i in range(FILES):
        write(work, f"notes/n{i:03d}.md", f"note {i}\n" + "x" * 1000 + "\n")
    write(work, "summary.md", "# summary\n")
    assert memsync_cmd("push", cwd=work).returncode == 0
    other = tmp_path / "other"
    assert memsync_cmd("clone", "research", str(other), cwd=tmp_path).returncode == 0
    writer = tmp_path / "writer.py"
    writer.write_text(WRITER)
    seed = int(os.environ.get("MEMSYNC_CRASH_SEED", random.randrange(1 << 30)))
    print(f"crash seed: {seed} (MEMSYNC_CRASH_SEED={seed} reproduces this sequence)")
    return World(tmp_path, work, other, tmp_path / "sandbox" / "research", writer, random.Random(seed))


def trial_push(w: World, n: int) -> list[str]:
    write(w.work, f"trials/push-{n}.md", f"push trial {n}\n")
    write(w.work, "summary.md", f"# summary after push trial {n}\n")
    if kill_after(w, ["push"], w.work, w.rng.uniform(0.05, 1.2)) == 0:
        w.reported.append(git("rev-parse", "HEAD", cwd=w.work).strip())
    problems = _recover(["push"], w.work)
    ids = tree_ids()
    if ids.get(f"trials/push-{n}.md") != str(pygit2.hash(f"push trial {n}\n".encode())):
        problems.append(f"trials/push-{n}.md is not on the hub")
    return problems + ([] if fsck_ok(w.work) else ["local fsck failed"])


def trial_pull(w: World, n: int) -> list[str]:
    write(w.work, f"trials/pull-{n}.md", f"pull trial {n}\n")
    assert memsync_cmd("push", cwd=w.work).returncode == 0
    write(w.other, f"local/pull-{n}.md", f"local work {n}\n")
    kill_after(w, ["pull"], w.other, w.rng.uniform(0.05, 1.2))
    problems = _recover(["pull"], w.other)
    if (w.other / f"trials/pull-{n}.md").read_bytes() != f"pull trial {n}\n".encode():
        problems.append("the pulled file is not in the work tree")
    if (w.other / f"local/pull-{n}.md").read_text() != f"local work {n}\n":
        problems.append("local work was lost")
    return problems + ([] if fsck_ok(w.other) else ["local fsck failed"])


def trial_clone(w: World, n: int) -> list[str]:
    parent = w.tmp / "clones" / str(n)
    parent.mkdir(parents=True)
    kill_after(w, ["pull", "research"], parent, w.rng.uniform(0.05, 1.5))
    problems = _recover(["pull", "research"], parent)
    if disk_ids(parent / "research") != tree_ids():
        problems.append("the clone differs from the hub")
    leftovers = [p.name for p in parent.iterdir() if p.name != "research"]
    if leftovers:
        problems.append(f"left behind: {leftovers}")
    return problems + ([] if fsck_ok(parent / "research") else ["local fsck failed"])


def trial_run(w: World, n: int, around_checkpoint: bool = False) -> list[str]:
    rid = f"crash-{n}"
    before = hub_tip()
    args = ["run", "--run-id", rid, "--checkpoint", "1", "--memory", f"research:{w.sandbox}", "--",
            sys.executable, str(w.writer), rid]
    w.sandbox.parent.mkdir(exist_ok=True)
    until = (lambda: hub_tip() != before) if around_checkpoint else None
    delay = w.rng.uniform(0.0, 1.5) if around_checkpoint else w.rng.uniform(0.3, 5.0)
    if kill_after(w, args, w.sandbox.parent, delay, RUN_ENV, until) == 0:
        w.reported.append(git("rev-parse", "HEAD", cwd=w.sandbox).strip())
    problems = _check_checkpoints(w, rid)
    if not (w.sandbox / ".vm0" / "storage.yaml").exists():
        return problems + _recover(["pull", "research"], w.sandbox.parent)  # killed while cloning
    problems += _recover(["push"], w.sandbox)
    written = disk_ids(w.sandbox, "agent")
    missing = sorted(set(written.items()) - set(tree_ids().items()))
    if missing:
        problems.append(f"agent files not on the hub after recovery: {missing[:3]}")
    return problems + ([] if fsck_ok(w.sandbox) else ["local fsck failed"])


def _check_checkpoints(w: World, rid: str) -> list[str]:
    """Files finished before the last checkpoint that reached the hub are in that checkpoint."""
    log = git("log", "--format=%H %ct %(trailers:key=Memsync-Checkpoint,valueonly,separator=)",
              f"--grep=Memsync-Run-Id: {rid}", "memory/research", cwd=hub_path())
    checkpoints = [line.split() for line in log.splitlines() if len(line.split()) == 3]
    if not checkpoints or not (w.sandbox / "agent").is_dir():
        return []
    oid, committed, _ = max(checkpoints, key=lambda c: int(c[2]))
    in_checkpoint = tree_ids(oid)
    # an empty file is one the killed agent had just truncated: not finished, so not settled
    settled = {rel: blob for rel, blob in disk_ids(w.sandbox, "agent").items()
               if (stamp := (w.sandbox / rel).read_text().strip())
               and float(stamp) < int(committed) - 1.5}  # settle + 1 s clock
    late = sorted(rel for rel, blob in settled.items() if in_checkpoint.get(rel) != blob)
    return [f"files written before the last checkpoint are missing from it: {late[:3]}"] if late else []


def _recover(args: list[str], cwd: Path) -> list[str]:
    proc = memsync_cmd(*args, cwd=cwd, timeout=120)
    if proc.returncode != 0 or "Traceback" in proc.stderr:
        return [f"`memsync {' '.join(args)}` did not recover ({proc.returncode}): {proc.stderr.strip()[-300:]}"]
    return []


@pytest.mark.timeout(size(150, 1200))
def test_kill_minus_nine_at_random_moments(world: World, figures: Figures) -> None:
    trials: dict[str, Callable[[World, int], list[str]]] = {
        "push": trial_push, "pull": trial_pull, "clone": trial_clone, "run": trial_run,
        "checkpoint": lambda w, n: trial_run(w, n, around_checkpoint=True)}
    failed: dict[str, list[str]] = {}
    corrupted = 0
    for n in range(TRIALS):
        kind = KINDS[n % len(KINDS)]
        problems = trials[kind](world, n)
        if not fsck_ok(hub_path()):
            problems.append("hub fsck failed")
        if any("fsck" in p for p in problems):
            corrupted += 1
        if problems:
            failed[f"{kind} #{n}"] = problems
    tip = hub_tip()
    lost = [h for h in world.reported
            if subprocess.run(["git", "merge-base", "--is-ancestor", h, tip], cwd=hub_path()).returncode]
    figures.add("crash trials", TRIALS)
    figures.add("crash trials killed mid-command", world.killed)
    figures.add("crash trials recovered", TRIALS - len(failed))
    figures.add("crash trials corrupted", corrupted)
    assert not failed, failed
    assert not lost, f"reported pushed but not on the hub: {lost}"


# -- disk full --------------------------------------------------------------------------------------
@contextlib.contextmanager
def small_disk(where: Path, megabytes: int) -> Iterator[bool]:
    """A tmpfs of `megabytes` at `where`; yields False when mounting is not permitted."""
    where.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={megabytes}m", "tmpfs", str(where)],
                          capture_output=True)
    try:
        yield done.returncode == 0
    finally:
        if done.returncode == 0:
            subprocess.run(["umount", "-l", str(where)], capture_output=True)


def _limited(limit: int) -> Callable[[], None]:
    def apply() -> None:  # writes past `limit` bytes fail with EFBIG (python ignores SIGXFSZ)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return apply


def _assert_clear_failure(proc: subprocess.CompletedProcess[str]) -> None:
    assert proc.returncode == 7, proc.stderr
    assert proc.stderr.startswith("error: ") and "\nhint: " in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr and "unexpected" not in proc.stderr, proc.stderr


def test_disk_full_is_a_clear_error_and_the_next_command_recovers(tmp_path: Path, figures: Figures) -> None:
    disk = tmp_path / "disk"
    with small_disk(disk, 4) as mounted:
        root = disk / "research" if mounted else tmp_path / "research"
        root.mkdir()
        assert memsync_cmd("init", cwd=root).returncode == 0
        write(root, "a.md", "a\n")
        assert memsync_cmd("push", cwd=root).returncode == 0
        before = hub_tip()
        big = os.urandom(1_200_000)
        write(root, "big.bin", big)
        if mounted:  # fill the disk so that the 1.2 MB blob no longer fits next to the file
            filler = disk / "filler"
            filler.write_bytes(b"\0" * 2_000_000)
            proc = memsync_cmd("push", cwd=root)
            assert "the disk is full" in proc.stderr, proc.stderr
        else:
            proc = subprocess.run([sys.executable, "-m", "memsync", "push"], cwd=root, capture_output=True,
                                  text=True, preexec_fn=_limited(512 * 1024), timeout=60)
        _assert_clear_failure(proc)
        assert hub_tip() == before, "nothing half-pushed"
        assert (root / "big.bin").read_bytes() == big, "the file is untouched"
        assert fsck_ok(root, hub_path())
        if mounted:
            filler.unlink()
        after = memsync_cmd("push", cwd=root)
        assert after.returncode == 0, after.stderr
        assert tree_ids()["big.bin"] == str(pygit2.hash(big))
        # a clone onto the full disk fails cleanly and leaves nothing behind
        if mounted:
            filler.write_bytes(b"\0" * 1_000_000)
            proc = memsync_cmd("clone", "research", str(disk / "copy"), cwd=disk)
        else:
            proc = subprocess.run([sys.executable, "-m", "memsync", "clone", "research", "copy"], cwd=tmp_path,
                                  capture_output=True, text=True, preexec_fn=_limited(512 * 1024), timeout=60)
        _assert_clear_failure(proc)
        parent = disk if mounted else tmp_path
        assert not [p for p in parent.iterdir() if p.name.startswith((".memsync-clone", "copy"))]
        if mounted:
            filler.unlink()
            shutil.rmtree(root)  # free the space it takes
        proc = memsync_cmd("clone", "research", str(parent / "copy"), cwd=parent)
        assert proc.returncode == 0, proc.stderr
        assert (parent / "copy" / "big.bin").read_bytes() == big
    figures.add("disk-full cases", 2)
    figures.add("disk-full cases handled", 2)


def test_a_run_killed_before_its_undo_is_undone_by_the_next_open(memory: Path, tmp_path: Path) -> None:
    """A process protects the memory, vandalises it and is killed; opening the memory undoes it."""
    script = (
        "import sys, os, pathlib\n"
        "from memsync.core import readonly\n"
        "from memsync.core.memory import open_memory\n"
        "root = pathlib.Path(sys.argv[1])\n"
        "readonly.protect(open_memory(root), 'ro-killed')\n"
        "p = root / 'summary.md'; p.chmod(0o644); p.write_text('vandalised\\n')\n"
        "(root / 'planted.md').write_text('x\\n')\n"
        "os.kill(os.getpid(), 9)\n"
    )
    proc = subprocess.run([sys.executable, "-c", script, str(memory)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == -9, proc.stderr
    mark = json.loads((memory / ".git" / readonly.MARK).read_text())
    assert mark["run_id"] == "ro-killed"
    open_memory(memory)  # any memsync command opens it first
    assert (memory / "summary.md").read_text() == "# Summary\n\nfirst line\n"
    assert not (memory / "planted.md").exists()
    assert not (memory / ".git" / readonly.MARK).exists()
