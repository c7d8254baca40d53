"""memsync against the git CLI and a tar.gz snapshot upload, in one run; see bench/README.md.

    python bench/bench.py                     # 1k, 10k, 100k files + a 5,000-version history (~11 min, 2 cores)
    python bench/bench.py --quick             # smoke run: 1k files, 2 rounds, a 200-version history
    python bench/bench.py --sizes 10000 --rounds 7
    python bench/bench.py --readme            # rewrite docs/PERFORMANCE.md's table from bench/results/latest.json

Every candidate is a real child process (the `memsync` console script, `git`, `tar`), timed by
wall clock, its peak RSS read from wait4(). Candidates alternate within each round (the order
rotates), medians and spreads are printed as one table with ratios to the git CLI, and the raw
samples are written to bench/results/ (latest.json plus a timestamped copy).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import gen  # noqa: E402
import procs  # noqa: E402
import targets  # noqa: E402
from procs import Sample  # noqa: E402

SIZES = (1_000, 10_000, 100_000)
ROUNDS = {1_000: 3, 10_000: 5, 100_000: 3}
CLONE_ROUNDS = {1_000: 2, 10_000: 2, 100_000: 1}
ALL_ITEMS_MAX = 10_000  # larger: push, no-change push, clone, no snapshot baseline (--all-items: everything)
HISTORY_FILES = 10_000
HISTORY_VERSIONS = 5_000
HISTORY_ROUNDS = 5  # log -n 20
HISTORY_CLONE_ROUNDS = 2
STARTUP_ROUNDS = 15
LIST_MEMORIES = 100
MB = 1024 * 1024

GIT_PUSH = "git add -A && git commit -q -m update && git push -q"
GIT_PUSH_SEQ = "git add -A; git commit -q -m update; git push -q"  # runs on when nothing to commit
GIT_RUN = "git pull --ff-only -q; true; git add -A; git commit -q -m run; git push -q"
GIT_STATUS = "git status --porcelain"
GIT_FULL_STATUS = "git fetch -q && git status --porcelain -b"
GIT_LOG = "git log -n 20 --stat"


# -- results ------------------------------------------------------------------------------------
@dataclass
class Series:
    samples: list[Sample] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(s.seconds for s in self.samples)

    @property
    def spread(self) -> float:
        """Half the range (max-min)/2, as a +- figure next to the median."""
        values = [s.seconds for s in self.samples]
        return (max(values) - min(values)) / 2

    @property
    def rss_mb(self) -> float:
        return max(s.rss_kb for s in self.samples) / 1024

    def as_json(self) -> dict[str, object]:
        return {"median_s": round(self.median, 4), "spread_s": round(self.spread, 4),
                "min_s": round(min(s.seconds for s in self.samples), 4),
                "max_s": round(max(s.seconds for s in self.samples), 4),
                "samples_s": [round(s.seconds, 4) for s in self.samples],
                "peak_rss_mb": round(self.rss_mb, 1)}


@dataclass
class Results:
    timings: dict[str, dict[str, dict[str, Series]]] = field(default_factory=dict)
    figures: dict[str, object] = field(default_factory=dict)

    def add(self, scope: str, item: str, candidate: str, sample: Sample) -> None:
        by_item = self.timings.setdefault(scope, {}).setdefault(item, {})
        by_item.setdefault(candidate, Series()).samples.append(sample)

    def get(self, scope: str, item: str, candidate: str) -> Series | None:
        return self.timings.get(scope, {}).get(item, {}).get(candidate)

    def median(self, scope: str, item: str, candidate: str) -> float | None:
        series = self.get(scope, item, candidate)
        return series.median if series and series.samples else None


def alternate(res: Results, scope: str, item: str, rounds: int,
              candidates: list[tuple[str, Callable[[], Sample]]],
              before: Callable[[int], None] | None = None,
              after: Callable[[str], None] | None = None) -> None:
    """Every candidate once per round, the order rotating from round to round."""
    for r in range(rounds):
        if before is not None:
            before(r)
        shift = r % len(candidates)
        for name, action in candidates[shift:] + candidates[:shift]:
            res.add(scope, item, name, action())
            if after is not None:
                after(name)


# -- environment ----------------------------------------------------------------------------------
def memsync_cmd() -> list[str]:
    script = Path(sys.executable).parent / "memsync"
    return [str(script)] if script.exists() else [sys.executable, "-m", "memsync"]


def installed_copy(work: Path) -> list[str]:
    """memsync laid out as `pip install memsync` leaves it (the package in a site-packages, the
    console script next to the interpreter), not as the editable development install, whose
    import hook costs every start ~15-20 ms (pathlib, fnmatch, re) that users never pay. The
    dependencies come from this interpreter's environment (a path line, so none of its .pth
    hooks run)."""
    import sysconfig
    import venv

    target = work / "installed"
    venv.EnvBuilder(with_pip=False, symlinks=True).create(target)
    python = target / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    shutil.copytree(HERE.parent / "memsync", site / "memsync",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    (site / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    script = target / "bin" / "memsync"
    script.write_text(f"#!{python}\nimport sys\nfrom memsync.entry import main\n"
                      "if __name__ == '__main__':\n    sys.exit(main())\n")
    script.chmod(0o755)
    return [str(script)]


def make_env(work: Path, home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("MEMSYNC_", "GIT_")) and k != "PYTHONDONTWRITEBYTECODE"}
    user_home = work / "home"
    env.update({
        "HOME": str(user_home), "XDG_CONFIG_HOME": str(user_home / ".config"),
        "XDG_DATA_HOME": str(user_home / ".local/share"), "MEMSYNC_HOME": str(home),
        "GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C",
        # bytecode caches as an installed memsync has them, kept out of the source tree
        "PYTHONPYCACHEPREFIX": str(work / "pycache"),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    })
    return env


def fresh_workdir(given: Path | None, name: str) -> Path:
    """An empty working folder (`given`, emptied, or one in TMPDIR) with the bench's git config."""
    work = (given or Path(os.environ.get("TMPDIR", "/tmp")) / f"memsync-{name}-{os.getpid()}").resolve()
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    write_gitconfig(work)
    return work


