"""Peak RSS of every verb that touches a whole memory, memsync against git doing the same work.

    python bench/rss.py                                  # 20,000 and 100,000 files, plus one 200 MB file
    python bench/rss.py --sizes 20000 --big-mb 0         # a quick one (~2 minutes)
    python bench/rss.py --sizes '' --big-mb 200          # the large-file run alone

Each command is a cold process (a new Python per memsync command, as in a sandbox) spawned by
bench/spawner.py, so its peak RSS is its own, not the bench's, which Linux would carry over exec.
Both sides are measured the same way, over their whole process tree: the figure is the larger of
wait4's ru_maxrss (the largest single process of the command line, exact however short its
peak) and the largest sum of the tree's processes alive at one time, sampled every 20 ms from
/proc (`git push` and the `git pack-objects` it runs are alive together; so are a hub on this
machine's `receive-pack` and `index-pack`, which are git's own children over file://, while
memsync writes such a hub in its own process). memsync's tree is one process. The
memories are bench/gen.py's at `--scale` 4 (~4.6 KB a file: 100,000 files are ~460 MB, the
issue's 456 MB). Verbs, one after the other on the same memory (memsync and git alternate
which runs first, verb by verb):

| verb | memsync | git |
|---|---|---|
| first push | `memsync init --name N && memsync push` in a folder of files | `git init/add -A/commit/push` |
| first push (git://, http://, ssh://) | the same to a network hub (`--transports`) | the same to the same server |
| status | `memsync status` | `git fetch && git status --porcelain -b` |
| push10 | `memsync push` after appending a line to 10 files | `git add -A && git commit && git push` |
| pull | `memsync pull` of a commit changing 10 files, written into the hub | `git pull --ff-only` |
| run | `memsync run -- true` | `git pull --ff-only; true; git add -A; git commit; git push` |
| log | `memsync log -n 20` | `git log -n 20 --stat` |
| clone | `memsync clone N DEST` | `git clone -b BRANCH file://HUB DEST` |
| gc | `memsync gc` | `git gc -q` |

The target (issue 24): memsync's peak at most git's + 60 MB, and growing with the largest file,
not with the memory: the large-file run adds one file of `--big-mb` MB to `--big-base` small
ones (storage.yaml's max_file_size raised to let it in). `--transports` adds the first push over
`git daemon`, smart HTTP (`git http-backend`) and sshd on 127.0.0.1 (tests/helpers/servers.py), a
fresh copy of the files and a fresh hub each; the server's processes are not counted on either
side. Results: bench/results/rss.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import gen  # noqa: E402
import procs  # noqa: E402

import bench  # noqa: E402

MB = 1024 * 1024
TARGET_MB = 60  # memsync's peak may exceed git's by this much (issue 24)
VERBS = ("first push", "status", "push10", "pull", "run", "log", "clone", "gc")


def big_file(path: Path, size_mb: int) -> None:
    """One large text file (a log, a dump): gen.py's words, repeated, each block numbered."""
    block = b"".join(data for _, data in gen.contents(200, seed=3))
    with open(path, "wb") as fh:
        written, n = 0, 0
        while written < size_mb * MB:
            chunk = f"block {n}\n".encode() + block
            fh.write(chunk)
            written += len(chunk)
            n += 1


class Memory:
    """One memory at one size: the memsync work tree and the git work tree holding the same files,
    each with its own hub (memsync's embedded hub; a bare repo for git)."""

    def __init__(self, work: Path, tag: str, count: int, scale: int, big_mb: int) -> None:
        self.root = work / tag
        self.name = f"rss-{tag}"
        self.env = bench.make_env(work, self.root / "mshome")
        self.ms = self.root / "ms"
        self.git = self.root / "git"
        self.git_hub = self.root / "git-hub.git"
        self.count = count
        self.big_mb = big_mb
        self.source = self.root / "source"  # the files as generated, for the first pushes of --transports
        self.source.mkdir(parents=True)
        self.data_bytes = gen.generate(self.source, count, scale=scale)
        if big_mb:
            (self.source / "big").mkdir()
            big_file(self.source / "big" / "dump.log", big_mb)
            self.data_bytes += (self.source / "big" / "dump.log").stat().st_size
        shutil.copytree(self.source, self.ms, symlinks=True)
        shutil.copytree(self.source, self.git, symlinks=True)
        procs.run(["git", "init", "-q", "--bare", str(self.git_hub)], self.root, self.env)

    @property
    def ms_hub(self) -> Path:
        return Path(self.env["MEMSYNC_HOME"]) / "hub.git"


