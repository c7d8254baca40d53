"""Many sandboxes writing one memory at once: nothing is lost (BRIEF rule 3), with figures.

N worker processes each do M `memsync run`s of the same memory, every run in a fresh sandbox
directory, on the embedded hub (file://, memsync's hub lock) and on `git daemon` (git://, where
only receive-pack serialises ref updates). Each run appends a line to log.md (merge=union),
writes runs/<id>.md and rewrites summary.md (read, add its id, write a temp file, rename).
CI size: 8 workers x 3 runs; `make stress` (MEMSYNC_STRESS=1): 128 workers x 5 runs. No run may give
up (exit 8), and a run adds at most one merge commit to the hub, however often it lost the race.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import git, hub_path, hub_tree, memsync_cmd, write
from tests.helpers.figures import Figures, figures, size
from tests.helpers.gathered import losers

pytestmark = pytest.mark.stress
__all__ = ["figures"]

WORKERS = size(8, 128)
RUNS_EACH = size(3, 5)
PUSHERS = size(8, 16)

AGENT = """\
import os, pathlib
mem = pathlib.Path(os.environ["MEMSYNC_MEMORY_DIR"])
rid = os.environ["MEMSYNC_RUN_ID"]
(mem / "runs").mkdir(exist_ok=True)
(mem / "runs" / f"{rid}.md").write_text(f"notes of {rid}\\n")
with open(mem / "log.md", "a") as fh:
    fh.write(f"- {rid}\\n")
seen = [line for line in (mem / "summary.md").read_text().splitlines() if line.startswith("- ")]
tmp = mem / ".tmp.summary.md"
tmp.write_text(f"# summary, last rewritten by {rid}\\n" + "".join(s + "\\n" for s in seen) + f"- {rid}\\n")
os.replace(tmp, mem / "summary.md")
"""

WORKER = """\
import json, subprocess, sys
base, agent, runs, prefix, remote = sys.argv[1:6]
results = {}
for j in range(int(runs)):
    rid = f"{prefix}-r{j}"
    cmd = [sys.executable, "-m", "memsync", "run", "--run-id", rid, "--checkpoint", "0",
           "--memory", f"research:{base}/{rid}"]
    if remote != "-":
        cmd += ["--remote", remote]
    proc = subprocess.run(cmd + ["--", sys.executable, agent], capture_output=True, text=True)
    results[rid] = [proc.returncode, proc.stderr[-1500:]]