def write_gitconfig(work: Path) -> None:
    home = work / "home"
    home.mkdir(parents=True, exist_ok=True)
    # gc.auto=0: no auto-gc in the middle of a timed git command (it only favours git).
    (home / ".gitconfig").write_text(
        "[user]\n\tname = Bench Operator\n\temail = bench@example.invalid\n"
        "[init]\n\tdefaultBranch = main\n[gc]\n\tauto = 0\n[advice]\n\tdetachedHead = false\n",
        encoding="utf-8")


# -- the resident server (memsync serve), when this memsync has one --------------------------------
SERVE: list[bool] = [False]  # [0]: `memsync serve --help` exits 0
SERVERS: list[procs.MemsyncServer] = []
NOTES: list[str] = []


def start_server(work: Path, tag: str, env: dict[str, str], cwd: Path,
                 say: Callable[[str], None]) -> procs.MemsyncServer | None:
    """One `memsync serve` for the MEMSYNC_HOME of `env`, ready to accept; None without serve."""
    if not SERVE[0]:
        return None
    sock = work / f"{tag}.sock"
    if len(os.fsencode(sock)) > 100:  # AF_UNIX paths are limited to 107 bytes
        sock = Path(tempfile.mkdtemp(prefix="msb-", dir="/tmp")) / f"{tag}.sock"
    try:
        server = procs.MemsyncServer(MEMSYNC, sock, env, cwd, work / f"serve-{tag}.log")
    except procs.BenchError as exc:
        note = f"memsync serve for {tag} did not start, its served candidates are left out: {exc}"
        NOTES.append(note)
        say(f"  {note}")
        return None
    SERVERS.append(server)
    return server


def stop_server(res: Results, tag: str, server: procs.MemsyncServer | None) -> None:
    if server is None:
        return
    code = server.stop()
    SERVERS.remove(server)
    servers = res.figures.setdefault("servers", {})
    assert isinstance(servers, dict)
    servers[tag] = {"socket": str(server.sock), "exit_code": code}
    if server.sock.parent.name.startswith("msb-"):
        shutil.rmtree(server.sock.parent, ignore_errors=True)


def variants(server: procs.MemsyncServer | None) -> list[tuple[str, procs.MemsyncServer | None]]:
    """memsync cold (a fresh process does the work) and, with a server, served (MEMSYNC_SERVER)."""
    return [("memsync", None)] + ([("memsync served", server)] if server is not None else [])


def ms_action(argv: list[str], cwd: Path, env: dict[str, str],
              server: procs.MemsyncServer | None) -> Callable[[], Sample]:
    return lambda: ms_timed(argv, cwd, env, server)


def ms_timed(argv: list[str], cwd: Path, env: dict[str, str], server: procs.MemsyncServer | None) -> Sample:
    """A memsync command, cold or through the server. Served, the peak RSS recorded is the larger
    of the client's and the server's peak (VmHWM) during the command; the forked worker that does
    the work is not among them, so served RSS figures are not used to judge memory targets."""
    if server is None:
        return procs.timed(argv, cwd, env)
    server.reset_peak()
    sample = procs.timed(argv, cwd, server.env(env))
    return Sample(sample.seconds, max(sample.rss_kb, server.peak_kb()))


# -- one memory size --------------------------------------------------------------------------
@dataclass
class Setup:
    size: int
    root: Path
    env: dict[str, str]
    hub: Path  # the embedded hub (bare) of this size's MEMSYNC_HOME
    daemon: procs.GitDaemon
    ms: dict[str, Path]  # transport -> memsync work tree
    git: dict[str, Path]  # transport -> git CLI work tree
    git_hub: dict[str, Path]  # transport -> bare repo of the git CLI candidate
    git_url: dict[str, str]
    ms_url: dict[str, str | None]
    snap: Path
    snap_hub: Path
    data_bytes: int
    server: procs.MemsyncServer | None = None

    def ms_name(self, transport: str) -> str:
        return f"bench-{transport}"


TRANSPORTS = ("file", "daemon")
LABEL = {"file": "file", "daemon": "git://"}


def build(size: int, work: Path, daemon_base: Path, transports: tuple[str, ...],
          say: Callable[[str], None]) -> Setup:
    root = work / f"n{size}"
    home = root / "mshome"
    env = make_env(work, home)
    src = root / "src"
    src.mkdir(parents=True)
    t0 = time.perf_counter()
    data_bytes = gen.generate(src, size)
    say(f"  generated {size} files ({data_bytes / MB:.1f} MB) in {time.perf_counter() - t0:.1f}s")
    procs.run("git init -q -b main && git add -A && git commit -q -m seed && git repack -adq --window=0",
              src, env)
    hub = home / "hub.git"
    procs.run(["git", "init", "-q", "--bare", str(hub)], root, env)
    daemon = DAEMON[0]
    git_hub: dict[str, Path] = {}
    git_url: dict[str, str] = {}
    ms_url: dict[str, str | None] = {}
    ms: dict[str, Path] = {}
    git: dict[str, Path] = {}
    procs.run(["git", "push", "-q", str(hub), "main:refs/heads/seed"], src, env)
    for t in transports:
        bare = root / f"git-{t}.git"
        procs.run(["git", "init", "-q", "--bare", str(bare)], root, env)
        procs.run(["git", "push", "-q", str(bare), "main:refs/heads/seed"], src, env)
        git_hub[t] = bare
        git_url[t] = f"file://{bare}" if t == "file" else daemon.url(bare)
        ms_url[t] = None if t == "file" else daemon.url(hub)
        tree = root / f"git-{t}"
        shutil.copytree(src, tree, symlinks=True)
        procs.run(f"git branch -q -m {t} && git remote add origin {git_url[t]} && git push -q -u origin {t} "
                  f"&& git status --porcelain", tree, env)
        git[t] = tree
        mtree = root / f"ms-{t}"
        shutil.copytree(src, mtree, symlinks=True)
        url = ms_url[t]
        remote = ["--remote", url] if url else []
        procs.run([*MEMSYNC, "init", "--name", f"bench-{t}", *remote], mtree, env)
        procs.run([*MEMSYNC, "push"], mtree, env)
        ms[t] = mtree
    snap = root / "snap"
    shutil.copytree(src, snap, symlinks=True, ignore=shutil.ignore_patterns(".git"))
    snap_hub = root / "snapshot-hub"
    snap_hub.mkdir()
    shutil.rmtree(src)
    say(f"  set up in {time.perf_counter() - t0:.1f}s")
    return Setup(size, root, env, hub, daemon, ms, git, git_hub, git_url, ms_url, snap, snap_hub, data_bytes)


