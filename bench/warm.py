"""The work a verb does inside one warm process: memsync.cli.app.main([...]) called repeatedly.

Start-up (interpreter, imports) is left out: what remains is what a resident server's child
still pays per request. Needs a memory kept by bench.py:

    python bench/bench.py --sizes 10000 --rounds 1 --no-daemon --workdir /tmp/b --keep
    python bench/warm.py --workdir /tmp/b/n10000 status push push10 pull10 run
    python bench/warm.py --workdir /tmp/b/n10000 --profile status     # cProfile, by own time
    python bench/warm.py --workdir /tmp/b/n10000 --src /tmp/old status  # another checkout's memsync
    python bench/warm.py --workdir /tmp/b/n10000 --tracker status push run # scans narrowed as served
    python bench/warm.py --workdir /tmp/b/n10000 --daemon --copy push10   # the git:// memory, through a git daemon

Verbs: status, push (nothing changed), push10 (one line appended to 10 files first), pull10
(10 files changed on the hub first, as bench.remote_writer does), run (`run -- true`).
Prints per verb the median and minimum CPU time of the process (all threads) and wall time, in
ms. It changes the memory and its hub: use a copy (--copy makes one under the work directory).
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import os
import pstats
import resource
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

ARGS = {"status": ["status"], "push": ["push"], "push10": ["push"], "pull10": ["pull"],
        "run": ["run", "--", "true"]}


def cpu_ms() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return (ru.ru_utime + ru.ru_stime) * 1000


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("verbs", nargs="+", choices=sorted(ARGS))
    ap.add_argument("--workdir", type=Path, required=True, help="a size's directory kept by bench.py (nNNNN)")
    ap.add_argument("--n", type=int, default=10, help="timed calls per verb (after one untimed)")
    ap.add_argument("--profile", action="store_true", help="cProfile the timed calls, print the top functions")
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--src", type=Path, help="import memsync from this directory instead")
    ap.add_argument("--copy", action="store_true", help="work on a fresh copy of the memory and its hub")
    ap.add_argument("--tracker", action="store_true",
                    help="narrow scans with an in-process change tracker, as a `memsync serve` worker's are")
    ap.add_argument("--daemon", action="store_true",
                    help="the git:// memory (ms-daemon): its storage.yaml is pointed at a git daemon started here")
    a = ap.parse_args()
    if a.src:
        sys.path.insert(0, str(a.src))
    name = "ms-daemon" if a.daemon else "ms-file"
    memory, home = a.workdir / name, a.workdir / "mshome"
    if a.copy:
        target = a.workdir / "warm"
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir()
        shutil.copytree(memory, target / name, symlinks=True)
        shutil.copytree(home, target / "mshome", symlinks=True)
        memory, home = target / name, target / "mshome"
    os.environ["MEMSYNC_HOME"] = str(home)
    os.environ["HOME"] = str(a.workdir.parent / "home")
    os.environ.setdefault("GIT_CONFIG_NOSYSTEM", "1")
    with contextlib.ExitStack() as stack:
        if a.daemon:
            stack.enter_context(_serving(a.workdir, home / "hub.git", memory))
        os.chdir(memory)
        return _measure(a, home)


@contextlib.contextmanager
def _serving(base: Path, hub: Path, memory: Path) -> Iterator[None]:
    """A git daemon over `base` for the run, and the memory's `remote:` pointed at it (the port
    bench.py's daemon had is gone)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from procs import GitDaemon

    daemon = GitDaemon(base, dict(os.environ))
    try:
        config = memory / ".vm0" / "storage.yaml"
        lines = [line for line in config.read_text().splitlines() if not line.startswith("remote:")]
        config.write_text("\n".join([*lines, f"remote: {daemon.url(hub)}"]) + "\n")
        yield
    finally:
        daemon.stop()


def _measure(a: argparse.Namespace, home: Path) -> int:
    import pygit2

    from memsync.cli.app import main as memsync_main

    if a.tracker:
        _track()

    hub = pygit2.Repository(str(home / "hub.git"))
    name = next(line.split(":", 1)[1].strip() for line in Path(".vm0/storage.yaml").read_text().splitlines()
                if line.startswith("name:"))
    ref = f"refs/heads/memory/{name}"  # the hub holds both memories (ms-file, ms-daemon)
    files = sorted(subprocess.run(["git", "ls-files"], capture_output=True, text=True, check=True).stdout.split())
    picks = [files[i * len(files) // 10 + 3] for i in range(10)]
    counter = [0]

    def change_local() -> None:
        for path in picks:
            with open(path, "a", encoding="utf-8") as fh:
                fh.write(f"- local edit {counter[0]} at {time.time()}\n")

    def change_hub() -> None:
        from pygit2.enums import FileMode

        tip = hub.references[ref].peel(pygit2.Commit)
        index = pygit2.Index()
        index.read_tree(tip.tree)
        sig = pygit2.Signature("Other Writer", "other@example.invalid")
        for path in picks:
            old = hub[tip.tree[path].id].peel(pygit2.Blob).data
            blob = hub.create_blob(old + f"- remote edit {counter[0]} at {time.time()}\n".encode())
            index.add(pygit2.IndexEntry(path, blob, FileMode.BLOB))
        hub.create_commit(ref, sig, sig, f"Remote edit {counter[0]}\n", index.write_tree(hub), [tip.id])

    prepare: dict[str, Callable[[], None]] = {"push10": change_local, "pull10": change_hub}

    def prep(verb: str) -> None:
        counter[0] += 1
        prepare.get(verb, lambda: None)()

    def call(verb: str) -> int:
        with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            return memsync_main(list(ARGS[verb]))

    for verb in a.verbs:
        prep(verb)
        if call(verb) != 0:
            print(f"{verb}: the untimed call failed", file=sys.stderr)
            return 1
        profile = cProfile.Profile() if a.profile else None
        cpu, wall = [], []
        for _ in range(a.n):
            prep(verb)
            c, t = cpu_ms(), time.perf_counter()
            if profile:
                profile.enable()
            code = call(verb)
            if profile:
                profile.disable()
            wall.append((time.perf_counter() - t) * 1000)
            cpu.append(cpu_ms() - c)
            if code != 0:
                print(f"{verb}: exit {code}", file=sys.stderr)
                return 1
        print(f"{verb:7} cpu median {statistics.median(cpu):6.1f} min {min(cpu):6.1f} | "
              f"wall median {statistics.median(wall):6.1f} min {min(wall):6.1f} ms")
        if profile:
            out = io.StringIO()
            pstats.Stats(profile, stream=out).sort_stats("tottime").print_stats(a.top)
            print(out.getvalue())
    return 0


def _track() -> None:
    """The server's trackers in this process, reached directly instead of over a worker's line."""
    from memsync.git import hints
    from memsync.serve.tracker import Trackers
    from memsync.serve.tracklink import Local

    hints.source = Local(Trackers())


if __name__ == "__main__":
    sys.exit(main())
