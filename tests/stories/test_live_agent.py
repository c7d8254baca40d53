"""A live agent shares the tree (BRIEF rule 9): checkpoints that merge the hub's versions while the
agent appends never write under it, and every appended line reaches the hub exactly once.

CI size: 2 runs of the append race and 6 concurrent checkpointing runs; `make stress`
(MEMSYNC_STRESS=1): 30 runs and 32 concurrent runs x 10 rounds, the figures of docs/RELIABILITY.md.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.conftest import Cli, git, hub_path, hub_tree, memsync_cmd, write
from tests.helpers.figures import Figures, figures, size

pytestmark = [pytest.mark.stress, pytest.mark.slow, pytest.mark.timeout(size(300, 3600))]
__all__ = ["figures"]

RACE_RUNS = size(2, 30)
CONCURRENT = size(6, 32)
ROUNDS = size(1, 10)

# Appends a numbered line to log.md every 40 ms, opening the file each time as an agent's shell does.
APPENDER = """\
import os, sys, time
mem, rid, seconds = os.environ["MEMSYNC_MEMORY_DIR"], os.environ["MEMSYNC_RUN_ID"], float(sys.argv[1])
end, n = time.monotonic() + seconds, 0
while time.monotonic() < end:
    n += 1
    with open(os.path.join(mem, "log.md"), "a") as fh:
        fh.write(f"- {rid} line {n}\\n")
    time.sleep(0.04)
print(n)
"""

# Two appends with a checkpoint's worth of time around each.
TWICE = """\
import os, time
mem, rid = os.environ["MEMSYNC_MEMORY_DIR"], os.environ["MEMSYNC_RUN_ID"]
for n in (1, 2):
    with open(os.path.join(mem, "log.md"), "a") as fh:
        fh.write(f"- {rid} line {n}\\n")
    time.sleep(1.2)
