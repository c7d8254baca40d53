"""Clutter under concurrency: many runs rewriting one summary, and what the tree holds afterwards.

    python bench/clutter.py                               # 64 writers x 5 runs, embedded hub
    python bench/clutter.py --old-rev 9b42f75             # also the behaviour before gathered files
    python bench/clutter.py --writers 8 --runs 2          # a quick check

W worker processes each make R runs one after another, every run in a fresh sandbox directory (a
new clone, cold, as a throwaway VM has), all on one memory, with bench/contention.py's workers.
The agent follows the contract's advice for a summary: it reads `summary.md`, writes the whole
file anew (what was there plus its own line `- <run id>`) to `.tmp.summary.md` and renames it over
`summary.md`. It folds nothing, so every lost race leaves a losing version behind.

Reported for the hub's final version: files in the tree, conflict files (gathered
`*.conflicts.md` and old-style `*.conflict-*` copies), their bytes, and lines lost: runs whose
line is neither in `summary.md` nor in any conflict file. With `--old-rev REV` the same batch
runs again with the memsync of commit REV (extracted with `git archive`), round by round
alternating which goes first. Results go to bench/results/clutter.json. Not part of the test suite.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from contention import _env, fleet  # noqa: E402
from procs import run  # noqa: E402

from memsync.checks import gathered  # noqa: E402
from memsync.util.names import is_conflict_copy, is_gathered  # noqa: E402

AGENT = """\
import os, pathlib
mem = pathlib.Path(os.environ["MEMSYNC_MEMORY_DIR"])
rid = os.environ["MEMSYNC_RUN_ID"]
summary = mem / "summary.md"
text = summary.read_text() if summary.exists() else "# Summary\\n"
tmp = mem / ".tmp.summary.md"
tmp.write_text(text + f"- {rid}\\n")
os.replace(tmp, summary)
"""


def _seed(hub: Path, env: dict[str, str], work: Path) -> None:
    run(["git", "init", "-q", "--bare", str(hub)], work, env)
    seed = work / "seed"
    run(["git", "init", "-q", "-b", "memory/research", str(seed)], work, env)
    (seed / "summary.md").write_text("# Summary\n")
    run("git add -A && git commit -qm seed && git push -q " + str(hub) + " memory/research", seed, env)


def _old_source(rev: str, dest: Path) -> Path:
    dest.mkdir(parents=True)
    archive = subprocess.run(["git", "archive", rev, "memsync"], cwd=HERE.parent, check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return dest


def _tree(hub: Path, env: dict[str, str]) -> dict[str, bytes]:
    names = run(["git", "ls-tree", "-r", "--name-only", "-z", "memory/research"], hub, env).split("\0")
    return {n: subprocess.run(["git", "show", f"memory/research:{n}"], cwd=hub, env=env, check=True,
                              capture_output=True).stdout for n in names if n}


def _lines_kept(tree: dict[str, bytes]) -> set[str]:
    """Run ids whose summary line is in summary.md or in a conflict file (inlined entries read whole)."""
    texts = [tree.get("summary.md", b"")]
    for name, data in tree.items():
        if is_gathered(name):
            texts += [e.inline() or b"" for e in gathered.parse(data).entries.values()]
        elif is_conflict_copy(name):
            texts.append(data)
    return {line[2:] for text in texts for line in text.decode(errors="replace").splitlines()
            if line.startswith("- ")}


def _batch(label: str, pythonpath: str | None, root: Path, writers: int, runs: int) -> dict[str, object]:
    work = root / label
    work.mkdir(parents=True)
    env = _env(work / "home")
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    hub = work / "home" / "memsync" / "hub.git"
    hub.parent.mkdir(parents=True)
    _seed(hub, env, work)
    results, wall = fleet("memsync", str(hub), work, env, writers, runs, AGENT, tag=f"{label}-")
    tree = _tree(hub, env)
    conflict_files = [n for n in tree if is_gathered(n) or is_conflict_copy(n)]
    entries = sum(len(gathered.parse(tree[n]).entries) for n in conflict_files if is_gathered(n))
    return {
        "behaviour": label, "runs": len(results),
        "give_ups": sum(1 for code, _ in results.values() if code != 0),
        "files_in_tree": len(tree), "conflict_files": len(conflict_files),
        "losing_versions_kept": entries + sum(1 for n in conflict_files if is_conflict_copy(n)),
        "conflict_bytes": sum(len(tree[n]) for n in conflict_files),
        "lines_lost": len(set(results) - _lines_kept(tree)),
        "wall_seconds": round(wall, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--writers", type=int, default=64)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--old-rev", default=None, help="also measure the memsync of this commit")
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=HERE / "results" / "clutter.json")
    args = parser.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory(prefix="memsync-clutter-") as tmp:
        root = args.workdir or Path(tmp)
        candidates: list[tuple[str, str | None]] = [("gathered", None)]
        if args.old_rev:
            candidates.append((f"copies ({args.old_rev})", str(_old_source(args.old_rev, root / "old-src"))))
        for n in range(args.rounds):
            order = candidates if n % 2 == 0 else candidates[::-1]
            for label, path in order:
                row = _batch(label.split()[0], path, root / f"round{n}", args.writers, args.runs)
                row.update(behaviour=label, round=n)
                rows.append(row)
                print(json.dumps(row), flush=True)
    _print(rows, args.writers, args.runs)
    args.out.parent.mkdir(exist_ok=True)
    args.out.write_text(json.dumps({"writers": args.writers, "runs_each": args.runs, "rows": rows}, indent=2) + "\n")
    print(f"results: {args.out}")
    return 0


def _print(rows: list[dict[str, object]], writers: int, runs: int) -> None:
    print(f"\n{writers} writers x {runs} runs rewriting one summary.md (embedded hub)")
    cols = ["behaviour", "runs", "give_ups", "files_in_tree", "conflict_files", "losing_versions_kept",
            "conflict_bytes", "lines_lost", "wall_seconds"]
    print("  ".join(f"{c:>20}" for c in cols))
    for row in rows:
        print("  ".join(f"{row[c]!s:>20}" for c in cols))


if __name__ == "__main__":
    raise SystemExit(main())
