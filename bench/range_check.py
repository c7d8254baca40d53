"""The cost of a run's record (checking for commits the agent made itself) on a big memory.

    python bench/range_check.py                          # 10,000 files, 5 rounds, this code only
    python bench/range_check.py --before /tmp/old-src    # alternate with another memsync source tree

Two operations, each a real `memsync run` child process timed by wall clock (medians printed):
`run -- true` (nothing changed: the check's fast path) and a run whose agent edits 10 files and
commits them itself with `git commit` (the commit is folded into the run's own and checked). With
`--before DIR` (a directory holding another version's `memsync/` package, e.g. from
`git archive <rev> memsync | tar -x -C DIR`) both versions run in every round, order alternating.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
from collections.abc import Callable
from functools import partial
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import gen  # noqa: E402
import procs  # noqa: E402

from bench import make_env, write_gitconfig  # noqa: E402

AGENT_COMMIT = "git add -A && git -c user.name=agent -c user.email=a@sandbox commit -qm 'agent notes'"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--before", type=Path, help="another memsync source tree to compare with")
    parser.add_argument("--workdir", type=Path)
    args = parser.parse_args()
    work = Path(args.workdir or tempfile.mkdtemp(prefix="memsync-range-"))
    work.mkdir(parents=True, exist_ok=True)
    write_gitconfig(work)
    env = make_env(work, work / "memsync-home")
    root = work / "research"
    root.mkdir(exist_ok=True)
    gen.generate(root, args.files)
    python = [sys.executable, "-m", "memsync"]
    procs.run([*python, "init", "--name", "research"], root, env)
    procs.run([*python, "push"], root, env)
    versions = {"after": env}
    if args.before:
        versions = {"before": dict(env, PYTHONPATH=str(args.before.resolve())), "after": env}
    samples: dict[tuple[str, str], list[float]] = {}
    counter = 0
    for r in range(args.rounds):
        order = list(versions.items())
        if r % 2:
            order.reverse()
        for label, venv in order:
            sample = procs.timed([*python, "run", "--checkpoint", "0", "--", "true"], root, venv)
            samples.setdefault(("run -- true", label), []).append(sample.seconds)
            counter += 1
            paths = gen.changed_paths(args.files, counter)
            edit = " && ".join(f"printf '%s\\n' 'note {counter}' >> '{p}'" for p in paths)
            sample = procs.timed([*python, "run", "--checkpoint", "0", "--", "sh", "-c", f"{edit} && {AGENT_COMMIT}"],
                                 root, venv)
            samples.setdefault(("run: agent commits 10 files", label), []).append(sample.seconds)
    print(f"{args.files} files, {args.rounds} rounds (median seconds, wall clock)")
    for op in ("run -- true", "run: agent commits 10 files"):
        row = [f"{op:<30}"]
        for label in versions:
            values = samples[(op, label)]
            row.append(f"{label} {statistics.median(values):.3f} (min {min(values):.3f} max {max(values):.3f})")
        print("  " + "   ".join(row))
    print_check_cost(root, env, args.rounds)
    if not args.workdir:
        shutil.rmtree(work, ignore_errors=True)


def _quiet(_message: str) -> None:
    pass


def print_check_cost(root: Path, env: dict[str, str], rounds: int) -> None:
    """The check alone, in this process (this code), without process start-up or push: its fast
    path (no agent commit), a fold of one agent commit touching 10 files, and the snapshot scan
    after that fold against a scan of 10 uncommitted edits (what the run does without a commit)."""
    import subprocess
    import time

    os.environ.update(env)
    from memsync.core.memory import open_memory
    from memsync.git.scan import scan
    from memsync.run.record import RunTrust

    def sh(line: str) -> None:
        subprocess.run(line, shell=True, cwd=root, env=env, check=True, capture_output=True)

    mem = open_memory(root)
    count = len(gen.layout(10_000))
    times: dict[str, list[float]] = {}

    def clock(name: str, work: Callable[[], object]) -> None:
        start = time.perf_counter()
        work()
        times.setdefault(name, []).append(time.perf_counter() - start)

    with mem.locked():
        for r in range(rounds):
            sh("git add -A && git commit -qm settle || true")
            scan(mem.git)
            trust = RunTrust.begin(mem, f"bench-{r}")
            clock("check, no agent commit", partial(trust.check, _quiet))
            gen.edit(root, gen.changed_paths(count, 2000 + r), f"plain {r}")
            clock("scan, 10 edits uncommitted", mem.git.scan)
            sh("git add -A && git commit -qm settle")
            scan(mem.git)
            trust = RunTrust.begin(mem, f"bench-fold-{r}")
            gen.edit(root, gen.changed_paths(count, 1000 + r), f"agent {r}")
            sh(f"git add -A && {AGENT_COMMIT}")
            clock("check, 1 agent commit folded", partial(trust.check, _quiet))
            clock("scan after the fold", mem.git.scan)
    for name, values in times.items():
        print(f"  {name:<32} median {statistics.median(values) * 1000:8.2f} ms")


if __name__ == "__main__":
    os.environ.pop("MEMSYNC_HOME", None)
    main()