print(json.dumps(results))
"""


def _seed(root: Path, remote: str | None) -> None:
    root.mkdir()
    args = ["init", "--name", "research"] + (["--remote", remote] if remote else [])
    assert memsync_cmd(*args, cwd=root).returncode == 0
    write(root, ".gitattributes", "log.md merge=union\n")
    write(root, "log.md", "# log\n")
    write(root, "summary.md", "# summary\n")
    push = memsync_cmd("push", cwd=root)
    assert push.returncode == 0, push.stderr


def _hub(where: str, request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Path, str | None]:
    if where == "embedded":
        return hub_path(), None
    from tests.helpers.servers import GitDaemon, make_bare_hub

    if WORKERS <= 32:
        daemon = request.getfixturevalue("git_daemon")
    else:
        # Past its default 32 connections git daemon kills a live connection from the same address
        # and sleeps a second before each new one: 128 sandboxes on one address then crawl at about a
        # connection a second (docs/REMOTES.md). A fleet's daemon is run with room for all of them.
        daemon = GitDaemon(tmp_path / "git-daemon-root", max_connections=4 * WORKERS)
        daemon.base_path.mkdir()
        daemon.start()

        def stop() -> None:
            daemon.stop()
            daemon.cleanup()

        request.addfinalizer(stop)
    bare = make_bare_hub(daemon.base_path / "hub.git")
    return bare, daemon.url("hub.git")


def _ids(text: str) -> set[str]:
    return set(re.findall(r"^- (w\d+-r\d+)$", text, flags=re.M))


@pytest.mark.timeout(size(150, 5400))
@pytest.mark.parametrize("where", ["embedded", "git-daemon"])
def test_many_sandboxes_run_one_memory(where: str, request: pytest.FixtureRequest, tmp_path: Path,
                                       figures: Figures) -> None:
    hub, remote = _hub(where, request, tmp_path)
    _seed(tmp_path / "seed", remote)
    agent = tmp_path / "agent.py"
    agent.write_text(AGENT)
    worker = tmp_path / "worker.py"
    worker.write_text(WORKER)
    procs = []
    for i in range(WORKERS):
        base = tmp_path / f"sandboxes-{i}"
        base.mkdir()
        procs.append(subprocess.Popen(
            [sys.executable, str(worker), str(base), str(agent), str(RUNS_EACH), f"w{i}", remote or "-"],
            cwd=base, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    results: dict[str, list[object]] = {}
    for p in procs:
        out, errs = p.communicate(timeout=size(600, 5000))
        assert p.returncode == 0, errs
        results.update(json.loads(out))
    attempted = sorted(results)
    completed = [rid for rid, (code, _) in results.items() if code == 0]
    failures = {rid: res for rid, res in results.items() if res[0] != 0}
    # A run that could not push keeps its commit in its sandbox: an ordinary `memsync push` delivers it.
    for rid in failures:
        memsync_cmd("push", cwd=tmp_path / f"sandboxes-{rid.split('-')[0][1:]}" / rid)

    tree = hub_tree("memory/research", hub)
    missing_files = [rid for rid in attempted if tree.get(f"runs/{rid}.md") != f"notes of {rid}\n".encode()]
    log_ids = _ids(tree["log.md"].decode())
    conflict_files = sorted(p for p in tree if p.startswith("summary.conflict"))
    copies = losers(tree, "summary.md")  # every losing summary, from the one gathered file
    summary_ids = _ids(tree["summary.md"].decode()).union(*(_ids(c.decode()) for c in copies))
    history = git("log", "--format=%(trailers:key=Memsync-Run-Id,valueonly)", "memory/research", cwd=hub)
    merges = len(git("rev-list", "--merges", "memory/research", cwd=hub).split())
    lost = set(missing_files) | (set(attempted) - log_ids) | (set(attempted) - summary_ids)

    figures.add("runs attempted", len(attempted))
    figures.add("runs completed", len(completed))
    figures.add("runs lost", len(lost))
    figures.add("lines appended", len(attempted))
    figures.add("lines present", len(log_ids & set(attempted)))
    figures.add("summary rewrites", len(attempted))
    figures.add("summary rewrites kept", len(summary_ids & set(attempted)))
    figures.add("conflicts kept", len(copies))
    figures.add("merge commits on the hub", merges)

    assert len(attempted) == WORKERS * RUNS_EACH
    assert not failures, "\n".join(str(res[1]) for res in list(failures.values())[:3])
    assert not lost, sorted(lost)[:10]
    assert conflict_files in ([], ["summary.conflicts.md"]), conflict_files  # one file however many conflicts
    assert not [p for p in tree if p.startswith(("log.conflict-", "runs/"))
                and "conflict" in p], "merge=union must never leave a log.md conflict copy"
    assert set(attempted) <= set(history.split())
    assert merges <= len(attempted), f"{merges} merges for {len(attempted)} runs: retries stacked merges"
    assert tree["log.md"].decode().count("\n- ") == len(attempted), "every line exactly once"
    git("fsck", "--strict", cwd=hub)


@pytest.mark.timeout(size(150, 600))
def test_many_pushes_at_once_on_the_embedded_hub(tmp_path: Path, figures: Figures) -> None:
    _seed(tmp_path / "seed", None)
    clones = []
    for i in range(PUSHERS):
        dest = tmp_path / f"clone-{i}"
        proc = memsync_cmd("clone", "research", str(dest), cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        write(dest, f"pushes/p{i}.md", f"push {i}\n")
        write(dest, "summary.md", f"# summary from clone {i}\n")
        clones.append(dest)
    procs = [subprocess.Popen([sys.executable, "-m", "memsync", "push"], cwd=c, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for c in clones]
    codes = []
    for p in procs:
        _, errs = p.communicate(timeout=300)
        codes.append((p.returncode, errs))
    heads = [git("rev-parse", "HEAD", cwd=c).strip() for c in clones]
    tip = git("rev-parse", "memory/research", cwd=hub_path()).strip()
    on_hub = [h for h in heads
              if subprocess.run(["git", "merge-base", "--is-ancestor", h, tip], cwd=hub_path()).returncode == 0]
    figures.add("pushes at once", len(procs))
    figures.add("pushed commits on the hub", len(on_hub))
    assert all(code == 0 for code, _ in codes), [e for c, e in codes if c][:2]
    assert len(on_hub) == len(heads)
    tree = hub_tree()
    assert all(tree[f"pushes/p{i}.md"] == f"push {i}\n".encode() for i in range(PUSHERS))
    summaries = [tree["summary.md"], *losers(tree, "summary.md")]
    assert {f"# summary from clone {i}\n".encode() for i in range(PUSHERS)} <= set(summaries)
    assert sorted(k for k in tree if k.startswith("summary")) == ["summary.conflicts.md", "summary.md"]
    git("fsck", "--strict", cwd=hub_path())
