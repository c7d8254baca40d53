"""Many writers on one memory: memsync run against a plain git fetch/merge/push retry loop.

    python bench/contention.py                       # 32 writers x 5 runs, embedded hub and git daemon
    python bench/contention.py --writers 64 --runs 5 --hubs embedded

W worker processes each make R runs one after another, every run in a fresh sandbox directory (a
new clone, as a throwaway VM has), all on one memory. The agent appends its run id to log.md
(merge=union) and writes runs/<id>.md, so neither variant ever meets a real conflict: what is
measured is how each copes with losing the race to the hub.

- memsync: `memsync run --checkpoint 0 --memory research:<sandbox> -- python agent.py`.
- git loop: `git clone`, the agent, `git add -A && git commit`, then up to 50 rounds of
  `git push || git pull --no-rebase` with a 0-100 ms random pause, as git auto-sync scripts do.

Printed per variant and hub: runs, give-ups (non-zero exits), log lines lost, merge commits on the
hub per run, runs per minute (runs / wall time of the whole batch), and p50/p90 latency of one run.
Results go to bench/results/contention.json. Not part of the test suite.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from procs import GitDaemon, run  # noqa: E402

AGENT = """\
import os, pathlib
mem = pathlib.Path(os.environ["MEMSYNC_MEMORY_DIR"])
rid = os.environ["MEMSYNC_RUN_ID"]
(mem / "runs").mkdir(exist_ok=True)
(mem / "runs" / f"{rid}.md").write_text(f"notes of {rid}\\n")
with open(mem / "log.md", "a") as fh:
    fh.write(f"- {rid}\\n")
"""

# One worker: R runs in a row; prints {run id: [exit code, seconds]} as JSON.
WORKER = """\
import json, os, random, subprocess, sys, time
variant, base, agent, runs, prefix, url, python = sys.argv[1:8]
results = {}
for j in range(int(runs)):
    rid = f"{prefix}-r{j}"
    box = os.path.join(base, rid)
    env = dict(os.environ, MEMSYNC_RUN_ID=rid, MEMSYNC_MEMORY_DIR=box)
    start = time.monotonic()
    if variant == "memsync":
        cmd = [python, "-m", "memsync", "run", "--run-id", rid, "--checkpoint", "0",
               "--memory", f"research:{box}", "--remote", url, "--", python, agent]
        done = subprocess.run(cmd, env=env, capture_output=True, text=True)
        code = done.returncode
        if code:
            sys.stderr.write(f"{rid}: exit {code}: {done.stderr[-600:]}\\n")
    else:
        def git(*args):
            return subprocess.run(["git", *args], cwd=box, env=env, capture_output=True).returncode
        code = subprocess.run(["git", "clone", "-q", "-b", "memory/research", url, box],
                              env=env, capture_output=True).returncode
        code = code or subprocess.run([python, agent], env=env).returncode
        code = code or git("add", "-A") or git("commit", "-qm", f"run {rid}")
        if not code:
            code = 1
            for _ in range(50):
                if git("push", "-q", "origin", "HEAD:memory/research") == 0:
                    code = 0
                    break
                time.sleep(random.uniform(0, 0.1))
                if git("pull", "--no-rebase", "--no-edit", "-q", "origin", "memory/research") != 0:
                    break  # a conflict: the loop cannot go on
    results[rid] = [code, time.monotonic() - start]
