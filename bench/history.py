"""Boot time against history (issue 14): clone and `log -n 20` of a memory with many versions.

    python bench/history.py --files 10000 --versions 5000 --workdir /tmp/hist --rounds 5

Builds (once, kept in --workdir) a memory of FILES files whose branch on an embedded hub has
VERSIONS versions, each changing a few files as runs do (with memsync's run trailers), written
with `git fast-import`; a copy of the same history in a bare repo for the git CLI; and a
`git daemon` serving both. Then times, as child processes (wall clock, peak RSS from wait4):

- `memsync clone` against `git clone --depth 1` and a full `git clone` (file path and git://);
- `memsync log -n 20` against `git log -n 20 --stat` in the clone;
- the same memsync commands warm: memsync.cli imported once, main([...]) called in a loop.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import gen
import procs

from bench import make_env, memsync_cmd, write_gitconfig

NAME = "hist"


def fast_import(repo: Path, files: int, versions: int, env: dict[str, str], per_version: int = 3) -> None:
    """VERSIONS commits on refs/heads/memory/NAME: the first adds every file, each later one
    appends a line to `per_version` files (and every 50th adds a run record)."""
    src = repo.parent / "gen-src"
    shutil.rmtree(src, ignore_errors=True)
    gen.generate(src, files)
    paths = [p for p, _ in gen.layout(files)]
    content = {p: (src / p).read_bytes() for p in paths}
    shutil.rmtree(src)
    rng = random.Random(14)
    proc = subprocess.Popen(["git", "fast-import", "--quiet", "--done"], cwd=repo, env=env,
                            stdin=subprocess.PIPE)
    assert proc.stdin is not None
    out = proc.stdin
    when = 1_700_000_000

    def data(blob: bytes) -> None:
        out.write(b"data %d\n" % len(blob))
        out.write(blob)
        out.write(b"\n")

    for n in range(versions):
        run_id = f"20261101T{n:06d}Z-{n:06x}"
        if n == 0:
            changed = paths
            msg = "seed\n"
        else:
            changed = rng.sample(paths, per_version)
            for p in changed:
                content[p] += f"- update {n}: the agent learned something new about {p}\n".encode()
            msg = (f"run {run_id} end\n\nMemsync-Actor: run\nMemsync-Run-Id: {run_id}\n"
                   f"Memsync-Command: agent\nMemsync-Exit-Code: 0\nMemsync-Host: bench\n")
        if n and n % 50 == 0:
            record = f"runs/{run_id}.md"
            content[record] = f"# run {run_id}\n\nnotes of the run\n".encode()
            changed = [*changed, record]
        stamp = when + n * 60
        author = f"memsync run {run_id} <run@memsync.invalid> {stamp} +0000"
        out.write(f"commit refs/heads/memory/{NAME}\nmark :{n + 1}\nauthor {author}\n"
                  f"committer {author}\n".encode())
        data(msg.encode())
        if n:
            out.write(f"from :{n}\n".encode())
        for p in changed:
            out.write(f"M 100644 inline {p}\n".encode())
            data(content[p])
    out.write(b"done\n")
    out.close()
    if proc.wait() != 0:
        raise SystemExit("fast-import failed")


def build(work: Path, files: int, versions: int) -> tuple[dict[str, str], Path, Path]:
    home = work / "mshome"
    env = make_env(work, home)
    hub = home / "hub.git"
    bare = work / "git.git"
    if (work / "built").exists():
        return env, hub, bare
    write_gitconfig(work)
    t0 = time.perf_counter()
    procs.run(["git", "init", "-q", "--bare", str(hub)], work, env)
    fast_import(hub, files, versions, env)
    procs.run("git repack -adq && git pack-refs --all", hub, env)
    # another memory on the same hub, so "only this memory's objects" is measured
    procs.run(["git", "clone", "-q", "--bare", "--no-local", str(hub), str(bare)], work, env)
    procs.run(f"git symbolic-ref HEAD refs/heads/memory/{NAME}", bare, env)
    (work / "built").write_text("ok\n")
    print(f"built {files} files x {versions} versions in {time.perf_counter() - t0:.1f}s", flush=True)
    return env, hub, bare


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=10_000)
    ap.add_argument("--versions", type=int, default=5_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/memsync-history"))
    ap.add_argument("--only", default="", help="comma list of: clone,log,warm")
    ap.add_argument("--shallow-only", action="store_true",
                    help="clone: only memsync against git clone --depth 1 (more rounds in the time)")
    args = ap.parse_args()
    work = args.workdir.resolve()
    work.mkdir(parents=True, exist_ok=True)
    env, hub, bare = build(work, args.files, args.versions)
    only = set(filter(None, args.only.split(",")))
    ms = memsync_cmd()
    daemon = procs.GitDaemon(work, env)
    results: dict[str, list[tuple[float, int]]] = {}

    def add(name: str, sample: procs.Sample) -> None:
        results.setdefault(name, []).append((sample.seconds * 1000, sample.rss_kb))

    dest = work / "dest"
    try:
        if not only or "clone" in only:
            cands = {
                "memsync clone (file)": lambda: procs.timed([*ms, "clone", NAME, str(dest)], work, env),
                "memsync clone (git://)": lambda: procs.timed(
                    [*ms, "clone", NAME, str(dest), "--remote", daemon.url(hub)], work, env),
                "git clone --depth 1 (file)": lambda: procs.timed(
                    f"git clone -q --depth 1 file://{bare} {dest}", work, env),
                "git clone --depth 1 (git://)": lambda: procs.timed(
                    f"git clone -q --depth 1 {daemon.url(bare)} {dest}", work, env),
                "git clone (file)": lambda: procs.timed(f"git clone -q file://{bare} {dest}", work, env),
                "git clone (git://)": lambda: procs.timed(f"git clone -q {daemon.url(bare)} {dest}", work, env),
            }
            items = [(k, v) for k, v in cands.items() if not (args.shallow_only and k.startswith("git clone ("))]
            for r in range(args.rounds):
                shift = r % len(items)
                for name, action in items[shift:] + items[:shift]:
                    shutil.rmtree(dest, ignore_errors=True)
                    add(name, action())
            shutil.rmtree(dest, ignore_errors=True)
        mem = work / "mem"
        gitwt = work / "gitwt"
        if not mem.exists():
            procs.run([*ms, "clone", NAME, str(mem)], work, env)
        if not gitwt.exists():
            procs.run(["git", "clone", "-q", f"file://{bare}", str(gitwt)], work, env)
        if not only or "log" in only:
            cands = {
                "memsync log -n 20": lambda: procs.timed([*ms, "log", "-n", "20"], mem, env),
                "git log -n 20 --stat": lambda: procs.timed("git log -n 20 --stat >/dev/null", gitwt, env),
                "memsync log -n 20 (shallow-built)": lambda: procs.timed([*ms, "log", "-n", "20"], mem, env),
            }
            items = list(cands.items())[:2]
            for r in range(args.rounds):
                shift = r % len(items)
                for name, action in items[shift:] + items[:shift]:
                    add(name, action())
        if not only or "warm" in only:
            code = (
                "import os, sys, time, shutil, contextlib, io\n"
                "from memsync import cli\n"
                "def call(args):\n"
                "    out = io.StringIO()\n"
                "    t = time.perf_counter()\n"
                "    with contextlib.redirect_stdout(out):\n"
                "        try:\n"
                "            cli.main(args)\n"
                "        except SystemExit as e:\n"
                "            assert not e.code, (args, e.code)\n"
                "    return (time.perf_counter() - t) * 1000\n"
                f"rounds = {args.rounds}\n"
                f"dest = {str(work / 'warmdest')!r}\n"
                "os.chdir(sys.argv[1])\n"
                "logs = [call(['log', '-n', '20']) for _ in range(rounds)]\n"
                "clones = []\n"
                "for _ in range(rounds):\n"
                "    shutil.rmtree(dest, ignore_errors=True)\n"
                f"    clones.append(call(['clone', {NAME!r}, dest]))\n"
                "shutil.rmtree(dest, ignore_errors=True)\n"
                "print(sorted(logs)[len(logs)//2], sorted(clones)[len(clones)//2])\n"
            )
            out = subprocess.run([sys.executable, "-c", code, str(mem)], env=env, capture_output=True,
                                 text=True, check=False)
            if out.returncode:
                print(out.stderr[-3000:])
            else:
                log_ms, clone_ms = map(float, out.stdout.split())
                results["warm: memsync log -n 20"] = [(log_ms, 0)]
                results["warm: memsync clone (file)"] = [(clone_ms, 0)]
    finally:
        daemon.stop()
    summary = {}
    for name, samples in results.items():
        ms_med = statistics.median(s[0] for s in samples)
        rss = max(s[1] for s in samples) / 1024
        spread = (max(s[0] for s in samples) - min(s[0] for s in samples)) / 2
        summary[name] = {"ms": round(ms_med, 1), "spread": round(spread, 1), "rss_mb": round(rss, 1)}
        print(f"{name:36s} {ms_med:9.1f} ms ±{spread:6.1f}   peak RSS {rss:7.1f} MB", flush=True)
    (work / "latest.json").write_text(json.dumps(summary, indent=1) + "\n")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "")
    main()