MEMSYNC: list[str] = []
DAEMON: list[procs.GitDaemon] = []


def remote_writer(hubs: list[tuple[Path, str]], tag: str, paths: list[str]) -> None:
    """Another machine pushes 10 edited files: commits made directly in the hubs (pygit2)."""
    import pygit2
    from pygit2.enums import FileMode

    sig = pygit2.Signature("Other Writer", "other@example.invalid")
    for repo_path, ref in hubs:
        repo = pygit2.Repository(str(repo_path))
        tip = repo.references[ref].peel(pygit2.Commit)
        index = pygit2.Index()
        index.read_tree(tip.tree)
        for path in paths:
            old = repo[tip.tree[path].id].peel(pygit2.Blob).data
            blob = repo.create_blob(old + f"- remote {tag}: learned elsewhere about {path}\n".encode())
            index.add(pygit2.IndexEntry(path, blob, FileMode.BLOB))
        tree = index.write_tree(repo)
        repo.create_commit(ref, sig, sig, f"Remote edit {tag}\n", tree, [tip.id])


def touch_all(tree: Path) -> None:
    """What `cp -r` of the same files over a memory does to git's stat cache: new mtimes."""
    stamp = time.time() - 5
    for dirpath, dirnames, filenames in os.walk(tree):
        if ".git" in dirnames:
            dirnames.remove(".git")
        if ".vm0" in dirnames:
            dirnames.remove(".vm0")
        for name in filenames:
            os.utime(os.path.join(dirpath, name), (stamp, stamp))


def bench_size(res: Results, s: Setup, rounds: int, clone_rounds: int, all_items: bool,
               say: Callable[[str], None]) -> None:
    scope = str(s.size)
    env = s.env
    round_no = [0]

    def set_round(r: int) -> None:
        round_no[0] = r

    def ms(t: str, server: procs.MemsyncServer | None, *args: str) -> Callable[[], Sample]:
        return lambda: ms_timed([*MEMSYNC, *args], s.ms[t], env, server)

    def ms_cands(*args: str) -> list[tuple[str, Callable[[], Sample]]]:
        return [(f"{name} {LABEL[t]}", ms(t, server, *args)) for t in s.ms for name, server in variants(s.server)]

    def sh(line: str, cwd: Path) -> Callable[[], Sample]:
        return lambda: procs.timed(line, cwd, env)

    # warm-up: one untimed no-change round of each, so caches are equally warm
    for t in s.ms:
        for _name, server in variants(s.server):
            ms_timed([*MEMSYNC, "push"], s.ms[t], env, server)
        procs.timed(GIT_PUSH_SEQ, s.git[t], env)

    # 1. push after changing 10 files: each candidate edits its own 10 files just before it runs
    # (untimed), so cold and served memsync, sharing one work tree, both push 10 changed files.
    def edited(name: str, tree: Path, action: Callable[[], Sample]) -> Callable[[], Sample]:
        def go() -> Sample:
            gen.edit(tree, gen.changed_paths(s.size, round_no[0]), f"round {round_no[0]} {name}")
            return action()
        return go

    def snapshot_upload() -> Sample:
        for old in s.snap_hub.glob("*.tar.gz"):
            old.unlink()
        return procs.timed(f"tar -czf {s.snap_hub}/snapshot-{time.time_ns()}.tar.gz -C {s.snap} .", s.root, env)

    cands = [(f"{name} {LABEL[t]}", edited(name, s.ms[t], ms(t, server, "push")))
             for t in s.ms for name, server in variants(s.server)]
    cands += [(f"git {LABEL[t]}", edited("git", s.git[t], sh(GIT_PUSH, s.git[t]))) for t in s.git]
    if all_items:  # the snapshot baseline costs ~70 s at 100k, not an issue 14 item
        cands += [("snapshot", edited("snapshot", s.snap, snapshot_upload))]
    alternate(res, scope, "push 10 changed", rounds, cands, before=set_round)
    say(f"  push 10 changed: done ({_brief(res, scope, 'push 10 changed')})")

    # 2. push with nothing changed: against git's add/commit/push, `git fetch && git status` (what
    # a no-change push must find out: is there anything to send or to take) and the scan floor
    cands = ms_cands("push")
    cands += [(f"git {LABEL[t]}", sh(GIT_PUSH_SEQ, s.git[t])) for t in s.git]
    cands += [(f"git fetch+status {LABEL[t]}", sh(GIT_FULL_STATUS, s.git[t])) for t in s.git]
    cands += [("git status", sh(GIT_STATUS, s.git["file"]))]
    alternate(res, scope, "push, no change", rounds, cands)
    say(f"  push, no change: done ({_brief(res, scope, 'push, no change')})")

    if all_items:
        # 3. run -- true
        cands = ms_cands("run", "--", "true")
        cands += [(f"git {LABEL[t]}", sh(GIT_RUN, s.git[t])) for t in s.git]
        alternate(res, scope, "run -- true", rounds, cands)
        say(f"  run -- true: done ({_brief(res, scope, 'run -- true')})")

        # 5. pull of 10 files another machine changed: a new remote commit just before each
        # candidate (untimed), so cold and served memsync each pull 10 files
        def remote_edited(name: str, target: tuple[Path, str], action: Callable[[], Sample]) -> Callable[[], Sample]:
            def go() -> Sample:
                remote_writer([target], f"round {round_no[0]} {name}", gen.changed_paths(s.size, 1000 + round_no[0]))
                return action()
            return go

        cands = [(f"{name} {LABEL[t]}",
                  remote_edited(name, (s.hub, f"refs/heads/memory/{s.ms_name(t)}"), ms(t, server, "pull")))
                 for t in s.ms for name, server in variants(s.server)]
        cands += [(f"git {LABEL[t]}", remote_edited("git", (s.git_hub[t], f"refs/heads/{t}"),
                                                    sh("git pull --ff-only -q", s.git[t]))) for t in s.git]
        alternate(res, scope, "pull 10 changed", rounds, cands, before=set_round)
        say(f"  pull 10 changed: done ({_brief(res, scope, 'pull 10 changed')})")

        # 6. status (the hub also holds other memories in the list benchmark; here: this memory)
        cands = ms_cands("status")
        cands += [(f"git {LABEL[t]}", sh(GIT_FULL_STATUS, s.git[t])) for t in s.git]
        cands += [("git status", sh(GIT_STATUS, s.git["file"]))]
        alternate(res, scope, "status", rounds, cands)
        say(f"  status: done ({_brief(res, scope, 'status')})")

        # stale stat cache: files copied in again with new mtimes; the 2nd status must be fast again
        stale_rounds = max(2, rounds - 1)
        for r in range(stale_rounds):
            touch_all(s.ms["file"])
            touch_all(s.git["file"])
            order: list[tuple[str, Path, list[str] | str]] = [
                ("memsync", s.ms["file"], [*MEMSYNC, "status"]), ("git", s.git["file"], GIT_STATUS)]
            for who, tree, cmd in order[r % 2:] + order[:r % 2]:
                res.add(scope, "status after copy-in", f"{who} 1st", procs.timed(cmd, tree, env))
                res.add(scope, "status after copy-in", f"{who} 2nd", procs.timed(cmd, tree, env))
        say(f"  status after copy-in: done ({_brief(res, scope, 'status after copy-in')})")

    # 4. clone (last: it only reads the hubs)
    dest = s.root / "clone-dest"
    cleanup, cands = memsync_clones(s.root, dest, {t: (s.ms_name(t), s.ms_url[t]) for t in s.ms}, env, s.server)

    def snapshot_extract() -> Sample:
        tarball = next(s.snap_hub.glob("*.tar.gz"))
        return procs.timed(f"mkdir {dest} && tar -xzf {tarball} -C {dest}", s.root, env)

    cands += [(f"git {LABEL[t]}", sh(f"git clone -q -b {t} {s.git_url[t]} {dest}", s.root)) for t in s.git]
    if all_items:
        cands += [("snapshot", snapshot_extract)]
    alternate(res, scope, "clone", clone_rounds, cands, after=cleanup)
    say(f"  clone: done ({_brief(res, scope, 'clone')})")