def commands(m: Memory, ms: list[str]) -> dict[str, tuple[Callable[[], None] | None, list[str] | str, list[str] | str,
                                                            Path, Path]]:
    """verb -> (untimed preparation, memsync command, git command, memsync cwd, git cwd)."""
    msj = " ".join(ms)
    cfg = f" && printf 'max_file_size: {m.big_mb + 100}MiB\\n' >> .vm0/storage.yaml" if m.big_mb else ""
    edited: list[int] = [0]

    def edit() -> None:
        edited[0] += 1
        paths = gen.changed_paths(m.count, edited[0])
        gen.edit(m.ms, paths, f"rss {edited[0]}")
        gen.edit(m.git, paths, f"rss {edited[0]}")

    def remote() -> None:
        edited[0] += 1
        paths = gen.changed_paths(m.count, 100 + edited[0])
        bench.remote_writer([(m.ms_hub, f"refs/heads/memory/{m.name}"), (m.git_hub, "refs/heads/main")],
                            f"rss {edited[0]}", paths)

    git_push = "git add -A && git commit -q -m edit && git push -q"
    return {
        # init's storage.yaml edit (the large-file run's max_file_size) is part of the set-up
        "first push": (None, f"{msj} init --name {m.name} >/dev/null{cfg} && {msj} push",
                       f"git init -q -b main && git add -A && git commit -q -m seed && "
                       f"git remote add origin file://{m.git_hub} && git push -q -u origin main", m.ms, m.git),
        "status": (None, [*ms, "status"], "git fetch -q && git status --porcelain -b", m.ms, m.git),
        "push10": (edit, [*ms, "push"], git_push, m.ms, m.git),
        "pull": (remote, [*ms, "pull"], "git pull --ff-only -q", m.ms, m.git),
        "run": (None, [*ms, "run", "--", "true"],
                "git pull --ff-only -q; true; git add -A; git commit -q -m run; git push -q", m.ms, m.git),
        "log": (None, [*ms, "log", "-n", "20"], "git log -n 20 --stat >/dev/null", m.ms, m.git),
        "clone": (None, [*ms, "clone", m.name, str(m.root / "ms-clone")],
                  ["git", "clone", "-q", "-b", "main", f"file://{m.git_hub}", str(m.root / "git-clone")],
                  m.root, m.root),
        "gc": (None, [*ms, "gc"], "git gc -q", m.ms, m.git),
    }


def measure(m: Memory, ms: list[str], verbs: list[str], say: Callable[[str], None]) -> dict[str, dict[str, Any]]:
    rows: dict[str, dict[str, Any]] = {}
    for i, (verb, (prepare, ms_cmd, git_cmd, ms_cwd, git_cwd)) in enumerate(commands(m, ms).items()):
        if verb not in verbs and verb != "first push":  # everything else needs the first push
            continue
        if prepare is not None:
            prepare()
        got: dict[str, procs.Sample] = {}
        order = [("memsync", ms_cmd, ms_cwd), ("git", git_cmd, git_cwd)]
        for who, cmd, cwd in order if i % 2 == 0 else order[::-1]:
            got[who] = procs.timed(cmd, cwd, m.env, tree=True)
        rows[verb] = row(got["memsync"], got["git"])
        say(shown(verb, rows[verb]))
    return rows


def peak_mb(sample: procs.Sample) -> float:
    """The command's peak over its whole process tree (the module's docstring says how)."""
    return max(sample.rss_kb, sample.tree_kb) / 1024


def row(ms: procs.Sample, git: procs.Sample) -> dict[str, Any]:
    ms_mb, git_mb = peak_mb(ms), peak_mb(git)
    return {"memsync_mb": round(ms_mb, 1), "git_mb": round(git_mb, 1),
            "memsync_largest_process_mb": round(ms.rss_kb / 1024, 1),
            "git_largest_process_mb": round(git.rss_kb / 1024, 1),
            "difference_mb": round(ms_mb - git_mb, 1), "met": ms_mb <= git_mb + TARGET_MB,
            "memsync_s": round(ms.seconds, 2), "git_s": round(git.seconds, 2)}


