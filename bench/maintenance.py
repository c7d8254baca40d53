"""Does a long-lived memory stay fast? 2,000 runs' worth of versions, with and without maintenance.

    python bench/maintenance.py                      # 2,000 versions of a 1,000-file memory
    python bench/maintenance.py --versions 500 --files 200 --rounds 3

Two memories get the same history of small versions (each changes 2 files and is pushed to the
embedded hub, as a run's final commit is), one with automatic maintenance (the default
thresholds), one with it turned off (MEMSYNC_GC_LOOSE=0 MEMSYNC_GC_PACKS=0, as memsync was
before it had maintenance). A copy of the second is then repacked by hand (`memsync gc`): the
same history in one pack, the reference. For each of the three, `memsync push` of 10 changed
files, `memsync status` and `memsync clone` are timed as child processes (median of alternating
rounds), and the packs and loose objects of the hub and the memory are counted.

The history is built in process through memsync's Python API (no start-up per version), which is
set-up, not measurement. Results go to bench/results/maintenance.json. Not part of the test suite.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from gen import generate  # noqa: E402
from procs import timed  # noqa: E402

OFF = {"MEMSYNC_GC_LOOSE": "0", "MEMSYNC_GC_PACKS": "0"}


def _env(home: Path, extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "MEMSYNC_"))}
    env.update(HOME=str(home.parent), MEMSYNC_HOME=str(home), GIT_CONFIG_NOSYSTEM="1", **extra)
    return env


def _counts(git_dir: Path) -> dict[str, int]:
    from memsync.git import pack

    found = pack.counts(git_dir, exact=True)
    return {"packs": found.packs, "loose": found.loose}


def build(root: Path, files: int, versions: int, extra: dict[str, str]) -> Path:
    """A memory with `versions` pushed versions; returns its directory (hub under root/home)."""
    home = root / "home"
    memory = root / "memory"
    memory.mkdir(parents=True)
    generate(memory, files)
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(_env(home, extra))
    try:
        from memsync import api

        api.init(memory, name="longlived")
        api.push(memory)
        paths = sorted(p for p in memory.rglob("*.md") if ".git" not in p.parts)
        for v in range(versions):
            for p in (paths[(2 * v) % len(paths)], paths[(2 * v + 1) % len(paths)]):
                with open(p, "a", encoding="utf-8") as fh:
                    fh.write(f"- version {v}\n")
            api.push(memory)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return memory


def measure(name: str, memory: Path, rounds: int, results: dict[str, dict[str, object]], extra: dict[str, str]) -> None:
    home = memory.parent / "home"
    env = _env(home, extra)
    cli = [sys.executable, "-m", "memsync"]
    paths = sorted(p for p in memory.rglob("*.md") if ".git" not in p.parts)[:10]
    samples: dict[str, list[float]] = {"push 10 changed": [], "status": [], "clone": []}
    for r in range(rounds):
        for p in paths:
            with open(p, "a", encoding="utf-8") as fh:
                fh.write(f"- bench round {r}\n")
        samples["push 10 changed"].append(timed([*cli, "push"], memory, env).seconds)
        samples["status"].append(timed([*cli, "status"], memory, env).seconds)
        dest = memory.parent / f"clone-{r}"
        samples["clone"].append(timed([*cli, "clone", "longlived", str(dest)], memory.parent, env).seconds)
        shutil.rmtree(dest)
    results[name] = {
        **{k: round(statistics.median(v), 4) for k, v in samples.items()},
        "hub": _counts(home / "hub.git"), "memory": _counts(memory / ".git"),
    }
    print(name, json.dumps(results[name]), flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--versions", type=int, default=2000)
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args(argv)
    results: dict[str, dict[str, object]] = {}
    with tempfile.TemporaryDirectory(prefix="memsync-maint-") as tmp:
        root = args.workdir or Path(tmp)
        started = time.monotonic()
        auto = build(root / "auto", args.files, args.versions, {})
        never = build(root / "never", args.files, args.versions, OFF)
        print(f"built 2 x {args.versions} versions in {time.monotonic() - started:.0f}s", flush=True)
        shutil.copytree(root / "never", root / "packed", symlinks=True)
        packed = root / "packed" / "memory"
        timed([sys.executable, "-m", "memsync", "gc"], packed, _env(root / "packed" / "home", OFF))
        measure("no maintenance", never, args.rounds, results, OFF)
        measure("automatic maintenance", auto, args.rounds, results, {})
        measure("one pack (memsync gc)", packed, args.rounds, results, OFF)
    ref = results["one pack (memsync gc)"]
    print(f"\n{args.versions} versions of a {args.files}-file memory; ratio to the same history in one pack")
    print(f"{'':24}{'push 10':>10}{'status':>10}{'clone':>10}{'hub packs':>11}{'hub loose':>11}{'mem loose':>11}")
    for name, row in results.items():
        ratios = [float(row[k]) / float(ref[k]) for k in ("push 10 changed", "status", "clone")]  # type: ignore[arg-type]
        hub, mem = row["hub"], row["memory"]
        print(f"{name:24}" + "".join(f"{x:>9.2f}x" for x in ratios)
              + f"{hub['packs']:>11}{hub['loose']:>11}{mem['loose']:>11}")  # type: ignore[index]
    out = HERE / "results" / "maintenance.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"versions": args.versions, "files": args.files, "rounds": args.rounds,
                               "results": results}, indent=2) + "\n")
    print(f"results: {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