# -- a long history: log and clone at 5,000 versions ------------------------------------------------
HIST_NAME = "bench-hist"
HIST_BRANCH = "hist"


@dataclass
class History:
    files: int
    versions: int
    root: Path
    env: dict[str, str]
    git_url: dict[str, str]  # transport -> the git twin's hub
    ms_url: dict[str, str | None]  # transport -> memsync's --remote (None: the embedded hub)
    ms_log: Path  # a memsync clone, for log
    git_log: Path  # a full git clone, for log
    server: procs.MemsyncServer | None = None


def build_history(work: Path, files: int, versions: int, transports: tuple[str, ...],
                  say: Callable[[str], None]) -> History:
    """`versions` commits of a `files`-file memory made by `git fast-import` (gen.history_stream,
    deterministic), pushed to the embedded hub as memory bench-hist and to a bare repo for git."""
    root = work / "hist"
    home = root / "mshome"
    env = make_env(work, home)
    root.mkdir(parents=True)
    t0 = time.perf_counter()
    src = root / "src.git"
    procs.run(["git", "init", "-q", "--bare", str(src)], root, env)
    importer = subprocess.Popen(["git", "fast-import", "--quiet"], cwd=src, env=env, stdin=subprocess.PIPE,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert importer.stdin is not None
    for chunk in gen.history_stream(files, versions):
        importer.stdin.write(chunk)
    _, err = importer.communicate()
    if importer.returncode != 0:
        raise procs.BenchError(f"git fast-import exited {importer.returncode}: {err.decode(errors='replace')}")
    procs.run(["git", "repack", "-adq"], src, env)
    hub = home / "hub.git"
    git_hub = root / "git-hist.git"
    for bare, ref in ((hub, f"refs/heads/memory/{HIST_NAME}"), (git_hub, f"refs/heads/{HIST_BRANCH}")):
        procs.run(["git", "init", "-q", "--bare", str(bare)], root, env)
        procs.run(["git", "push", "-q", str(bare), f"main:{ref}"], src, env)
    shutil.rmtree(src)
    daemon = DAEMON[0]
    git_url = {t: f"file://{git_hub}" if t == "file" else daemon.url(git_hub) for t in transports}
    ms_url = {t: None if t == "file" else daemon.url(hub) for t in transports}
    ms_log, git_log = root / "ms-log", root / "git-log"
    procs.run([*MEMSYNC, "clone", HIST_NAME, str(ms_log)], root, env)
    procs.run(["git", "clone", "-q", "-b", HIST_BRANCH, git_url["file"], str(git_log)], root, env)
    say(f"  {versions} versions of {files} files set up in {time.perf_counter() - t0:.1f}s")
    return History(files, versions, root, env, git_url, ms_url, ms_log, git_log)


def bench_history(res: Results, h: History, log_rounds: int, clone_rounds: int,
                  say: Callable[[str], None]) -> None:
    scope = "history"
    env = h.env
    shown = procs.run([*MEMSYNC, "log", "-n", "20"], h.ms_log, env).strip().splitlines()
    res.figures["history"] = {"files": h.files, "versions": h.versions, "memsync_log_lines": len(shown)}
    if len(shown) < 20:
        note = f"memsync log -n 20 in its clone of the history printed {len(shown)} lines, not 20"
        NOTES.append(note)
        say(f"  {note}")

    cands = [(name, ms_action([*MEMSYNC, "log", "-n", "20"], h.ms_log, env, server))
             for name, server in variants(h.server)]
    cands += [("git log --stat", lambda: procs.timed(GIT_LOG, h.git_log, env))]
    alternate(res, scope, "log -n 20", log_rounds, cands)
    say(f"  log -n 20: done ({_brief(res, scope, 'log -n 20')})")

    dest = h.root / "clone-dest"
    cleanup, cands = memsync_clones(h.root, dest, {t: (HIST_NAME, url) for t, url in h.ms_url.items()}, env, h.server)

    def git_clone(flags: str, url: str) -> Callable[[], Sample]:
        return lambda: procs.timed(f"git clone -q {flags}-b {HIST_BRANCH} {url} {dest}", h.root, env)

    cands += [(f"git --depth 1 {LABEL[t]}", git_clone("--depth 1 ", h.git_url[t])) for t in h.git_url]
    cands += [(f"git full {LABEL[t]}", git_clone("", h.git_url[t])) for t in h.git_url]
    alternate(res, scope, "clone", clone_rounds, cands, after=cleanup)
    say(f"  clone: done ({_brief(res, scope, 'clone')})")
    if h.ms_url.get("daemon"):
        first_history_read(res, h, clone_rounds, say)


def first_history_read(res: Results, h: History, rounds: int, say: Callable[[str], None]) -> None:
    """What a shallow clone defers: the first `log -n 20` after a clone over git:// (memsync's
    clone from a network hub holds the newest version only, and this log fetches the rest),
    against `git fetch --unshallow` and `git log -n 20 --stat` in a `git clone --depth 1`. The
    clones are untimed set-up; each round starts from fresh ones."""
    env = h.env
    ms_dest, git_dest = h.root / "first-read-ms", h.root / "first-read-git"

    def memsync_first() -> Sample:
        shutil.rmtree(ms_dest, ignore_errors=True)
        procs.run([*MEMSYNC, "clone", HIST_NAME, str(ms_dest), "--remote", str(h.ms_url["daemon"])], h.root, env)
        return procs.timed([*MEMSYNC, "log", "-n", "20"], ms_dest, env)

    def git_first() -> Sample:
        shutil.rmtree(git_dest, ignore_errors=True)
        procs.run(f"git clone -q --depth 1 -b {HIST_BRANCH} {h.git_url['daemon']} {git_dest}", h.root, env)
        return procs.timed(f"git fetch -q --unshallow && {GIT_LOG} >/dev/null", git_dest, env)

    alternate(res, "history", "first log after a shallow clone", rounds,
              [("memsync git://", memsync_first), ("git git://", git_first)])
    for dest in (ms_dest, git_dest):
        shutil.rmtree(dest, ignore_errors=True)
    say(f"  first log after a shallow clone: done ({_brief(res, 'history', 'first log after a shallow clone')})")


Candidates = list[tuple[str, Callable[[], Sample]]]


def memsync_clones(root: Path, dest: Path, sources: dict[str, tuple[str, str | None]], env: dict[str, str],
                   server: procs.MemsyncServer | None) -> tuple[Callable[[str], None], Candidates]:
    """`memsync clone NAME DEST [--remote URL]` per transport (cold and served), and the cleanup
    that removes DEST after each."""
    def cleanup(_name: str) -> None:
        shutil.rmtree(dest, ignore_errors=True)

    def clone(name: str, url: str | None, via: procs.MemsyncServer | None) -> Callable[[], Sample]:
        remote = ["--remote", url] if url else []
        return lambda: ms_timed([*MEMSYNC, "clone", name, str(dest), *remote], root, env, via)

    cands = [(f"{label} {LABEL[t]}", clone(name, url, via))
             for t, (name, url) in sources.items() for label, via in variants(server)]
    return cleanup, cands


def _objects_bytes(repo: Path) -> int:
    return sum(f.stat().st_size for f in (repo / "objects").rglob("*") if f.is_file())


def bytes_sent(res: Results, s: Setup, say: Callable[[str], None]) -> None:
    """8. Bytes a 10-file change uploads: memsync and git counted by a TCP relay in front of the
    git daemon (or, without one, as the growth of the hub's object store); the snapshot tarball."""
    paths = gen.changed_paths(s.size, 5000)
    t = "daemon" if "daemon" in s.ms else "file"
    for tree in (s.ms[t], s.git[t], s.snap):
        gen.edit(tree, paths, "bytes")
    if t == "daemon":
        proxy = procs.CountingProxy(s.daemon.port)
        try:
            procs.run([*MEMSYNC, "push", "--remote", s.daemon.url(s.hub, proxy.port)], s.ms[t], s.env)
            memsync_sent = proxy.sent
            proxy.reset()
            procs.run(f"git add -A && git commit -q -m bytes && "
                      f"git push -q {s.daemon.url(s.git_hub[t], proxy.port)} {t}", s.git[t], s.env)
            git_sent = proxy.sent
        finally:
            proxy.stop()
        method = "TCP bytes client->server through a relay in front of git daemon"
    else:
        before = _objects_bytes(s.hub)
        procs.run([*MEMSYNC, "push"], s.ms[t], s.env)
        memsync_sent = _objects_bytes(s.hub) - before
        before = _objects_bytes(s.git_hub[t])
        procs.run(GIT_PUSH, s.git[t], s.env)
        git_sent = _objects_bytes(s.git_hub[t]) - before
        method = "growth of the hub's object store (file:// hub)"
    tarball = s.root / "bytes.tar.gz"
    procs.run(f"tar -czf {tarball} -C {s.snap} .", s.root, s.env)
    snap_sent = tarball.stat().st_size
    tarball.unlink()
    changed = sum((s.snap / p).stat().st_size for p in paths)
    res.figures["bytes sent"] = {"files": s.size, "memory_mb": round(s.data_bytes / MB, 1),
                                 "changed_files_bytes": changed, "memsync": memsync_sent,
                                 "git": git_sent, "snapshot": snap_sent, "method": method}
    say(f"  bytes sent ({method}): memsync {memsync_sent}, git {git_sent}, snapshot {snap_sent}")


# -- size-independent items -----------------------------------------------------------------------
def bench_startup(res: Results, work: Path, rounds: int) -> None:
    env = make_env(work, work / "mshome-startup")
    py = sys.executable
    cands = [
        ("memsync --version", lambda: procs.timed([*MEMSYNC, "--version"], work, env)),
        ("memsync --help", lambda: procs.timed([*MEMSYNC, "--help"], work, env)),
        ("import pygit2", lambda: procs.timed([py, "-c", "import pygit2"], work, env)),
        ("python -c pass", lambda: procs.timed([py, "-c", "pass"], work, env)),
    ]
    alternate(res, "once", "start-up", rounds, cands)


def build_list_hub(work: Path, count: int) -> tuple[Path, dict[str, str]]:
    """A hub holding `count` memories of 200 files each, with run trailers (made with pygit2)."""
    import pygit2
    from pygit2.enums import FileMode

    home = work / "list-home"
    hub = home / "hub.git"
    repo = pygit2.init_repository(str(hub), bare=True)
    sig = pygit2.Signature("memsync run r1", "run@example.invalid")
    for i in range(count):
        index = pygit2.Index()
        for path, size in gen.layout(200, seed=i)[:200]:
            blob = repo.create_blob((f"# {path} of memory {i}\n" + "x" * size).encode())
            index.add(pygit2.IndexEntry(path, blob, FileMode.BLOB))
        tree = index.write_tree(repo)
        msg = (f"Run 20260101T000000Z-{i:04d}\n\nMemsync-Actor: run\nMemsync-Run-Id: 20260101T000000Z-{i:04d}\n"
               "Memsync-Exit-Code: 0\n")
        repo.create_commit(f"refs/heads/memory/mem-{i:03d}", sig, sig, msg, tree, [])
    return hub, make_env(work, home)


def bench_list(res: Results, work: Path, rounds: int, count: int, say: Callable[[str], None]) -> None:
    hub, env = build_list_hub(work, count)
    server = start_server(work, "list", env, work, say)
    try:
        _bench_list(res, work, rounds, count, hub, env, server)
    finally:
        stop_server(res, "list", server)


def _bench_list(res: Results, work: Path, rounds: int, count: int, hub: Path, env: dict[str, str],
                server: procs.MemsyncServer | None) -> None:
    daemon = DAEMON[0]
    url = daemon.url(hub)
    mem = work / "list-mem"
    procs.run([*MEMSYNC, "clone", "mem-000", str(mem)], work, env)
    gclone = work / "list-git"
    procs.run(["git", "clone", "-q", "-b", "memory/mem-000", f"file://{hub}", str(gclone)], work, env)
    same_work = ("for r in $(git for-each-ref --format='%(refname)' refs/heads/memory); do "
                 "git ls-tree -r -l $r >/dev/null; git log -1 --format='%(trailers)' $r >/dev/null; done")
    cands: list[tuple[str, Callable[[], Sample]]] = []
    for name, srv in variants(server):
        cands += [
            (f"{name} file", ms_action([*MEMSYNC, "list"], work, env, srv)),
            (f"{name} git://", ms_action([*MEMSYNC, "list", "--remote", url], work, env, srv)),
        ]
    cands += [
        ("git ls-remote", lambda: procs.timed(["git", "ls-remote", f"file://{hub}"], work, env)),
        ("git same work", lambda: procs.timed(same_work, hub, env)),
    ]
    alternate(res, "once", f"list ({count} memories)", rounds, cands)
    cands = [(f"{name} file", ms_action([*MEMSYNC, "status"], mem, env, srv))
             for name, srv in variants(server)]
    cands += [("git file", lambda: procs.timed(GIT_FULL_STATUS, gclone, env))]
    alternate(res, "once", f"status (hub of {count})", rounds, cands)


# -- the table ------------------------------------------------------------------------------------
def fmt(series: Series | None) -> str:
    if series is None or not series.samples:
        return "-"
    return f"{series.median * 1000:.0f}±{series.spread * 1000:.0f}"


def _brief(res: Results, scope: str, item: str) -> str:
    found = res.timings.get(scope, {}).get(item, {})
    return ", ".join(f"{k} {v.median * 1000:.0f}ms" for k, v in found.items())


@dataclass
class Row:
    scope: str
    item: str
    memsync: str
    git: str
    other: str
    ratio: str
    target: str
    verdict: str
    served: str = "-"
    served_ratio: str = "-"


def ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def verdict(value: float | None, limit: float) -> str:
    if value is None:
        return "-"
    return "met" if value <= limit else "NOT met"


def _x(value: float | None) -> str:
    return f"{value:.2f}x" if value else "-"


REFERENCE = {"log -n 20": "git log --stat", "clone@history": "git --depth 1", "first log after a shallow clone": "git"}


def _others(found: dict[str, Series], t: str, reference: str) -> list[str]:
    """Every candidate but memsync's and the row's reference, of this transport or of none."""
    suffixes = tuple(f" {label}" for label in LABEL.values())
    shown = []
    for k, v in found.items():
        if k.startswith("memsync") or k == reference or k in (f"git {label}" for label in LABEL.values()):
            continue
        if k.endswith(suffixes) and not k.endswith(f" {t}"):
            continue
        shown.append(f"{k} {fmt(v)}")
    return shown


def rows_for(res: Results, sizes: list[int]) -> list[Row]:
    rows: list[Row] = []
    for size in sizes:
        scope = str(size)
        items = res.timings.get(scope, {})
        at10k = size == 10_000
        for item, found in items.items():
            if item == "status after copy-in":
                continue
            for t in LABEL.values():
                m, g = found.get(f"memsync {t}"), found.get(f"git {t}")
                if m is None or g is None:
                    continue
                sv = found.get(f"memsync served {t}")
                others = _others(found, t, f"git {t}")
                r = ratio(m.median, g.median)
                target, ok = "", ""
                if at10k:
                    target, ok = "<=1.5x git", verdict(r, 1.5)
                if item == "push, no change" and "git status" in found:
                    floor = ratio(m.median, found["git status"].median)
                    if at10k:
                        target = "<=1.5x git; <=2x status"
                        ok = "met" if (r or 9) <= 1.5 and (floor or 9) <= 2 else "NOT met"
                    others.append(f"=> {floor:.2f}x status" if floor else "")
                    full = found.get(f"git fetch+status {t}")
                    if full:
                        others.append(f"=> {_x(ratio(m.median, full.median))} fetch+status")
                rows.append(Row(f"{size:,}", f"{item} [{t}]", fmt(m), fmt(g), "; ".join(o for o in others if o),
                                _x(r), target, ok, fmt(sv), _x(ratio(sv.median, g.median) if sv else None)))
        stale = items.get("status after copy-in")
        if stale:
            normal = res.median(scope, "status", "memsync file")
            second = stale["memsync 2nd"].median
            r2 = ratio(second, normal)
            rows.append(Row(f"{size:,}", "status after copy-in (1st/2nd)",
                            f"{fmt(stale['memsync 1st'])} / {fmt(stale['memsync 2nd'])}",
                            f"{fmt(stale['git 1st'])} / {fmt(stale['git 2nd'])}",
                            f"2nd = {r2:.2f}x a normal status" if r2 else "",
                            f"{ratio(second, stale['git 2nd'].median):.2f}x", "2nd <=1.2x normal",
                            verdict(r2, 1.2)))
    hist = res.timings.get("history", {})
    info = res.figures.get("history")
    where = f"{info['files']:,}@{info['versions']:,}" if isinstance(info, dict) else "history"
    for item, found in hist.items():
        for t in ("", *LABEL.values()):
            suffix = f" {t}" if t else ""
            reference = f"{REFERENCE.get(item, REFERENCE['clone@history'])}{suffix}"
            m, g = found.get(f"memsync{suffix}"), found.get(reference)
            if m is None or g is None:
                continue
            sv = found.get(f"memsync served{suffix}")
            rows.append(Row(where, f"{item}{f' [{t}]' if t else ''}", fmt(m), fmt(g),
                            "; ".join(_others(found, t, reference)), _x(ratio(m.median, g.median)), "", "",
                            fmt(sv), _x(ratio(sv.median, g.median) if sv else None)))
    biggest = str(max(sizes)) if sizes else ""
    push10 = res.median(biggest, "push 10 changed", "memsync file")
    floor = res.median(biggest, "push, no change", "git status")
    small = res.median(str(min(sizes)), "push 10 changed", "memsync file") if sizes else None
    if push10 and floor and small and int(biggest) >= 100_000 and min(sizes) < int(biggest):
        budget = floor + small
        rows.append(Row(f"{int(biggest):,}", "push 10 changed vs scan floor + 10 files", f"{push10 * 1000:.0f}",
                        "-", f"git status {floor * 1000:.0f} + push@{min(sizes):,} {small * 1000:.0f}",
                        f"{push10 / budget:.2f}x", "~1x (<=1.5x)", verdict(push10 / budget, 1.5)))
    own_floor = res.median(biggest, "push, no change", "memsync file")
    if push10 and own_floor and int(biggest) >= 100_000:
        rows.append(Row(f"{int(biggest):,}", "push 10 changed vs memsync's own no-change push",
                        f"{push10 * 1000:.0f}", "-", f"memsync push, no change {own_floor * 1000:.0f}",
                        f"{push10 / own_floor:.2f}x", "the 10 files add little", ""))
    once = res.timings.get("once", {})
    start = once.get("start-up")
    if start:
        base = start["import pygit2"].median
        for name in ("memsync --version", "memsync --help"):
            r = start[name].median / base
            rows.append(Row("-", name, fmt(start[name]), "-",
                            f"import pygit2 {fmt(start['import pygit2'])}; python {fmt(start['python -c pass'])}",
                            f"{r:.2f}x pygit2", "<=1.3x pygit2" if "version" in name else "",
                            verdict(r, 1.3) if "version" in name else ""))
    for item, found in once.items():
        if item == "start-up":
            continue
        git_key = "git same work" if "git same work" in found else "git file"
        for t in LABEL.values():
            m = found.get(f"memsync {t}")
            if m is None:
                continue
            sv = found.get(f"memsync served {t}")
            listed = "; ".join(f"{k} {fmt(v)}" for k, v in found.items() if not k.startswith("memsync"))
            rows.append(Row("-", f"{item} [{t}]", fmt(m), fmt(found[git_key]), listed,
                            _x(ratio(m.median, found[git_key].median)), "", "",
                            fmt(sv), _x(ratio(sv.median, found[git_key].median) if sv else None)))
    sent = res.figures.get("bytes sent")
    if isinstance(sent, dict):
        rows.append(Row(f"{sent['files']:,}", f"bytes sent, 10 files in {sent['memory_mb']} MB",
                        f"{sent['memsync']:,} B", f"{sent['git']:,} B",
                        f"snapshot {sent['snapshot']:,} B; changed files {sent['changed_files_bytes']:,} B",
                        f"{sent['memsync'] / max(1, sent['git']):.2f}x",
                        "<=2x git + 16 KB",
                        verdict(sent["memsync"] / (2 * sent["git"] + 16384), 1.0)))
    if biggest and int(biggest) >= 100_000:
        for item in ("push 10 changed", "clone"):
            series = res.get(biggest, item, "memsync file")
            gseries = res.get(biggest, item, "git file")
            sseries = res.get(biggest, item, "memsync served file")
            if series:
                rows.append(Row(f"{int(biggest):,}", f"peak RSS, {item}", f"{series.rss_mb:.0f} MB",
                                f"{gseries.rss_mb:.0f} MB" if gseries else "-", "",
                                _x(ratio(series.rss_mb, gseries.rss_mb) if gseries else None), "<300 MB",
                                "met" if series.rss_mb < 300 else "NOT met",
                                f"{sseries.rss_mb:.0f} MB" if sseries else "-",
                                _x(ratio(sseries.rss_mb, gseries.rss_mb) if sseries and gseries else None)))
    return rows


def print_table(rows: list[Row]) -> str:
    headers = ["files", "operation", "memsync ms", "served ms", "git CLI ms", "others (ms)", "memsync/git",
               "served/git", "target", ""]
    data = [[r.scope, r.item, r.memsync, r.served, r.git, r.other, r.ratio, r.served_ratio, r.target, r.verdict]
            for r in rows]
    widths = [max(len(h), *(len(d[i]) for d in data)) if data else len(h) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(d, widths, strict=True)).rstrip() for d in data]
    text = "\n".join(lines)
    print(text)
    return text