def shown(verb: str, r: dict[str, Any]) -> str:
    return (f"    {verb:<22} memsync {r['memsync_mb']:7.1f} MB ({r['memsync_s']:6.1f}s)   "
            f"git {r['git_mb']:7.1f} MB (largest process {r['git_largest_process_mb']:.1f}; {r['git_s']:6.1f}s)")


class Servers:
    """The network hubs of `--transports`: git daemon, smart HTTP, sshd, all on 127.0.0.1."""

    def __init__(self, work: Path, transports: list[str], env: dict[str, str]) -> None:
        sys.path.insert(0, str(HERE.parent))
        from tests.helpers import servers

        self.work = work
        self.daemon = procs.GitDaemon(work, env) if "git" in transports else None
        self.http = servers.HttpGitServer(work, user="bench", token="bench-token") if "http" in transports else None
        if self.http is not None:
            self.http.start()
        self.ssh = servers.SshGitServer(work / "sshd") if "ssh" in transports else None
        if self.ssh is not None:
            self.ssh.start()

    def url(self, transport: str, hub: Path, for_git: bool) -> str:
        if transport == "git" and self.daemon is not None:
            return self.daemon.url(hub)
        if transport == "http" and self.http is not None:
            return f"http://bench{':bench-token' if for_git else ''}@127.0.0.1:{self.http.port}/" \
                   f"{hub.relative_to(self.work)}"
        assert transport == "ssh" and self.ssh is not None
        return self.ssh.url(hub)

    def env(self, base: dict[str, str], for_git: bool) -> dict[str, str]:
        env = dict(base)
        if self.http is not None and not for_git:
            env.update({"MEMSYNC_TOKEN": "bench-token", "MEMSYNC_USER": "bench"})
        if self.ssh is not None:
            known = self.ssh.write_known_hosts(self.work / "known_hosts")
            if for_git:
                env["GIT_SSH_COMMAND"] = self.ssh.ssh_command(known_hosts=known)
            else:
                env.update({"MEMSYNC_SSH_KEY": str(self.ssh.client_key), "MEMSYNC_KNOWN_HOSTS": str(known)})
        return env

    def stop(self) -> None:
        for server in (self.daemon, self.http, self.ssh):
            if server is not None:
                server.stop()


def network_first_pushes(m: Memory, ms: list[str], servers: Servers, transports: list[str],
                         say: Callable[[str], None]) -> dict[str, dict[str, Any]]:
    """The first push of a fresh copy of the memory's files to a fresh hub over each transport."""
    rows: dict[str, dict[str, Any]] = {}
    for i, transport in enumerate(t for t in transports if t != "file"):
        place = m.root / f"first-{transport}"
        got: dict[str, procs.Sample] = {}
        order = ["memsync", "git"] if i % 2 == 0 else ["git", "memsync"]
        for who in order:
            tree, hub = place / who, place / f"{who}-hub.git"
            shutil.copytree(m.source, tree, symlinks=True)
            procs.run(["git", "init", "-q", "--bare", str(hub)], m.root, m.env)
            procs.run(["git", "config", "http.receivepack", "true"], hub, m.env)
            url = servers.url(transport, hub, who == "git")
            env = servers.env({**m.env, "MEMSYNC_HOME": str(place / "mshome")}, who == "git")
            if who == "memsync":
                line = f"{shlex.join(ms)} init --name {m.name} --remote {shlex.quote(url)} >/dev/null && " \
                       f"{shlex.join(ms)} push"
            else:
                line = ("git init -q -b main && git add -A && git commit -q -m seed && "
                        f"git remote add origin {shlex.quote(url)} && git push -q -u origin main")
            got[who] = procs.timed(line, tree, env, tree=True)
        verb = f"first push ({transport})"
        rows[verb] = row(got["memsync"], got["git"])
        say(shown(verb, rows[verb]))
        shutil.rmtree(place, ignore_errors=True)
    return rows


