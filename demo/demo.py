"""`make demo`: the sandbox loop, end to end, on a fresh embedded hub (no network, no keys).

1. seed a memory from .vm0-example/ and push it;
2. run the scripted agent through `memsync run` in a throwaway directory;
3. run it twice at once in two more throwaway directories (both edit summary.md);
4. show `memsync log`, `memsync status` and `memsync list`.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
KEEP = bool(os.environ.get("MEMSYNC_DEMO_DIR"))  # a directory the user named is theirs: kept
WORK = Path(os.environ.get("MEMSYNC_DEMO_DIR") or tempfile.mkdtemp(prefix="memsync-demo-"))
ENV = dict(os.environ, MEMSYNC_HOME=str(WORK / "home"))
ENV.pop("MEMSYNC_REMOTE", None)
AGENT = [sys.executable, str(REPO / "demo" / "agent.py")]


def step(title: str) -> None:
    print(f"\n=== {title}", flush=True)


def memsync(*args: str, cwd: Path) -> None:
    print(f"$ memsync {shlex.join(args)}", flush=True)
    proc = subprocess.run([sys.executable, "-m", "memsync", *args], cwd=cwd, env=ENV)
    if proc.returncode != 0:
        sys.exit(f"demo failed: memsync {' '.join(args)} exited {proc.returncode}")


def sandbox(name: str) -> Path:
    path = WORK / "sandboxes" / name
    path.mkdir(parents=True)
    return path


def main() -> None:
    print(f"demo directory: {WORK} (embedded hub in {WORK / 'home'})")
    step("Seed the memory 'research' from .vm0-example/ and push it")
    seed = WORK / "seed" / "research"
    shutil.copytree(REPO / ".vm0-example", seed)
    memsync("init", cwd=seed)
    memsync("push", "-m", "Seed the research memory", cwd=seed)

    step("Run 1: a fresh sandbox; memsync clones the memory, runs the agent, pushes")
    box = sandbox("run-1")
    memsync("run", "--memory", "research", "--run-id", "demo-run-1", "--", *AGENT, "RGA", cwd=box)
    shutil.rmtree(box)
    print("(sandbox destroyed)")

    step("Runs 2 and 3: two sandboxes at once on the same memory")
    procs = []
    for n, topic in ((2, "Logoot"), (3, "LSEQ")):
        box = sandbox(f"run-{n}")
        cmd = [sys.executable, "-m", "memsync", "run", "--memory", "research", "--run-id", f"demo-run-{n}",
               "--", *AGENT, topic]
        print(f"$ memsync {shlex.join(cmd[3:])}   # in {box.name}", flush=True)
        procs.append(subprocess.Popen(cmd, cwd=box, env=ENV))
    codes = [p.wait() for p in procs]
    if any(codes):
        sys.exit(f"demo failed: concurrent runs exited {codes}")
    shutil.rmtree(WORK / "sandboxes")
    print("(sandboxes destroyed)")

    step("An operator's laptop: clone the memory and look at it")
    laptop = WORK / "laptop"
    laptop.mkdir()
    memsync("clone", "research", cwd=laptop)
    mem = laptop / "research"
    print(f"$ ls {mem.relative_to(WORK)} {mem.relative_to(WORK)}/runs")
    print("  " + "  ".join(sorted(p.name for p in mem.iterdir() if not p.name.startswith("."))))
    print("  " + "  ".join(sorted(p.name for p in (mem / "runs").iterdir())))
    memsync("log", cwd=mem)
    memsync("status", cwd=mem)
    memsync("list", cwd=mem)
    print(f"\nsummary.md now:\n{(mem / 'summary.md').read_text()}")


if __name__ == "__main__":
    try:
        main()
    finally:
        if not KEEP:
            shutil.rmtree(WORK, ignore_errors=True)
            print(f"\n(demo directory {WORK} removed; set MEMSYNC_DEMO_DIR=DIR to keep one)")
