"""`--max-push-rate`: checkpoints commit as usual but push at most that often; the final push
always happens and nothing is lost."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from memsync.core.pacing import PushPacer, PushRate, parse_rate
from tests.conftest import git, hub_path, hub_tree, memsync_cmd

pytestmark = pytest.mark.slow

# Six writes, 0.5 s apart: with checkpoints after 0.2 s of quiet, each is its own checkpoint.
WRITER = ("import os, pathlib, time\n"
          "mem = pathlib.Path(os.environ['MEMSYNC_MEMORY_DIR'])\n"
          "for i in range(6):\n"
          "    (mem / f'step-{i}.md').write_text(f'step {i}\\n')\n"
          "    time.sleep(0.5)\n")


def _run_watching_hub(memory: Path, tmp_path: Path, *flags: str) -> tuple[subprocess.CompletedProcess[str], int]:
    """Run the writer; count the distinct hub tips seen while it runs (pushes that landed)."""
    agent = tmp_path / "writer.py"
    agent.write_text(WRITER)
    seen: set[str] = set()
    done = threading.Event()

    def watch() -> None:
        while not done.wait(0.05):
            seen.add(git("rev-parse", "memory/research", cwd=hub_path()).strip())

    start = git("rev-parse", "memory/research", cwd=hub_path()).strip()
    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        proc = memsync_cmd("run", "--checkpoint", "1", *flags, "--", sys.executable, str(agent), cwd=memory,
                           env=dict(os.environ, MEMSYNC_QUIET="0.2", MEMSYNC_SETTLE="0.05"))
    finally:
        done.set()
        watcher.join()
    final = git("rev-parse", "memory/research", cwd=hub_path()).strip()
    return proc, len(seen - {start, final})


def test_max_push_rate_batches_checkpoints_and_the_final_push_happens(memory: Path, tmp_path: Path) -> None:
    proc, pushes_during = _run_watching_hub(memory, tmp_path, "--max-push-rate", "1/min")
    assert proc.returncode == 0, proc.stderr
    assert pushes_during <= 1, "one checkpoint push per minute at most while the run went on"
    assert "max push rate:" in proc.stderr and "waited for a later push" in proc.stderr
    tree = hub_tree()
    assert all(tree[f"step-{i}.md"] == f"step {i}\n".encode() for i in range(6)), "the final push delivered all"
    checkpoints = git("log", "--format=%(trailers:key=Memsync-Checkpoint,valueonly)", "memory/research",
                      cwd=hub_path()).split()
    assert len(checkpoints) >= 3, "checkpoints were still made (and committed) at their usual pace"


def test_without_a_limit_checkpoints_push_as_they_come(memory: Path, tmp_path: Path) -> None:
    proc, pushes_during = _run_watching_hub(memory, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert pushes_during >= 2, "checkpoints pushed while the run went on"


def test_rate_from_storage_yaml_and_bad_values(memory: Path, tmp_path: Path) -> None:
    bad = memsync_cmd("run", "--max-push-rate", "fast", "--", "true", cwd=memory)
    assert bad.returncode == 2 and "error: --max-push-rate: 'fast' is not a push rate" in bad.stderr
    assert "hint: write e.g. 6/min" in bad.stderr
    cfg = memory / ".vm0" / "storage.yaml"
    cfg.write_text(cfg.read_text() + "max_push_rate: 0/min\n")
    line = len(cfg.read_text().splitlines())  # the last line (storage.yaml also records the hub)
    wrong = memsync_cmd("status", cwd=memory)
    assert wrong.returncode == 3 and f"{cfg}:{line}: `max_push_rate`" in wrong.stderr, wrong.stderr
    cfg.write_text(cfg.read_text().replace("0/min", "1/min"))
    proc, pushes_during = _run_watching_hub(memory, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert pushes_during <= 1 and "max push rate:" in proc.stderr


@pytest.mark.parametrize(("text", "rate"), [("6/min", PushRate(6, 60)), ("1/s", PushRate(1, 1)),
                                            ("100 / h", PushRate(100, 3600)), ("0.5/s", PushRate(0.5, 1))])
def test_parse_rate(text: str, rate: PushRate) -> None:
    assert parse_rate(text) == rate


def test_pacer_defers_then_releases() -> None:
    pacer = PushPacer({"a": PushRate(10, 1), "b": None})
    assert pacer.may_push("a") and pacer.may_push("b")
    pacer.pushed("a")
    assert not pacer.may_push("a") and pacer.due() == []
    import time

    time.sleep(0.12)
    assert pacer.due() == ["a"]
    pacer.pushed("a")
    assert pacer.due() == [] and pacer.deferred_total == 1
