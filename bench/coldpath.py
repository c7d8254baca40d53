"""The cold path a sandbox gets (issue 24): memsync started fresh for every command, no server.

    python bench/coldpath.py                                      # this checkout: ~2 minutes on a quiet 2-core machine
    git archive main memsync | tar -x -C /tmp/before
    python bench/coldpath.py --before /tmp/before                 # and an older memsync, alternating
    python bench/coldpath.py --rounds 3 --boot-rounds 1 --versions 500   # a quick look

Candidates alternate within each round, the order rotating (other load hits all alike); every
one is a real child process timed by wall clock (procs.timed). memsync is measured as installed
(bench.installed_copy, the package in a site-packages, no editable import hook), the floor is
`python -c "import pygit2"` from that same interpreter, and git's figures are the references
bench.py uses. Prints the items, then issue 24's targets with met / NOT met; writes
bench/results/coldpath.json. See bench/README.md "The cold path (issue 24)".
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import gen  # noqa: E402
import procs  # noqa: E402
from procs import Sample  # noqa: E402

import bench  # noqa: E402
from bench import GIT_FULL_STATUS, GIT_PUSH, GIT_RUN, Results, alternate, make_env  # noqa: E402

EDIT = "echo 'booted: one line of notes' >> boot-notes.md"
GIT_BOOT = ("git clone -q --depth 1 -b {branch} {url} {dest} && cd {dest} && git pull --ff-only -q; "
            f"{EDIT}; git add -A; git commit -q -m run; git push -q")


def installed(work: Path, tag: str, src: Path | None) -> list[str]:
    """memsync laid out as installed (bench.installed_copy); `src`: another checkout's package."""
    place = work / tag
    place.mkdir(parents=True)
    cmd = bench.installed_copy(place)
    if src is not None:
        python = Path(cmd[0]).parent / "python"
        site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                   capture_output=True, text=True, check=True).stdout.strip())
        shutil.rmtree(site / "memsync")
        package = src / "memsync" if (src / "memsync" / "__init__.py").exists() else src
        shutil.copytree(package, site / "memsync", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return cmd


def tiny_memory(work: Path, cmds: dict[str, list[str]]) -> tuple[Path, dict[str, str]]:
    root = work / "tiny"
    env = make_env(work, root / "mshome")
    tree = root / "memory"
    tree.mkdir(parents=True)
    (tree / "notes.md").write_text("# Notes\n\nfirst line\n")
    (tree / "runs.md").write_text("run one\n")
    first = next(iter(cmds.values()))
    procs.run([*first, "init", "--name", "tiny"], tree, env)
    procs.run([*first, "push"], tree, env)
    return tree, env


def measure(res: Results, work: Path, cmds: dict[str, list[str]], files: int, versions: int, rounds: int,
            big_rounds: int, boot_rounds: int, say: Callable[[str], None], transports: list[str],
            warm: int) -> None:
    python = str(Path(next(iter(cmds.values()))[0]).parent / "python")
    tree, env = tiny_memory(work, cmds)
    for _ in range(2):  # warm-up: bytecode caches and page cache for every candidate
        for cmd in cmds.values():
            procs.timed([*cmd, "status"], tree, env)
    floor = ("import pygit2", lambda: procs.timed([python, "-c", "import pygit2"], tree, env))
    for verb in ("status", "push", "run -- true"):
        cands = [floor] + [(name, _ms(cmd, verb.split(), tree, env)) for name, cmd in cmds.items()]
        alternate(res, "tiny", verb, rounds, cands)
        say(f"  2 files, {verb}: {_brief(res, 'tiny', verb)}")

    say(f"{files:,} files")
    # Each memsync its own copy of the memory and its own hub: what one version leaves in the
    # repository (stat data, the list of entries to settle, caches) must not be the other's
    # starting point, as it never is for a user.
    builds = {}
    for i, name in enumerate(cmds):
        place = work / f"big-{i}"
        place.mkdir()
        bench.write_gitconfig(place)
        builds[name] = bench.build(files, place, work, ("file",), say)
    s = next(iter(builds.values()))
    git_tree = s.git["file"]
    for name, cmd in cmds.items():
        procs.timed([*cmd, "push"], builds[name].ms["file"], builds[name].env)
    procs.timed(bench.GIT_PUSH_SEQ, git_tree, s.env)
    round_no = [0]

    def edited(name: str, where: Path, action: Callable[[], Sample]) -> Callable[[], Sample]:
        def go() -> Sample:
            gen.edit(where, gen.changed_paths(files, round_no[0]), f"round {round_no[0]} {name}")
            return action()
        return go

    def set_round(r: int) -> None:
        round_no[0] = r

    def mine(name: str) -> Path:
        return builds[name].ms["file"]

    items: list[tuple[str, list[tuple[str, Callable[[], Sample]]]]] = [
        ("push 10 changed", [(n, edited(n, mine(n), _ms(c, ["push"], mine(n), builds[n].env)))
                             for n, c in cmds.items()]
         + [("git", edited("git", git_tree, lambda: procs.timed(GIT_PUSH, git_tree, s.env)))]),
        ("status", [(n, _ms(c, ["status"], mine(n), builds[n].env)) for n, c in cmds.items()]
         + [("git", lambda: procs.timed(GIT_FULL_STATUS, git_tree, s.env))]),
        ("run -- true", [(n, _ms(c, ["run", "--", "true"], mine(n), builds[n].env)) for n, c in cmds.items()]
         + [("git", lambda: procs.timed(GIT_RUN, git_tree, s.env))]),
    ]
    for item, cands in items:
        alternate(res, "big", item, big_rounds, [floor, *cands], before=set_round)
        say(f"  {item}: {_brief(res, 'big', item)}")
    for built in builds.values():
        shutil.rmtree(built.root, ignore_errors=True)

    boot_rows(res, work, cmds, files, versions, boot_rounds, transports, warm, say, floor[1], big_rounds)


def boot_rows(res: Results, work: Path, cmds: dict[str, list[str]], files: int, versions: int, rounds: int,
              transports: list[str], warm: int, say: Callable[[str], None],
              floor: Callable[[], Sample] | None = None, log_rounds: int = 0) -> None:
    """The sandbox boot as a sandbox meets it: a hub that has served clones before (`warm`
    untimed boots of every candidate first: the server's page cache and pack reuse are warm for
    all alike), then `rounds` rounds, the candidates' order rotating, over each transport."""
    if rounds <= 0 and floor is None:
        return
    say(f"sandbox boot: {versions:,} versions of {files:,} files over {', '.join(transports)}")
    h = bench.build_history(work, files, versions, ("file", "daemon"), say)
    if floor is not None:
        cold_log(res, h, cmds, floor, log_rounds, say)
    http = _http_hubs(work, h) if "http" in transports else None
    dest = h.root / "boot"
    try:
        for transport in transports if rounds > 0 else []:
            ms_url, git_url, env = _boot_urls(h, transport, http)
            cands = [(n, _boot(c, ms_url, dest, h.root, env)) for n, c in cmds.items()]
            line = GIT_BOOT.format(branch=bench.HIST_BRANCH, url=git_url, dest=dest)
            cands.append(("git", lambda line=line: procs.timed(line, h.root, h.env)))  # type: ignore[misc]
            for _ in range(warm):
                for _name, action in cands:
                    action()
                    shutil.rmtree(dest, ignore_errors=True)
            item = f"sandbox boot ({transport})"
            alternate(res, "boot", item, rounds, cands, after=lambda _n: shutil.rmtree(dest, ignore_errors=True))
            say(f"  {item}: {_brief(res, 'boot', item)}")
            # the brief's story 1 as written: one `memsync run --memory NAME:PATH`, which clones
            ones = [(n, _boot_one_run(c, ms_url, dest, h.root, env)) for n, c in cmds.items()] + [cands[-1]]
            for _ in range(warm):
                for _name, action in ones[:-1]:
                    action()
                    shutil.rmtree(dest, ignore_errors=True)
            item = f"sandbox boot, one run ({transport})"
            alternate(res, "boot", item, rounds, ones, after=lambda _n: shutil.rmtree(dest, ignore_errors=True))
            say(f"  {item}: {_brief(res, 'boot', item)}")
    finally:
        if http is not None:
            http.stop()
    shutil.rmtree(h.root, ignore_errors=True)


def _boot(cmd: list[str], url: str, dest: Path, cwd: Path, env: dict[str, str]) -> Callable[[], Sample]:
    line = (f"{_sh(cmd)} clone {bench.HIST_NAME} {dest} --remote {url} >/dev/null && cd {dest} && "
            f"{_sh(cmd)} run -- sh -c \"{EDIT}\"")
    return lambda: procs.timed(line, cwd, env)


def _boot_one_run(cmd: list[str], url: str, dest: Path, cwd: Path, env: dict[str, str]) -> Callable[[], Sample]:
    """The sandbox loop as the brief writes it: `memsync run --memory NAME:PATH` in a fresh
    sandbox clones the memory, runs the command (the same edit, in the memory) and pushes."""
    url = url.replace(f"//{HTTP_USER}@", "//")  # MEMSYNC_USER names the user (an older run refuses a name here)
    line = (f"{_sh(cmd)} run --memory {bench.HIST_NAME}:{dest} --remote {url} -- "
            f"sh -c \"cd {dest} && {EDIT}\"")
    return lambda: procs.timed(line, cwd, env)


HTTP_USER, HTTP_TOKEN = "bench", "bench-boot-token"


def _http_hubs(work: Path, h: bench.History) -> Any:
    """Smart HTTP (`git http-backend`, tests/helpers/servers.py) over the history's two hubs."""
    sys.path.insert(0, str(HERE.parent))
    from tests.helpers.servers import HttpGitServer

    for hub in (Path(h.env["MEMSYNC_HOME"]) / "hub.git", Path(h.git_url["file"].removeprefix("file://"))):
        procs.run(["git", "config", "http.receivepack", "true"], hub, h.env)
    server = HttpGitServer(work, user=HTTP_USER, token=HTTP_TOKEN)
    server.start()
    return server


def _boot_urls(h: bench.History, transport: str, http: Any) -> tuple[str, str, dict[str, str]]:
    """(memsync's --remote, git's URL, memsync's environment) of the history's hubs over `transport`."""
    if transport == "git":
        ms_url = h.ms_url["daemon"]
        assert ms_url is not None
        return ms_url, h.git_url["daemon"], h.env
    assert transport == "http" and http is not None
    base = f"127.0.0.1:{http.port}"
    ms_hub = (Path(h.env["MEMSYNC_HOME"]) / "hub.git").relative_to(http.project_root)
    git_hub = Path(h.git_url["file"].removeprefix("file://")).relative_to(http.project_root)
    return (f"http://{HTTP_USER}@{base}/{ms_hub}", f"http://{HTTP_USER}:{HTTP_TOKEN}@{base}/{git_hub}",
            {**h.env, "MEMSYNC_TOKEN": HTTP_TOKEN, "MEMSYNC_USER": HTTP_USER})


def cold_log(res: Results, h: bench.History, cmds: dict[str, list[str]], floor: Callable[[], Sample],
             rounds: int, say: Callable[[str], None]) -> None:
    """`log -n 20` in a clone of the long history, cold: a new process, and no kept summaries
    (history/summaries.py's cache is removed before each memsync run, outside its time)."""
    kept = Path(h.env["MEMSYNC_HOME"]) / "cache" / "versions.db"

    def cold(cmd: list[str]) -> Callable[[], Sample]:
        def go() -> Sample:
            kept.unlink(missing_ok=True)
            return procs.timed([*cmd, "log", "-n", "20"], h.ms_log, h.env)
        return go

    cands = [("import pygit2", floor)] + [(name, cold(cmd)) for name, cmd in cmds.items()]
    cands.append(("git", lambda: procs.timed(bench.GIT_LOG, h.git_log, h.env)))
    alternate(res, "history", "log -n 20", rounds, cands)
    say(f"  cold log -n 20: {_brief(res, 'history', 'log -n 20')}")


def _ms(cmd: list[str], args: list[str], cwd: Path, env: dict[str, str]) -> Callable[[], Sample]:
    return lambda: procs.timed([*cmd, *args], cwd, env)


def _sh(cmd: list[str]) -> str:
    import shlex

    return shlex.join(cmd)


def _brief(res: Results, scope: str, item: str) -> str:
    found = res.timings.get(scope, {}).get(item, {})
    return ", ".join(f"{name} {series.median * 1000:.0f} ms" for name, series in found.items())


# -- issue 24's targets ---------------------------------------------------------------------------
TARGETS: list[tuple[str, str, str, str]] = [
    # (label, scope, item, formula)  formula: "floor*1.3" | "git*1.6" | "floor+git*1.5" | "report"
    ("status, 2 files", "tiny", "status", "floor*1.3"),
    ("no-change push, 2 files", "tiny", "push", "floor*1.3"),
    ("push 10 changed, {files} files", "big", "push 10 changed", "git*1.6"),
    ("status, {files} files", "big", "status", "floor+git*1.5"),
    ("run -- true, {files} files", "big", "run -- true", "floor+git*1.5"),
    ("run -- true, 2 files", "tiny", "run -- true", "report-floor"),
    ("cold log -n 20, long history", "history", "log -n 20", "floor+git*1.5"),
    ("sandbox boot (clone + run + push, git://)", "boot", "sandbox boot (git)", "git*1.0"),
    ("sandbox boot (clone + run + push, HTTP)", "boot", "sandbox boot (http)", "git*1.0"),
    ("sandbox boot (one run --memory: clone + run + push, git://)", "boot", "sandbox boot, one run (git)", "git*1.0"),
    ("sandbox boot (one run --memory: clone + run + push, HTTP)", "boot", "sandbox boot, one run (http)", "git*1.0"),
]
SHOWN = {"floor*1.3": "<= 1.3x import pygit2", "git*1.6": "<= 1.6x git",
         "git*1.0": "<= git clone --depth 1 + script", "floor+git*1.5": "<= floor + 1.5x git",
         "report": "(reported: vs git clone --depth 1 + script)", "report-floor": "(reported: vs import pygit2)"}


def target_rows(res: Results, names: list[str], files: int) -> list[dict[str, Any]]:
    rows = []
    for label, scope, item, formula in TARGETS:
        found = res.timings.get(scope, {}).get(item, {})
        floor = found["import pygit2"].median if "import pygit2" in found else None
        git = found["git"].median if "git" in found else None
        limit = {"floor*1.3": floor * 1.3 if floor else None,
                 "git*1.6": git * 1.6 if git else None,
                 "git*1.0": git,
                 "floor+git*1.5": floor + 1.5 * git if floor and git else None}.get(formula)
        row: dict[str, Any] = {"target": label.format(files=f"{files:,}"), "formula": SHOWN[formula],
                               "limit_ms": _ms_of(limit), "floor_ms": _ms_of(floor), "git_ms": _ms_of(git)}
        for name in names:
            value = found[name].median if name in found else None
            base = floor if formula in ("floor*1.3", "report-floor") else git
            row[name] = {"ms": _ms_of(value), "ratio": round(value / base, 2) if value and base else None,
                         "met": None if limit is None or value is None else value <= limit}
        rows.append(row)
    return rows


def _ms_of(seconds: float | None) -> float | None:
    return round(seconds * 1000, 1) if seconds is not None else None


def targets_table(rows: list[dict[str, Any]], names: list[str]) -> str:
    head = ["target", "formula", "limit ms", *[f"{n} ms (ratio)" for n in names], "verdict"]
    body = []
    for r in rows:
        cells = [r["target"], r["formula"], _num(r["limit_ms"])]
        for n in names:
            cells.append(f"{_num(r[n]['ms'])} ({r[n]['ratio']}x)" if r[n]["ms"] is not None else "-")
        met = r["memsync"]["met"]
        cells.append("-" if met is None else "met" if met else "NOT met")
        body.append(cells)
    widths = [max(len(str(c)) for c in col) for col in zip(head, *body, strict=True)]
    lines = ["| " + " | ".join(str(c).ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"
             for cells in [head, ["-" * w for w in widths], *body]]
    return "\n".join(lines)


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


def items_table(res: Results) -> str:
    lines = ["| scope | item | candidate | median ms | +- ms | rounds |", "|---|---|---|---|---|---|"]
    for scope, items in res.timings.items():
        for item, found in items.items():
            for name, series in found.items():
                times = [x.seconds for x in series.samples]
                half = (max(times) - min(times)) / 2 * 1000
                lines.append(f"| {scope} | {item} | {name} | {statistics.median(times) * 1000:.0f} | {half:.0f} | "
                             f"{len(times)} |")
    return "\n".join(lines)


README = HERE.parent / "docs" / "PERFORMANCE.md"
START, END = "<!-- coldpath:start -->", "<!-- coldpath:end -->"


def readme(results: Path) -> int:
    """docs/PERFORMANCE.md's cold-path section from a results file (runs nothing)."""
    doc = json.loads(results.read_text(encoding="utf-8"))
    names = list(doc["candidates"])
    before = "memsync before" in names
    head = "| target | at | limit | memsync | " + ("before | " if before else "") + "verdict |"
    lines = [head, "|---|---|---:|---:|" + ("---:|" if before else "") + "---|"]
    for r in doc["targets"]:
        shown = [f"{r['memsync']['ms']:.0f} ms ({r['memsync']['ratio']}x)" if r["memsync"]["ms"] else "-"]
        if before:
            b = r["memsync before"]
            shown.append(f"{b['ms']:.0f} ms ({b['ratio']}x)" if b["ms"] else "-")
        met = r["memsync"]["met"]
        limit = "-" if r["limit_ms"] is None else f"{r['limit_ms']:.0f} ms"
        lines.append(f"| {r['target']} | {r['formula']} | {limit} | {' | '.join(shown)} | "
                     f"{'-' if met is None else 'met' if met else 'NOT met'} |")
    m = doc["machine"]
    block = "\n".join([
        START,
        "Cold (a new Python per command, no server), medians of alternating rounds; ratios to `python -c",
        '"import pygit2"` (the floor) for the 2-file rows, to the git CLI for the others.' +
        ("\n`before`: the code given as `--before` (the text above says which), in the same rounds." if before
         else ""),
        "",
        *lines,
        "",
        f"Machine: {m['cpus']} CPUs, Python {m['python']}, {m['git']}; run of {doc['when']} "
        f"(`bench/coldpath.py {' '.join(doc['argv'])}`, {doc['elapsed_s']:.0f} s).",
        "Regenerated from `bench/results/coldpath.json` by `python bench/coldpath.py --readme`.",
        END,
    ])
    text = README.read_text(encoding="utf-8")
    if START in text:
        text = text[:text.index(START)] + block + text[text.index(END) + len(END):]
    else:
        text = text.rstrip("\n") + "\n\n## The cold path a sandbox gets\n\n" + block + "\n"
    README.write_text(text, encoding="utf-8")
    print(f"rewrote the cold-path section of {README}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", type=Path, help="another checkout (or its memsync/ package) measured too")
    parser.add_argument("--rounds", type=int, default=9, help="rounds of the 2-file items (default 9)")
    parser.add_argument("--big-rounds", type=int, default=5, help="rounds at --files (default 5)")
    parser.add_argument("--boot-rounds", type=int, default=7, help="rounds of the sandbox boot (default 7)")
    parser.add_argument("--boot-warm", type=int, default=2,
                        help="untimed boots of every candidate before the timed ones (default 2)")
    parser.add_argument("--boot-transports", default="git,http", help="comma-separated: git, http (default both)")
    parser.add_argument("--boot-only", action="store_true", help="measure the sandbox boot alone")
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--versions", type=int, default=5_000)
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--out", type=Path, default=HERE / "results" / "coldpath.json")
    parser.add_argument("--readme", action="store_true",
                        help="runs nothing: docs/PERFORMANCE.md's cold-path section from --out")
    args = parser.parse_args(argv)
    if args.readme:
        return readme(args.out)
    started = time.perf_counter()

    def say(msg: str) -> None:
        print(f"[{time.perf_counter() - started:6.1f}s] {msg}", flush=True)

    procs.SPAWNER.append(procs.Spawner())
    work = bench.fresh_workdir(args.workdir, "coldpath")
    cmds = {"memsync": installed(work, "after", None)}
    if args.before is not None:
        cmds["memsync before"] = installed(work, "before", args.before.resolve())
    bench.MEMSYNC[:] = cmds["memsync"]
    bench.DAEMON.append(procs.GitDaemon(work, make_env(work, work / "mshome-daemon")))
    res = Results()
    try:
        transports = [t.strip() for t in args.boot_transports.split(",") if t.strip()]
        if args.boot_only:
            boot_rows(res, work, cmds, args.files, args.versions, args.boot_rounds, transports, args.boot_warm, say)
        else:
            say("2 files")
            measure(res, work, cmds, args.files, args.versions, args.rounds, args.big_rounds, args.boot_rounds, say,
                    transports, args.boot_warm)
    finally:
        for d in bench.DAEMON:
            d.stop()
        procs.SPAWNER.pop().stop()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    names = list(cmds)
    rows = target_rows(res, names, args.files)
    items = items_table(res)
    goals = targets_table(rows, names)
    print(f"\n{items}\n\n{goals}\n")
    elapsed = time.perf_counter() - started
    print(f"cold: a new process per command; medians of alternating rounds. Total {elapsed:.0f}s.")
    doc = {"when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "argv": sys.argv[1:] if argv is None else argv,
           "elapsed_s": round(elapsed, 1), "files": args.files, "versions": args.versions,
           "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0],
                       "git": procs.run(["git", "--version"], Path.cwd(), dict(os.environ)).strip()},
           "candidates": {n: " ".join(c) for n, c in cmds.items()},
           "timings": {scope: {item: {c: s.as_json() for c, s in found.items()} for item, found in items_.items()}
                       for scope, items_ in res.timings.items()},
           "targets": rows, "items_table": items.splitlines(), "targets_table": goals.splitlines()}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    print(f"results: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
