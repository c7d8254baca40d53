"""One memory on a crowded hub against the same memory on a hub of its own (issue 24, part 1).

    python bench/fleet.py                                # 20,000 and 100,000 memories, 3 rounds
    python bench/fleet.py --sizes 20000 --rounds 2 --transports file,git
    python bench/fleet.py --baseline /path/to/older/checkout   # before/after in the same run
    python bench/fleet.py --off MEMSYNC_V2_FETCH --ops pull,status   # a switch on and off in the same run

A crowded hub holds N memories (N-1 small ones, each its own commit, plus the measured one, 100
files); the lone hub holds the measured memory alone. Each candidate (this checkout; with
--baseline, an older checkout too) has its own clone of the measured memory per hub and per
transport, and each round runs, cold (a new Python per command, as a sandbox does):

    pull        after another writer pushed one changed file (untimed, with git)
    push        after changing one file
    status
    run         `memsync run -- true` (pull, run, record, push)

and, for reference, the git CLI in its own clones: `git pull --ff-only` (pull), commit + `git
push` of one changed file (push), `git fetch && git status --porcelain -b` (status). Every
(transport, hub, candidate) cell runs once per round, in an order that rotates round by round,
so other load hits all alike. The table shows medians and the ratio crowded / lone per
operation; the target is memsync's ratio within 1.3. Figures go to bench/results/fleet.json.

Transports: file (a path to the hub), git (`git daemon` on 127.0.0.1), http (`git http-backend`
behind the test suite's small server, tests/helpers/servers.py, with a token).

Layouts: `branches` (the default: every memory a branch of one hub repository) and `repos` (one
repository per memory, the layout docs/REMOTES.md recommends past 10,000 memories: memsync's
remote is the template `.../repos-N/{name}.git`, and the server holds N standalone repositories
side by side in one folder, tests/helpers/fleet.py). `--layout both` measures the two in the
same rounds, interleaved, and prints one table per size: operation x (branch hub, one repository
per memory) x (memsync, git), each the ratio to a lone memory of that layout (results:
bench/results/fleet-layouts.json):

    python bench/fleet.py --layout both --transports git --rounds 5

`--repos-store alternates|prefixed` builds the repositories of `--layout repos` sharing one
object store through objects/info/alternates instead (the measured memory's too), as is or with
core.alternateRefsPrefixes set to each one's own branch. Results go to bench/results/fleet.json,
or fleet-repos.json for `--layout repos`.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import procs  # noqa: E402  (bench/procs.py)

from tests.helpers.fleet import add_fleet, add_repo_fleet  # noqa: E402
from tests.helpers.servers import HttpGitServer  # noqa: E402

PROBE = "probe"
BRANCH = f"memory/{PROBE}"
FILES = 100
OPS = ("pull", "push", "status", "run")
GIT_OPS = ("pull", "push", "status")
HTTP_USER = "bench"


def build_fleet(hub: Path, count: int, env: dict[str, str]) -> None:
    procs.run(["git", "init", "-q", "--bare", str(hub)], hub.parent, env)
    add_fleet(hub, count)


def build_repos(folder: Path, count: int, env: dict[str, str], store: str = "standalone") -> None:
    """`count` bare repositories `fleet-NNNNNN.git` in `folder`, one memory each (its own commit).
    `store`: "standalone" (each keeps its own objects: the layout docs/REMOTES.md recommends), or
    the repositories share one object store through objects/info/alternates, "alternates" as is
    (a push there is offered every ref of the store as a `.have`) or "prefixed" (each sets
    core.alternateRefsPrefixes to its own branch, so it is offered that one only)."""
    if store == "standalone":
        add_repo_fleet(folder, count)
        return
    folder.mkdir()
    shared = folder / "objects-store.git"
    build_fleet(shared, count, env)
    for line in (shared / "packed-refs").read_text().splitlines()[1:]:
        oid, ref = line.split(" ")
        repo = folder / f"{ref.rsplit('/', 1)[1]}.git"
        for sub in ("objects/info", "objects/pack", "refs/heads", "refs/tags"):
            (repo / sub).mkdir(parents=True)
        (repo / "HEAD").write_text(f"ref: {ref}\n")
        prefixes = f"\talternateRefsPrefixes = {ref}\n" if store == "prefixed" else ""
        (repo / "config").write_text(f"[core]\n\trepositoryformatversion = 0\n\tbare = true\n{prefixes}")
        (repo / "objects/info/alternates").write_text(f"{shared / 'objects'}\n")
        (repo / "packed-refs").write_text(f"# pack-refs with: peeled fully-peeled sorted \n{oid} {ref}\n")


def borrow(repo: Path, store: str) -> None:
    """The measured memory's repository borrows from its folder's store too, as the others do."""
    if store == "standalone":
        return
    (repo / "objects/info/alternates").write_text(f"{repo.parent / 'objects-store.git' / 'objects'}\n")
    if store == "prefixed":
        with open(repo / "config", "a", encoding="ascii") as fh:
            fh.write(f"[core]\n\talternateRefsPrefixes = refs/heads/{BRANCH}\n")


def make_probe(work: Path, env: dict[str, str]) -> Path:
    src = work / "probe-src"
    procs.run(["git", "init", "-q", "-b", BRANCH, str(src)], work, env)
    for i in range(FILES):
        (src / f"note-{i:03d}.md").write_text(f"note {i}\n" * 8)
    procs.run("git add -A && git commit -qm 'probe: 100 files'", src, env)
    return src


@dataclass
class Cell:
    transport: str
    hub: str  # "<layout>:lone" or "<layout>:<the crowded hub's size>"
    candidate: str  # a memsync candidate, or "git"
    directory: Path
    samples: dict[str, list[float]] = field(default_factory=dict)


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.work = Path(args.workdir or tempfile.mkdtemp(prefix="memsync-fleet-"))
        self.work.mkdir(parents=True, exist_ok=True)
        self.env = self._env()
        subject = str(Path(args.subject).resolve()) if args.subject else str(ROOT)
        self.candidates = {"memsync": subject}
        if args.baseline:
            self.candidates = {"before": str(Path(args.baseline).resolve()), "memsync": subject}
        self.switched: dict[str, str] = {}  # candidate -> the switch it runs with set to 0
        for name in args.off:
            self.candidates[f"{name}=0"] = subject
            self.switched[f"{name}=0"] = name
        self.loads: list[list[float]] = []
        self.ops = [op for op in OPS if op in args.ops]
        self.git_ops = [op for op in GIT_OPS if op in args.ops]  # the load average (1, 5, 15 min) after each round
        self.hubs: dict[str, Path] = {}
        self.daemon: procs.GitDaemon | None = None
        self.http: HttpGitServer | None = None
        self.cells: list[Cell] = []
        self.setup_seconds: dict[str, float] = {}

    def _env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMSYNC_", "GIT_", "PYTHON"))}
        home = self.work / "home"
        home.mkdir(exist_ok=True)
        env.update({"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"),
                    "XDG_DATA_HOME": str(home / ".local/share"), "GIT_CONFIG_NOSYSTEM": "1",
                    "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C", "GIT_AUTHOR_NAME": "bench",
                    "GIT_AUTHOR_EMAIL": "bench@example.com", "GIT_COMMITTER_NAME": "bench",
                    "GIT_COMMITTER_EMAIL": "bench@example.com",
                    "PYTHONPYCACHEPREFIX": str(self.work / "pycache")})
        (home / ".gitconfig").write_text("[user]\n\tname = bench\n\temail = bench@example.com\n"
                                         "[init]\n\tdefaultBranch = main\n[gc]\n\tauto = 0\n")
        return env

    # -- set-up ----------------------------------------------------------------------------
    def url(self, transport: str, hub: Path, for_git: bool) -> str:
        if transport == "file":
            return str(hub) if not for_git else f"file://{hub}"
        if transport == "git":
            assert self.daemon is not None
            return self.daemon.url(hub)
        assert self.http is not None
        user = f"{HTTP_USER}:{self.http.token}" if for_git else HTTP_USER
        return f"http://{user}@127.0.0.1:{self.http.port}/{hub.relative_to(self.work)}"

    def memsync_env(self, candidate: str, cell_home: Path) -> dict[str, str]:
        env = dict(self.env)
        env["PYTHONPATH"] = self.candidates[candidate]
        if candidate in self.switched:
            env[self.switched[candidate]] = "0"
        env["MEMSYNC_HOME"] = str(cell_home)
        env["MEMSYNC_MAX_REFS"] = str(max(100_000, 2 * max(self.args.sizes)))
        if self.http is not None:
            env["MEMSYNC_TOKEN"] = self.http.token
            env["MEMSYNC_USER"] = HTTP_USER
        return env

    def memsync(self, candidate: str) -> list[str]:
        return [sys.executable, "-m", "memsync"]

    def layouts(self) -> list[str]:
        return ["branches", "repos"] if self.args.layout == "both" else [self.args.layout]

    def build_hubs(self, layout: str) -> None:
        """The lone hub and one crowded hub per size of `layout`; labels `<layout>:lone`, `<layout>:<size>`."""
        if layout == "repos":  # the lone memory's repository alone in its folder
            lone = self.work / "repos-lone" / f"{PROBE}.git"
            lone.parent.mkdir()
        else:
            lone = self.work / "lone.git"
        procs.run(["git", "init", "-q", "--bare", str(lone)], self.work, self.env)
        self.hubs[f"{layout}:lone"] = lone
        for size in self.args.sizes:
            hub = self.work / (f"repos-{size}" if layout == "repos" else f"fleet-{size}.git")
            started = time.perf_counter()
            if layout == "repos":
                build_repos(hub, size - 1, self.env, self.args.repos_store)
                hub = hub / f"{PROBE}.git"
                procs.run(["git", "init", "-q", "--bare", str(hub)], self.work, self.env)
                borrow(hub, self.args.repos_store)
            else:
                build_fleet(hub, size - 1, self.env)
            self.setup_seconds[f"build {layout} {size}"] = round(time.perf_counter() - started, 1)
            self.hubs[f"{layout}:{size}"] = hub

    def set_up(self) -> None:
        probe = make_probe(self.work, self.env)
        for layout in self.layouts():
            self.build_hubs(layout)
        for hub in self.hubs.values():
            procs.run(["git", "push", "-q", str(hub), BRANCH], probe, self.env)
            procs.run(["git", "config", "http.receivepack", "true"], hub, self.env)
        if "git" in self.args.transports:
            self.daemon = procs.GitDaemon(self.work, self.env)
        if "http" in self.args.transports:
            self.http = HttpGitServer(self.work, user=HTTP_USER, token=secrets.token_hex(16))
            self.http.start()
        clones = self.work / "clones"
        clones.mkdir()
        for transport in self.args.transports:
            for label, hub in self.hubs.items():
                for candidate in self.candidates:
                    dest = clones / f"{transport}-{label.replace(':', '-')}-{candidate}"
                    env = self.memsync_env(candidate, dest.with_name(dest.name + "-home"))
                    remote = hub.parent / "{name}.git" if label.startswith("repos:") else hub
                    procs.run([*self.memsync(candidate), "clone", PROBE, str(dest), "--remote",
                               self.url(transport, remote, False)], clones, env)
                    self.cells.append(Cell(transport, label, candidate, dest))
                dest = clones / f"{transport}-{label.replace(':', '-')}-git"
                procs.run(["git", "clone", "-q", "--single-branch", "-b", BRANCH,
                           self.url(transport, hub, True), str(dest)], clones, self.env)
                self.cells.append(Cell(transport, label, "git", dest))
        writers = self.work / "writers"
        writers.mkdir()
        for label, hub in self.hubs.items():
            procs.run(["git", "clone", "-q", "-b", BRANCH, str(hub), str(writers / label.replace(":", "-"))],
                      writers, self.env)

    # -- rounds ----------------------------------------------------------------------------
    def advance_hubs(self, round_no: int) -> None:
        """Another writer changes one file on every hub (what each pull then brings)."""
        for label in self.hubs:
            writer = self.work / "writers" / label.replace(":", "-")
            procs.run(f"git pull -q --ff-only && echo 'round {round_no}' >> note-050.md && "
                      f"git commit -qam 'writer: round {round_no}' && git push -q", writer, self.env)

    def run_cell(self, cell: Cell, round_no: int) -> None:
        d = cell.directory
        if cell.candidate == "git":
            steps = {"pull": "git pull -q --ff-only",
                     "push": f"echo 'git {round_no}' >> note-001.md && git commit -qam 'one file' && git push -q",
                     "status": "git fetch -q && git status --porcelain -b"}
            for op in self.git_ops:
                sample = procs.timed(steps[op], d, self.env)
                cell.samples.setdefault(op, []).append(sample.seconds)
            return
        env = self.memsync_env(cell.candidate, d.with_name(d.name + "-home"))
        ms = self.memsync(cell.candidate)
        for op in self.ops:
            if op == "push":
                with open(d / "note-001.md", "a", encoding="utf-8") as fh:
                    fh.write(f"{cell.candidate} {round_no}\n")
            argv = {"pull": [*ms, "pull"], "push": [*ms, "push"], "status": [*ms, "status"],
                    "run": [*ms, "run", "--", "true"]}[op]
            sample = procs.timed(argv, d, env)
            cell.samples.setdefault(op, []).append(sample.seconds)

    def measure(self) -> None:
        for cell in self.cells:  # warm: bytecode caches, the page cache, each clone's first fetch
            if cell.candidate != "git":
                env = self.memsync_env(cell.candidate, cell.directory.with_name(cell.directory.name + "-home"))
                procs.run([*self.memsync(cell.candidate), "status"], cell.directory, env)
        for round_no in range(self.args.rounds):
            self.advance_hubs(round_no)
            shift = round_no % len(self.cells)
            order = self.cells[shift:] + self.cells[:shift]
            if round_no % 2:
                order.reverse()
            started = time.perf_counter()
            for cell in order:
                self.run_cell(cell, round_no)
            self.loads.append([round(x, 2) for x in os.getloadavg()])
            print(f"round {round_no + 1}/{self.args.rounds}: {time.perf_counter() - started:.0f} s, "
                  f"load average {self.loads[-1]}", flush=True)

    # -- results ---------------------------------------------------------------------------
    def table(self) -> list[dict[str, object]]:
        rows: list[dict[str, object]] = []
        by_key = {(c.transport, c.hub, c.candidate): c for c in self.cells}
        for transport in self.args.transports:
            for size in self.args.sizes:
                for layout in self.layouts():
                    for candidate in [*self.candidates, "git"]:
                        lone = by_key[(transport, f"{layout}:lone", candidate)]
                        crowded = by_key[(transport, f"{layout}:{size}", candidate)]
                        for op in (self.git_ops if candidate == "git" else self.ops):
                            rows.append(row(layout, transport, size, candidate, op, lone.samples[op],
                                            crowded.samples[op]))
        return rows

    def close(self) -> None:
        if self.http is not None:
            self.http.stop()
        if self.daemon is not None:
            self.daemon.stop()
        if not self.args.keep:
            shutil.rmtree(self.work, ignore_errors=True)


def row(layout: str, transport: str, size: int, candidate: str, op: str, lone: list[float],
        crowded: list[float]) -> dict[str, object]:
    """One table row. `round_ratio` is the median of each round's crowded / lone (the two ran in the
    same round, under the same load): on a loaded machine it wanders less than the ratio of medians."""
    a, b = statistics.median(lone), statistics.median(crowded)
    return {"layout": layout, "transport": transport, "memories": size, "candidate": candidate, "op": op,
            "lone_ms": round(a * 1000), "crowded_ms": round(b * 1000), "ratio": round(b / a, 2),
            "round_ratio": round(statistics.median(y / x for x, y in zip(lone, crowded, strict=True)), 2),
            "lone_samples_ms": [round(s * 1000) for s in lone],
            "crowded_samples_ms": [round(s * 1000) for s in crowded]}


def show(rows: list[dict[str, object]]) -> None:
    print(f"\n{'layout':8} {'transport':9} {'memories':>9} {'candidate':9} {'op':7} {'lone ms':>8} "
          f"{'crowded ms':>11} {'ratio':>6}")
    for r in rows:
        print(f"{r['layout']:8} {r['transport']:9} {r['memories']:>9,} {r['candidate']:9} {r['op']:7} "
              f"{r['lone_ms']:>8} {r['crowded_ms']:>11} {r['ratio']:>6.2f}")


def show_layouts(rows: list[dict[str, object]]) -> None:
    """One table for `--layout both`: operation x layout x (memsync, git), the ratio to a lone memory."""
    got = {(r["transport"], r["memories"], r["layout"], r["candidate"], r["op"]): r for r in rows}
    for transport in dict.fromkeys(r["transport"] for r in rows):
        for size in dict.fromkeys(r["memories"] for r in rows):
            print(f"\n{transport}, {size:,} memories (median of the rounds' ratios to a lone memory; "
                  "median ms lone -> crowded)")
            print(f"{'op':7} {'branches memsync':>22} {'branches git':>22} {'repos memsync':>22} {'repos git':>22}")
            for op in OPS:
                cells = []
                for layout in ("branches", "repos"):
                    for candidate in ("memsync", "git"):
                        r = got.get((transport, size, layout, candidate, op))
                        cells.append("-" if r is None else
                                     f"{r['round_ratio']:.2f}x ({r['lone_ms']}->{r['crowded_ms']})")
                print(f"{op:7} " + " ".join(f"{c:>22}" for c in cells))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="20000,100000",
                        type=lambda s: [int(x) for x in s.split(",")], help="memories on a crowded hub")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--transports", default="file,git,http", type=lambda s: s.split(","))
    parser.add_argument("--baseline", help="another memsync checkout (its root) measured alongside")
    parser.add_argument("--subject", help="the memsync checkout measured (default: this one)")
    parser.add_argument("--off", action="append", default=[], metavar="SWITCH",
                        help="also measure the subject with this MEMSYNC_ switch set to 0, as a candidate "
                             "of its own (e.g. MEMSYNC_V2_FETCH); repeatable")
    parser.add_argument("--ops", default=",".join(OPS), type=lambda s: s.split(","),
                        help=f"the operations measured (default {','.join(OPS)}; git runs those it has)")
    parser.add_argument("--workdir")
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--layout", choices=("branches", "repos", "both"), default="branches",
                        help="memories as branches of one hub (default), one repository each, or both "
                             "layouts in the same rounds")
    parser.add_argument("--repos-store", choices=("standalone", "alternates", "prefixed"), default="standalone",
                        help="--layout repos: each repository keeps its objects (default), or they share a "
                             "store through alternates, as is or with core.alternateRefsPrefixes")
    parser.add_argument("--out", help="default: bench/results/fleet.json (fleet-repos.json for --layout repos, "
                                      "fleet-layouts.json for --layout both)")
    parser.add_argument("--table", metavar="RESULTS", help="print the layout table of a --layout both results file")
    args = parser.parse_args()
    if args.table:
        saved = json.loads(Path(args.table).read_text(encoding="utf-8"))["rows"]
        show_layouts([row(r["layout"], r["transport"], r["memories"], r["candidate"], r["op"],
                          [ms / 1000 for ms in r["lone_samples_ms"]], [ms / 1000 for ms in r["crowded_samples_ms"]])
                      for r in saved])
        return 0
    if args.out is None:
        name = {"branches": "fleet", "repos": "fleet-repos", "both": "fleet-layouts"}[args.layout]
        args.out = str(ROOT / "bench" / "results" / f"{name}.json")
    procs.SPAWNER.append(procs.Spawner())
    bench = Bench(args)
    try:
        started = time.perf_counter()
        bench.set_up()
        bench.setup_seconds["set-up"] = round(time.perf_counter() - started, 1)
        bench.measure()
        rows = bench.table()
    finally:
        bench.close()
        procs.SPAWNER[0].stop()
    show(rows)
    if args.layout == "both":
        show_layouts(rows)
    result = {"when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "cold": True,
              "layout": args.layout, "repos_store": args.repos_store, "files_in_memory": FILES,
              "rounds": args.rounds, "sizes": args.sizes,
              "transports": args.transports, "candidates": list(bench.candidates),
              "baseline": args.baseline, "off": args.off, "ops": args.ops, "load_average": bench.loads,
              "setup_seconds": bench.setup_seconds,
              "git": subprocess.run(["git", "--version"], capture_output=True, text=True).stdout.strip(),
              "rows": rows}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(f"\nwritten: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