# -- main -----------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default=",".join(str(s) for s in SIZES),
                        help="comma-separated file counts (default: 1000,10000,100000)")
    parser.add_argument("--rounds", type=int, default=None,
                        help="rounds per item (default: 3 at 1k, 5 at 10k, 3 at 100k)")
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: 1,000 files, 2 rounds, a 200-version history of 1,000 files")
    parser.add_argument("--all-items", action="store_true",
                        help=f"every item at every size (default: above {ALL_ITEMS_MAX:,} files only push, "
                             "no-change push and clone, without the snapshot baseline)")
    parser.add_argument("--history-files", type=int, default=HISTORY_FILES,
                        help=f"files of the history set-up (default {HISTORY_FILES})")
    parser.add_argument("--history-versions", type=int, default=HISTORY_VERSIONS,
                        help=f"versions of the history set-up (default {HISTORY_VERSIONS}; 0 = skip it)")
    parser.add_argument("--history-rounds", type=int, default=HISTORY_ROUNDS,
                        help=f"rounds of log -n 20 (default {HISTORY_ROUNDS})")
    parser.add_argument("--history-clone-rounds", type=int, default=HISTORY_CLONE_ROUNDS,
                        help=f"rounds of the history clone (default {HISTORY_CLONE_ROUNDS})")
    parser.add_argument("--no-serve", action="store_true",
                        help="leave out the memsync served candidates even when `memsync serve` exists")
    parser.add_argument("--no-daemon", action="store_true", help="embedded hub only (skip git://)")
    parser.add_argument("--daemon-max", type=int, default=10_000,
                        help="largest size also measured over git:// (default 10000: the time budget)")
    parser.add_argument("--memsync", default=None,
                        help="the memsync command to measure (default: the console script next to this python)")
    parser.add_argument("--dev-install", action="store_true",
                        help="measure the development (editable) install instead of a copy laid out as pip "
                             "installs it")
    parser.add_argument("--workdir", type=Path, default=None, help="scratch directory (default: a temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory")
    parser.add_argument("--out", type=Path, default=HERE / "results", help="where the JSON goes")
    parser.add_argument("--readme", action="store_true",
                        help="run nothing: rewrite docs/PERFORMANCE.md's benchmark table from OUT/latest.json")
    args = parser.parse_args(argv)
    if args.readme:
        targets.rewrite_readme(args.out / "latest.json")
        return 0
    sizes = [1_000] if args.quick else [int(x.replace("_", "")) for x in args.sizes.split(",") if x]
    hist_files = 1_000 if args.quick else args.history_files
    hist_versions = 200 if args.quick else args.history_versions
    hist_rounds = 2 if args.quick else args.history_rounds
    hist_clone_rounds = 1 if args.quick else args.history_clone_rounds
    started = time.perf_counter()
    # first, while this process is small: timed commands are spawned from it (peak RSS: see procs.Spawner)
    procs.SPAWNER.append(procs.Spawner())
    work = fresh_workdir(args.workdir, "bench")
    if args.memsync:
        MEMSYNC[:] = shlex.split(args.memsync)
    elif args.dev_install:
        MEMSYNC[:] = memsync_cmd()
    else:
        MEMSYNC[:] = installed_copy(work)
    transports = ("file",) if args.no_daemon else TRANSPORTS

    def say(msg: str) -> None:
        print(f"[{time.perf_counter() - started:6.1f}s] {msg}", flush=True)

    if args.no_serve:
        NOTES.append("memsync served: left out (--no-serve)")
    elif procs.serve_available(MEMSYNC, make_env(work, work / "mshome-startup")):
        SERVE[0] = True
    else:
        NOTES.append("memsync served: left out, this memsync has no `serve` command (`memsync serve --help` failed)")
    for note in NOTES:
        say(note)

    res = Results()
    DAEMON.append(procs.GitDaemon(work, make_env(work, work / "mshome-daemon")))
    try:
        say("start-up")
        bench_startup(res, work, 5 if args.quick else STARTUP_ROUNDS)
        say(f"list and status on a hub with {LIST_MEMORIES} memories")
        bench_list(res, work, 2 if args.quick else 5, 10 if args.quick else LIST_MEMORIES, say)
        for size in sizes:
            say(f"{size:,} files")
            here = transports if size <= args.daemon_max else ("file",)
            setup = build(size, work, work, here, say)
            setup.server = start_server(work, f"n{size}", setup.env, setup.root, say)
            rounds = args.rounds or (2 if args.quick else ROUNDS.get(size, 3))
            clone_rounds = min(rounds, 2 if args.quick else CLONE_ROUNDS.get(size, 1))
            if setup.server is not None and args.rounds is None and not args.quick:
                clone_rounds = 1  # served doubles memsync's clones; issue 14's clone is the history's
            try:
                bench_size(res, setup, rounds, clone_rounds, args.all_items or size <= ALL_ITEMS_MAX, say)
                if size == max(sizes):
                    bytes_sent(res, setup, say)
            finally:
                stop_server(res, f"n{size}", setup.server)
            if not args.keep:
                shutil.rmtree(setup.root, ignore_errors=True)
        if hist_versions > 0:
            say(f"history: {hist_versions:,} versions of {hist_files:,} files")
            here = transports if hist_files <= args.daemon_max else ("file",)
            hist = build_history(work, hist_files, hist_versions, here, say)
            hist.server = start_server(work, "hist", hist.env, hist.root, say)
            try:
                bench_history(res, hist, hist_rounds, hist_clone_rounds, say)
            finally:
                stop_server(res, "hist", hist.server)
            if not args.keep:
                shutil.rmtree(hist.root, ignore_errors=True)
    finally:
        for server in list(SERVERS):
            stop_server(res, server.sock.stem, server)
        for d in DAEMON:
            d.stop()
        res.figures["rss_floor_kb"] = procs.SPAWNER[0].own_peak_kb()
        procs.SPAWNER.pop().stop()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    elapsed = time.perf_counter() - started
    print()
    table = print_table(rows_for(res, sizes))
    print(f"\nmedian ± half-range over the rounds, in ms; ratios are memsync's median over the git CLI's "
          f"(served: through `memsync serve`). Total bench time {elapsed:.0f}s.\n")
    doc = results_doc(res, sizes, elapsed, table, sys.argv[1:] if argv is None else argv)
    rows = targets.target_rows(doc)
    served_note = "" if SERVE[0] and not args.no_serve else "no served figures in this run"
    goals = targets.console_table(rows, served_note)
    print(goals)
    for note in NOTES:
        print(f"note: {note}")
    doc["issue14"] = [r.as_json() for r in rows]
    doc["issue14_table"] = goals.splitlines()
    doc["notes"] = NOTES
    write_json(doc, args.out)
    return 0


def results_doc(res: Results, sizes: list[int], elapsed: float, table: str, argv: list[str]) -> dict[str, Any]:
    return {
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "argv": argv, "sizes": sizes, "elapsed_s": round(elapsed, 1),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform(),
                    "git": procs.run(["git", "--version"], Path.cwd(), dict(os.environ)).strip()},
        "memsync": shlex.join(MEMSYNC), "served": SERVE[0],
        # peak RSS figures come from wait4() of commands spawned by bench/spawner.py; none is below
        # the spawner's own peak (rss_floor_kb)
        "rss_method": "spawner", "rss_floor_kb": res.figures.pop("rss_floor_kb", None),
        "timings": {scope: {item: {c: s.as_json() for c, s in found.items()} for item, found in items.items()}
                    for scope, items in res.timings.items()},
        "figures": res.figures,
        "table": table.splitlines(),
    }


def write_json(doc: dict[str, Any], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    text = json.dumps(doc, indent=1) + "\n"
    (out / f"bench-{time.strftime('%Y%m%dT%H%M%S')}.json").write_text(text, encoding="utf-8")
    (out / "latest.json").write_text(text, encoding="utf-8")
    print(f"results: {out / 'latest.json'}")


if __name__ == "__main__":
    sys.exit(main())