print(json.dumps(results))
"""


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "MEMSYNC_"))}
    env.update(HOME=str(home), MEMSYNC_HOME=str(home / "memsync"), GIT_AUTHOR_NAME="bench",
               GIT_AUTHOR_EMAIL="bench@example.org", GIT_COMMITTER_NAME="bench",
               GIT_COMMITTER_EMAIL="bench@example.org", GIT_CONFIG_NOSYSTEM="1")
    home.mkdir(parents=True, exist_ok=True)
    (home / ".gitconfig").write_text("[gc]\n\tauto = 0\n[init]\n\tdefaultBranch = main\n")
    return env


def _seed(hub: Path, env: dict[str, str], work: Path) -> None:
    run(["git", "init", "-q", "--bare", str(hub)], work, env)
    seed = work / "seed"
    run(["git", "init", "-q", "-b", "memory/research", str(seed)], work, env)
    (seed / ".gitattributes").write_text("log.md merge=union\n")
    (seed / "log.md").write_text("# log\n")
    run("git add -A && git commit -qm seed && git push -q " + str(hub) + " memory/research", seed, env)


def fleet(variant: str, url: str, work: Path, env: dict[str, str], writers: int, runs: int,
          agent_source: str = AGENT, tag: str = "") -> tuple[dict[str, list[float]], float]:
    """`writers` worker processes (WORKER) doing `runs` runs each of `agent_source`, in folders
    `<tag>w<i>` of `work`: every run's [exit code, seconds] by run id, and the wall time."""
    agent = work / "agent.py"
    agent.write_text(agent_source)
    worker = work / "worker.py"
    worker.write_text(WORKER)
    started = time.monotonic()
    procs = []
    for i in range(writers):
        base = work / f"{tag}w{i}"
        base.mkdir()
        procs.append(subprocess.Popen(
            [sys.executable, str(worker), variant, str(base), str(agent), str(runs), f"{tag}w{i}", url,
             sys.executable],
            cwd=base, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    results: dict[str, list[float]] = {}
    for p in procs:
        out, err = p.communicate(timeout=3600)
        if p.returncode != 0:
            raise SystemExit(f"worker failed: {err[-2000:]}")
        if err:
            print(err[-3000:], file=sys.stderr)
        results.update(json.loads(out))
    return results, time.monotonic() - started


def _batch(variant: str, url: str, hub: Path, work: Path, env: dict[str, str],
           writers: int, runs: int) -> dict[str, object]:
    results, wall = fleet(variant, url, work, env, writers, runs, tag=f"{variant}-")
    log = run(["git", "show", "memory/research:log.md"], hub, env)
    lines = {line[2:] for line in log.splitlines() if line.startswith("- ")}
    merges = int(run(["git", "rev-list", "--merges", "--count", "memory/research"], hub, env))
    latencies = sorted(seconds for _, seconds in results.values())
    total = len(results)
    return {
        "variant": variant, "runs": total,
        "give_ups": sum(1 for code, _ in results.values() if code != 0),
        "lines_lost": len(set(results) - lines),
        "merges": merges, "merges_per_run": round(merges / total, 2),
        "runs_per_minute": round(total / wall * 60, 1), "wall_seconds": round(wall, 1),
        "p50_seconds": round(statistics.median(latencies), 2),
        "p90_seconds": round(latencies[int(0.9 * (total - 1))], 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--writers", type=int, default=32)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--hubs", default="embedded,daemon", help="comma-separated: embedded, daemon")
    parser.add_argument("--variants", default="memsync,git", help="comma-separated: memsync, git")
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory(prefix="memsync-contention-") as tmp:
        root = args.workdir or Path(tmp)
        for hub_kind in args.hubs.split(","):
            for variant in args.variants.split(","):
                work = root / f"{hub_kind}-{variant}"
                work.mkdir(parents=True)
                env = _env(work / "home")
                daemon = None
                if hub_kind == "embedded":
                    hub = work / "home" / "memsync" / "hub.git"
                    hub.parent.mkdir(parents=True)
                    url = str(hub) if variant == "memsync" else f"file://{hub}"
                else:
                    (work / "served").mkdir()
                    hub = work / "served" / "hub.git"
                    daemon = GitDaemon(work / "served", env)
                    url = daemon.url(hub)
                try:
                    _seed(hub, env, work)
                    row = _batch(variant, url, hub, work, env, args.writers, args.runs)
                finally:
                    if daemon is not None:
                        daemon.stop()
                row["hub"] = hub_kind
                rows.append(row)
                print(json.dumps(row), flush=True)
    _print(rows, args.writers, args.runs)
    out = HERE / "results" / "contention.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"writers": args.writers, "runs_each": args.runs, "rows": rows}, indent=2) + "\n")
    print(f"results: {out}")
    return 0


def _print(rows: list[dict[str, object]], writers: int, runs: int) -> None:
    print(f"\n{writers} writers x {runs} runs on one memory")
    cols = ["hub", "variant", "runs", "give_ups", "lines_lost", "merges_per_run", "runs_per_minute",
            "p50_seconds", "p90_seconds"]
    print("  ".join(f"{c:>15}" for c in cols))
    for row in rows:
        print("  ".join(f"{row[c]!s:>15}" for c in cols))
    for hub in sorted({str(r["hub"]) for r in rows}):
        pair = {str(r["variant"]): r for r in rows if r["hub"] == hub}
        if {"memsync", "git"} <= set(pair):
            ratio = float(pair["memsync"]["runs_per_minute"]) / float(pair["git"]["runs_per_minute"])  # type: ignore[arg-type]
            print(f"{hub}: memsync runs/minute = {ratio:.2f}x the git loop's")


if __name__ == "__main__":
    raise SystemExit(main())