"""

ENV = dict(MEMSYNC_QUIET="0.2", MEMSYNC_SETTLE="0.1")


def _seed(tmp_path: Path) -> None:
    root = tmp_path / "seed"
    root.mkdir()
    assert memsync_cmd("init", "--name", "research", cwd=root).returncode == 0
    write(root, "log.md", "# log\n")
    assert memsync_cmd("push", cwd=root).returncode == 0


def _run(tmp_path: Path, rid: str, script: str, *args: str, checkpoint: str = "1") -> subprocess.Popen[str]:
    agent = tmp_path / f"agent-{rid}.py"
    agent.write_text(script)
    return subprocess.Popen([sys.executable, "-m", "memsync", "run", "--run-id", rid, "--checkpoint", checkpoint,
                             "--memory", f"research:{tmp_path / rid}", "--", sys.executable, str(agent), *args],
                            cwd=tmp_path, env={**os.environ, **ENV}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _hub_lines() -> list[str]:
    return hub_tree("memory/research")["log.md"].decode().splitlines()


def _checkpoint_merges(rid: str) -> int:
    """Merges a checkpoint of run `rid` pushed while its command ran."""
    log = git("log", "--merges", "--format=%(trailers:key=Memsync-Checkpoint,key=Memsync-Run-Id,valueonly)%x00",
              "memory/research", cwd=hub_path())
    return sum(1 for entry in log.split("\0") if rid in entry and entry.strip().count("\n") >= 1)


def test_appends_survive_checkpoint_merges_exactly_once(tmp_path: Path, figures: Figures) -> None:
    """An agent appends every 40 ms with --checkpoint 1 while another sandbox pushes its own
    appends: every line of both is on the hub once, the agent's in its order, and the work tree
    never lost one while the command ran (it is checked as the run ends)."""
    _seed(tmp_path)
    other = tmp_path / "other"
    assert memsync_cmd("clone", "research", str(other), cwd=tmp_path).returncode == 0
    pushed: list[str] = []
    merged_aside = 0
    for r in range(RACE_RUNS):
        rid = f"race-{r}"
        run = _run(tmp_path, rid, APPENDER, "3.5")
        while run.poll() is None:
            line = f"- other {r}.{len(pushed)}"
            with open(other / "log.md", "a") as fh:
                fh.write(line + "\n")
            push = memsync_cmd("push", cwd=other)
            assert push.returncode == 0, push.stderr
            pushed.append(line)
            time.sleep(0.3)
        out, err = run.communicate(timeout=120)
        assert run.returncode == 0, err
        written = int(out.split()[-1])
        lines = _hub_lines()
        mine = [f"- {rid} line {n}" for n in range(1, written + 1)]
        counts = Counter(lines)
        lost = [line for line in mine + pushed if counts[line] == 0]
        repeated = [line for line, n in counts.items() if n > 1]
        assert not lost and not repeated, (lost[:5], repeated[:5])
        assert [line for line in lines if line.startswith(f"- {rid} ")] == mine  # the agent's order
        tree = Counter((tmp_path / rid / "log.md").read_text().splitlines())  # the hub's lines, after the run
        assert all(tree[line] == 1 for line in mine) and max(tree.values()) == 1
        merged_aside += _checkpoint_merges(rid)
        figures.add("live agent: append-race runs, no line lost or repeated")
    assert merged_aside >= 1  # the race was met: a checkpoint merged the other sandbox's lines aside
    figures.add("live agent: checkpoint merges pushed while the agent appended", merged_aside)


def test_concurrent_checkpointing_runs_keep_every_line_once(tmp_path: Path, figures: Figures) -> None:
    """Many runs at once, each appending twice with checkpoints between: every line once."""
    _seed(tmp_path)
    expected: list[str] = []
    for rnd in range(ROUNDS):
        runs = {f"c{rnd}-{i}": _run(tmp_path, f"c{rnd}-{i}", TWICE, checkpoint="0.5") for i in range(CONCURRENT)}
        for rid, run in runs.items():
            _, err = run.communicate(timeout=600)
            assert run.returncode == 0, f"{rid}: {err[-1500:]}"
            expected += [f"- {rid} line 1", f"- {rid} line 2"]
        counts = Counter(_hub_lines())
        assert [line for line in expected if counts[line] != 1] == []
        assert sum(counts.values()) == len(expected) + 1  # and nothing else but the heading
        figures.add("live agent: concurrent checkpointing runs, every line once", len(runs))


HOLDER = """\
import sys
with open(sys.argv[1], "a") as fh:
    fh.write("- mine 1\\n")
    fh.flush()
    print("open", flush=True)
    sys.stdin.readline()
    fh.write("- mine 2\\n")
"""


@pytest.mark.skipif(sys.platform != "linux", reason="a file open elsewhere is known by its write lease (Linux)")
def test_pull_never_writes_over_a_file_open_in_another_process(tmp_path: Path, memory: Path, cli: Cli) -> None:
    """An editor or agent keeps log.md open while the hub brings a change to it: the pull merges
    nothing into it (exit 7 naming it, the local version committed); once closed, the next pull
    merges, and every line of both writers is there once."""
    write(memory, "log.md", "# log\n")
    assert cli("push", cwd=memory).code == 0
    other = tmp_path / "other"
    assert cli("clone", "research", str(other)).code == 0
    write(other, "log.md", "# log\n- other\n")
    assert cli("push", cwd=other).code == 0
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(memory / "log.md")], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "open"
        refused = cli("pull", cwd=memory)
        assert refused.code == 7, refused.err
        assert "log.md, open in another process" in refused.err
        assert (memory / "log.md").read_text() == "# log\n- mine 1\n"  # not written under the writer
    finally:
        assert holder.stdin is not None
        holder.stdin.write("\n")
        holder.stdin.close()
        holder.wait(30)
    assert cli("pull", cwd=memory).code == 0
    lines = (memory / "log.md").read_text().splitlines()
    assert sorted(lines) == sorted(["# log", "- mine 1", "- mine 2", "- other"])