def table(results: dict[str, dict[str, Any]]) -> str:
    lines = [f"| memory | verb | memsync MB | git MB | difference | target git+{TARGET_MB} MB |",
             "|---|---|---:|---:|---:|---|"]
    for label, res in results.items():
        for verb, row in res["verbs"].items():
            lines.append(f"| {label} | {verb} | {row['memsync_mb']:.0f} | {row['git_mb']:.0f} | "
                         f"{row['difference_mb']:+.0f} | {'met' if row['met'] else 'NOT met'} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="20000,100000", help="comma-separated file counts ('' for none)")
    ap.add_argument("--scale", type=int, default=4, help="gen.py's size multiplier (4: ~4.6 KB a file)")
    ap.add_argument("--big-mb", type=int, default=200, help="the large-file run's one big file, MB (0: no such run)")
    ap.add_argument("--big-base", type=int, default=20000, help="small files beside the big one")
    ap.add_argument("--verbs", default=",".join(VERBS))
    ap.add_argument("--transports", default="file",
                    help="comma-separated: file (the verbs above), git, http, ssh (a first push each)")
    ap.add_argument("--memsync", help="the memsync command to measure (default: an installed copy of this checkout)")
    ap.add_argument("--workdir", type=Path)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--out", type=Path, default=HERE / "results" / "rss.json")
    args = ap.parse_args(argv)
    verbs = [v.strip() for v in args.verbs.split(",") if v.strip()]
    unknown = sorted(set(verbs) - set(VERBS))
    if unknown:
        ap.error(f"unknown verbs: {', '.join(unknown)} (known: {', '.join(VERBS)})")
    spawner = procs.Spawner()  # first, while this process is small
    procs.SPAWNER.append(spawner)
    work = args.workdir or Path(tempfile.mkdtemp(prefix="memsync-rss-"))
    work.mkdir(parents=True, exist_ok=True)
    started = time.time()
    servers: Servers | None = None

    def say(text: str) -> None:
        print(text, flush=True)

    try:
        bench.write_gitconfig(work)
        ms = args.memsync.split() if args.memsync else bench.installed_copy(work)
        transports = [t.strip() for t in args.transports.split(",") if t.strip()]
        servers = Servers(work, transports, bench.make_env(work, work / "mshome-servers")) \
            if set(transports) - {"file"} else None
        runs: list[tuple[str, int, int]] = [(f"{n:,} files", n, 0) for n in
                                           (int(s) for s in args.sizes.split(",") if s.strip())]
        if args.big_mb:
            runs.append((f"{args.big_base:,} files + one {args.big_mb} MB", args.big_base, args.big_mb))
        results: dict[str, dict[str, Any]] = {}
        for label, count, big in runs:
            t0 = time.perf_counter()
            m = Memory(work, f"n{count}" + (f"-big{big}" if big else ""), count, args.scale, big)
            say(f"{label}: {m.data_bytes / MB:.0f} MB generated in {time.perf_counter() - t0:.0f}s")
            rows = measure(m, ms, verbs, say)
            if servers is not None and not big:
                rows.update(network_first_pushes(m, ms, servers, transports, say))
            results[label] = {"files": count + (1 if big else 0), "data_mb": round(m.data_bytes / MB, 1),
                              "largest_file_mb": big or None, "verbs": rows}
            if not args.keep:
                shutil.rmtree(m.root, ignore_errors=True)
        text = table(results)
        print("\npeak RSS (MB), memsync cold vs git, over each command's process tree\n" + text)
        doc = {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "seconds": round(time.time() - started),
               "argv": sys.argv[1:] if argv is None else argv, "machine": platform.platform(),
               "cpus": os.cpu_count(), "python": platform.python_version(),
               "git": procs.run(["git", "--version"], work, dict(os.environ)).strip(),
               "rss_method": "spawner: max(wait4 ru_maxrss, sum over the process tree sampled every 20 ms)",
               "rss_floor_kb": spawner.own_peak_kb(),
               "target": f"memsync <= git + {TARGET_MB} MB", "results": results,
               "table": text}
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
        print(f"\nwritten to {args.out}")
    finally:
        if servers is not None:
            servers.stop()
        spawner.stop()
        if not args.keep and args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
