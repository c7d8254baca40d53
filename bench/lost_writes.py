"""Published ways memory systems lose writes, replayed against memsync and against what each peer
documents, run here as small scripts on the same machine.

    python bench/lost_writes.py                    # every case, CI-sized (8 writers, 12 jobs)
    python bench/lost_writes.py --writers 50 --jobs 50

Each case starts from a memory on a hub (the embedded hub for memsync, a bare repository on disk
for the git peers, a directory of tarballs for the snapshot peer), lets writers write, and then
counts, on what the hub holds at the end:

- writes: the writes the writers were told succeeded, or queued;
- lost: writes whose content is nowhere in the final tree (nor in a conflict copy memsync keeps);
- reported: conflicts or damage the system said something about (a conflict copy, an integrity
  flag, a refusal naming the file).

Cases (the peer's behaviour is the one its own documentation or issue tracker describes):

1. concurrency group: a workflow per event writes one note and pushes; a GitHub Actions
   concurrency group keeps one job running and one pending and cancels the pending ones it
   replaces, so their writes never reach the hub (github/gh-aw #61644). memsync needs no group:
   the same jobs run at once.
2. git retry loop: writers at once, each `git push || git pull --no-rebase` at most 3 times, as
   git auto-sync scripts do; a writer that runs out of tries (or meets a conflict) gives up.
3. JSON memory file: writers at once each add their own key to one `memory.json` (read, change,
   write). The git loop meets textual conflicts; memsync merges JSON by structure.
4. the seed-004 overwrite: an agent replaces a 7,285-byte notes file with a 1,509-byte one. With
   last-writer-wins snapshots the original is gone; memsync keeps it in history, flags the shrink
   and restores it byte for byte.
5. two devices, newer file wins: both edit one file offline, then sync, as basic-memory's cloud
   sync resolves by modification time; memsync merges or keeps both sides.
6. snapshot upload: sandboxes at once download the memory as a tarball, add a note, upload a
   tarball; the last upload is the memory (VM0's model).

Results go to bench/results/lost_writes.json; the exit code is 1 if memsync lost a write. Not
part of the test suite (the reliability suite's concurrency tests hold memsync to 0 lost).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
PYTHON = sys.executable


@dataclass
class Row:
    case: str
    system: str
    writes: int
    lost: int
    reported: int
    note: str = ""


# -- environments ------------------------------------------------------------------------------------


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "MEMSYNC_"))}
    env.update(HOME=str(home), MEMSYNC_HOME=str(home / "memsync"), GIT_AUTHOR_NAME="bench",
               GIT_AUTHOR_EMAIL="bench@example.org", GIT_COMMITTER_NAME="bench",
               GIT_COMMITTER_EMAIL="bench@example.org", GIT_CONFIG_NOSYSTEM="1", MEMSYNC_QUIET="1")
    home.mkdir(parents=True, exist_ok=True)
    (home / ".gitconfig").write_text("[gc]\n\tauto = 0\n[init]\n\tdefaultBranch = main\n[pull]\n\trebase = false\n")
    return env


def _sh(cmd: list[str], cwd: Path, env: dict[str, str], check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    if check and done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed in {cwd}: {done.stderr[-1500:]}")
    return done


def _memsync(args: list[str], cwd: Path, env: dict[str, str], check: bool = True) -> subprocess.CompletedProcess[str]:
    return _sh([PYTHON, "-m", "memsync", *args], cwd, env, check)


class Memsync:
    """One memory on the embedded hub, seeded with `files`."""

    def __init__(self, work: Path, files: dict[str, str]) -> None:
        self.work = work
        self.env = _env(work / "home")
        seed = work / "seed"
        seed.mkdir(parents=True)
        for rel, text in files.items():
            (seed / rel).parent.mkdir(parents=True, exist_ok=True)
            (seed / rel).write_text(text)
        _memsync(["init", "--name", "research"], seed, self.env)
        _memsync(["push"], seed, self.env)
        self.hub = work / "home" / "memsync" / "hub.git"

    def run(self, box: Path, run_id: str, agent: str) -> int:
        """One sandbox: `memsync run` with `agent` (Python source) as the command."""
        script = self.work / f"agent-{run_id}.py"
        script.write_text(agent)
        done = _memsync(["run", "--run-id", run_id, "--checkpoint", "0", "--memory", f"research:{box}",
                         "--", PYTHON, str(script)], self.work, self.env, check=False)
        return done.returncode

    def tree(self) -> dict[str, bytes]:
        return _tree(self.hub, "memory/research", self.env)

    def flags(self) -> int:
        log = _sh(["git", "log", "--format=%(trailers:key=Memsync-Flag,valueonly)", "memory/research"],
                  self.hub, self.env).stdout
        return sum(1 for line in log.splitlines() if line.strip())


class GitHub:
    """A bare repository on disk, and clones of it, driven with the git CLI."""

    def __init__(self, work: Path, files: dict[str, str]) -> None:
        self.work = work
        self.env = _env(work / "home")
        self.hub = work / "hub.git"
        _sh(["git", "init", "-q", "--bare", str(self.hub)], work, self.env)
        seed = work / "seed"
        _sh(["git", "init", "-q", "-b", "main", str(seed)], work, self.env)
        for rel, text in files.items():
            (seed / rel).parent.mkdir(parents=True, exist_ok=True)
            (seed / rel).write_text(text)
        _sh(["git", "add", "-A"], seed, self.env)
        _sh(["git", "commit", "-qm", "seed"], seed, self.env)
        _sh(["git", "push", "-q", str(self.hub), "main"], seed, self.env)

    def clone(self, box: Path) -> None:
        _sh(["git", "clone", "-q", str(self.hub), str(box)], self.work, self.env)

    def commit_and_push(self, box: Path, tries: int) -> bool:
        """add/commit, then `push || pull` at most `tries` times: True when the push landed."""
        _sh(["git", "add", "-A"], box, self.env)
        if _sh(["git", "commit", "-qm", "write"], box, self.env, check=False).returncode != 0:
            return True
        for _ in range(tries):
            if _sh(["git", "push", "-q", "origin", "HEAD:main"], box, self.env, check=False).returncode == 0:
                return True
            if _sh(["git", "pull", "-q", "--no-edit", "origin", "main"], box, self.env, check=False).returncode != 0:
                return False  # a conflict: the script stops, the write stays in the sandbox
        return False

    def tree(self) -> dict[str, bytes]:
        return _tree(self.hub, "main", self.env)


def _tree(repo: Path, ref: str, env: dict[str, str]) -> dict[str, bytes]:
    names = _sh(["git", "ls-tree", "-r", "--name-only", ref], repo, env).stdout.splitlines()
    return {n: subprocess.run(["git", "show", f"{ref}:{n}"], cwd=repo, env=env, capture_output=True).stdout
            for n in names}


def _everything(tree: dict[str, bytes]) -> bytes:
    return b"\n".join(tree.values())


def _conflict_copies(tree: dict[str, bytes]) -> int:
    return sum(1 for n in tree if ".conflict" in n)


def _parallel(n: int, job: Callable[[int], object]) -> list[object]:
    with ThreadPoolExecutor(max_workers=n) as pool:
        return list(pool.map(job, range(n)))


NOTE_AGENT = """\
import os, pathlib
mem = pathlib.Path(os.environ["MEMSYNC_MEMORY_DIR"])
(mem / "notes").mkdir(exist_ok=True)
(mem / "notes" / "{key}.md").write_text("{key}\\n")
"""


# -- 1. concurrency group ------------------------------------------------------------------------------


def concurrency_group(root: Path, jobs: int) -> list[Row]:
    """Jobs arrive faster than one finishes. The group runs one and keeps the newest pending; each
    newer arrival cancels the pending job it replaces (cancel-in-progress: false)."""
    rows = []
    gh = GitHub(root / "group-git", {"README.md": "notes\n"})
    ran: list[int] = []
    pending: int | None = None
    for job in range(jobs):  # every arrival lands while job 0 is still running
        if job == 0:
            ran.append(job)
        else:
            pending = job  # the previous pending job, if any, is cancelled here
    if pending is not None:
        ran.append(pending)
    for job in ran:
        box = gh.work / f"job{job}"
        gh.clone(box)
        (box / "notes").mkdir(exist_ok=True)
        (box / "notes" / f"job{job}.md").write_text(f"job{job}\n")
        gh.commit_and_push(box, tries=3)
    everything = _everything(gh.tree())
    lost = sum(1 for j in range(jobs) if f"job{j}\n".encode() not in everything)
    rows.append(Row("1 concurrency group", "git + concurrency group", jobs, lost, 0,
                    f"{jobs - len(ran)} jobs cancelled while pending"))

    ms = Memsync(root / "group-memsync", {"README.md": "notes\n"})
    codes = _parallel(jobs, lambda j: ms.run(ms.work / f"job{j}", f"job{j}", NOTE_AGENT.format(key=f"job{j}")))
    everything = _everything(ms.tree())
    lost = sum(1 for j in range(jobs) if f"job{j}\n".encode() not in everything)
    failed = sum(1 for c in codes if c != 0)
    rows.append(Row("1 concurrency group", "memsync (no group, all at once)", jobs, lost, failed,
                    f"{failed} runs exited non-zero"))
    return rows


# -- 2. git retry loop ---------------------------------------------------------------------------------


def retry_loop(root: Path, writers: int) -> list[Row]:
    gh = GitHub(root / "retry-git", {"README.md": "notes\n"})

    def git_writer(i: int) -> bool:
        box = gh.work / f"w{i}"
        gh.clone(box)
        (box / "notes").mkdir(exist_ok=True)
        (box / "notes" / f"w{i}.md").write_text(f"writer{i}\n")
        return gh.commit_and_push(box, tries=3)

    landed = _parallel(writers, git_writer)
    everything = _everything(gh.tree())
    lost = sum(1 for i in range(writers) if f"writer{i}\n".encode() not in everything)
    rows = [Row("2 git retry loop (3 tries)", "git push || git pull", writers, lost,
                sum(1 for ok in landed if not ok), "give-ups are reported by the script's exit code")]
    ms = Memsync(root / "retry-memsync", {"README.md": "notes\n"})
    codes = _parallel(writers, lambda i: ms.run(ms.work / f"w{i}", f"w{i}", NOTE_AGENT.format(key=f"writer{i}")))
    everything = _everything(ms.tree())
    lost = sum(1 for i in range(writers) if f"writer{i}\n".encode() not in everything)
    rows.append(Row("2 git retry loop (3 tries)", "memsync run", writers, lost, sum(1 for c in codes if c != 0)))
    return rows


# -- 3. one JSON memory file ---------------------------------------------------------------------------

JSON_AGENT = """\
import json, os, pathlib
path = pathlib.Path(os.environ["MEMSYNC_MEMORY_DIR"]) / "memory.json"
data = json.loads(path.read_text())
data["{key}"] = "learned by {key}"
path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\\n")
"""


def json_file(root: Path, writers: int) -> list[Row]:
    seed = {"memory.json": json.dumps({"project": "crdt survey"}, indent=2, sort_keys=True) + "\n"}
    gh = GitHub(root / "json-git", seed)

    def git_writer(i: int) -> bool:
        box = gh.work / f"w{i}"
        gh.clone(box)
        data = json.loads((box / "memory.json").read_text())
        data[f"k{i}"] = f"learned by k{i}"
        (box / "memory.json").write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
        return gh.commit_and_push(box, tries=3)

    landed = _parallel(writers, git_writer)
    final = gh.tree().get("memory.json", b"")
    lost = sum(1 for i in range(writers) if f'"k{i}"'.encode() not in final)
    rows = [Row("3 one JSON file, rewritten", "git push || git pull", writers, lost,
                sum(1 for ok in landed if not ok), "conflicting pulls stop the loop")]
    ms = Memsync(root / "json-memsync", seed)
    codes = _parallel(writers, lambda i: ms.run(ms.work / f"w{i}", f"w{i}", JSON_AGENT.format(key=f"k{i}")))
    tree = ms.tree()
    everything = _everything(tree)
    lost = sum(1 for i in range(writers) if f'"k{i}"'.encode() not in everything)
    try:
        json.loads(tree.get("memory.json", b""))
        valid = "memory.json parses"
    except ValueError:
        valid = "memory.json does NOT parse"
    rows.append(Row("3 one JSON file, rewritten", "memsync run", writers, lost,
                    _conflict_copies(tree) + sum(1 for c in codes if c != 0), valid))
    return rows


# -- 4. the seed-004 overwrite -------------------------------------------------------------------------

ORIGINAL = ("# CRDT notes\n" + "".join(f"- finding {i}: " + "x" * 60 + "\n" for i in range(100)))[:7285]
SHRUNK = "# CRDT notes\n(no notes found, starting over)\n" + "y" * 1450 + "\n"


def overwrite(root: Path) -> list[Row]:
    rows = []
    # last-writer-wins snapshot: the store holds the newest upload only
    store = root / "overwrite-snapshot"
    store.mkdir(parents=True)
    _upload(store, {"crdts.md": ORIGINAL.encode()})
    _upload(store, {"crdts.md": SHRUNK.encode()})
    latest = _download(store)
    rows.append(Row("4 seed-004 overwrite", "snapshot, last writer wins", 1,
                    int(latest.get("crdts.md") != ORIGINAL.encode()), 0, "no history to restore from"))
    ms = Memsync(root / "overwrite-memsync", {"crdts.md": ORIGINAL})
    code = ms.run(ms.work / "box", "agent-run", f"""\
import os, pathlib
(pathlib.Path(os.environ["MEMSYNC_MEMORY_DIR"]) / "crdts.md").write_text({SHRUNK!r})
""")
    flags = ms.flags()
    box = ms.work / "box"
    first = _sh(["git", "rev-list", "--max-parents=0", "HEAD"], box, ms.env).stdout.split()[0]
    _memsync(["restore", "crdts.md", "--at", first[:8]], box, ms.env)
    back = ms.tree().get("crdts.md") == ORIGINAL.encode()
    rows.append(Row("4 seed-004 overwrite", "memsync run, then restore", 1, int(not back), flags,
                    f"run exit {code}; restored byte for byte: {back}"))
    return rows


# -- 5. two devices, newer file wins -------------------------------------------------------------------


def two_devices(root: Path) -> list[Row]:
    rows = []
    base = "# plan\n- a\n- b\n- c\n"
    laptop = base.replace("- a\n", "- a (laptop)\n")
    phone = base.replace("- c\n", "- c (phone)\n")
    # newer-file-wins: both devices edited offline; the later modification time is the one kept
    cloud = root / "devices-cloud"
    cloud.mkdir(parents=True)
    edits = [("laptop", laptop, 1000.0), ("phone", phone, 2000.0)]
    kept = max(edits, key=lambda e: e[2])
    (cloud / "plan.md").write_text(kept[1])
    final = (cloud / "plan.md").read_text()
    lost = sum(1 for name, text, _ in edits if f"({name})" not in final)
    rows.append(Row("5 two devices, one file", "sync by newer mtime", 2, lost, 0, "the older edit is overwritten"))
    ms = Memsync(root / "devices-memsync", {"plan.md": base})
    for name in ("laptop", "phone"):
        _memsync(["clone", "research", name], ms.work, ms.env)
    (ms.work / "laptop" / "plan.md").write_text(laptop)
    (ms.work / "phone" / "plan.md").write_text(phone)
    _memsync(["push"], ms.work / "laptop", ms.env)
    _memsync(["push"], ms.work / "phone", ms.env)
    tree = ms.tree()
    everything = _everything(tree)
    lost = sum(1 for name in ("laptop", "phone") if f"({name})".encode() not in everything)
    rows.append(Row("5 two devices, one file", "memsync push from each", 2, lost, _conflict_copies(tree),
                    "disjoint lines merge three-way"))
    return rows


# -- 6. snapshot upload --------------------------------------------------------------------------------

_upload_lock = threading.Lock()


def _upload(store: Path, files: dict[str, bytes]) -> None:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    with _upload_lock:  # each upload is atomic; the newest is the memory
        tmp = store / f".upload-{threading.get_ident()}"
        tmp.write_bytes(buf.getvalue())
        os.replace(tmp, store / "latest.tar.gz")


def _download(store: Path) -> dict[str, bytes]:
    target = store / "latest.tar.gz"
    if not target.exists():
        return {}
    with tarfile.open(target, "r:gz") as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}  # type: ignore[union-attr]


def snapshots(root: Path, writers: int) -> list[Row]:
    store = root / "snapshot-store"
    store.mkdir(parents=True)
    _upload(store, {"README.md": b"notes\n"})
    barrier = threading.Barrier(writers)

    def sandbox(i: int) -> None:
        files = _download(store)
        barrier.wait()  # the sandboxes run at once: all started from the same snapshot
        files[f"notes/w{i}.md"] = f"writer{i}\n".encode()
        time.sleep(0.01 * i)
        _upload(store, files)

    _parallel(writers, sandbox)
    everything = b"\n".join(_download(store).values())
    lost = sum(1 for i in range(writers) if f"writer{i}\n".encode() not in everything)
    rows = [Row("6 snapshot upload", "tarball, last upload wins", writers, lost, 0)]
    ms = Memsync(root / "snapshot-memsync", {"README.md": "notes\n"})
    codes = _parallel(writers, lambda i: ms.run(ms.work / f"w{i}", f"w{i}", NOTE_AGENT.format(key=f"writer{i}")))
    everything = _everything(ms.tree())
    lost = sum(1 for i in range(writers) if f"writer{i}\n".encode() not in everything)
    rows.append(Row("6 snapshot upload", "memsync run", writers, lost, sum(1 for c in codes if c != 0)))
    return rows


# -- main ----------------------------------------------------------------------------------------------


def run_all(root: Path, writers: int, jobs: int) -> list[Row]:
    rows: list[Row] = []
    for case in (lambda: concurrency_group(root, jobs), lambda: retry_loop(root, writers),
                 lambda: json_file(root, writers), lambda: overwrite(root), lambda: two_devices(root),
                 lambda: snapshots(root, writers)):
        found = case()
        for row in found:
            print(json.dumps(asdict(row)), flush=True)
        rows += found
    return rows


def table(rows: list[Row]) -> str:
    cols = ("case", "system", "writes", "lost", "reported", "note")
    data = [[str(getattr(r, c)) for c in cols] for r in rows]
    widths = [max(len(c), *(len(d[i]) for d in data)) for i, c in enumerate(cols)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(cols, widths, strict=True))]
    lines += ["  ".join(v.ljust(w) for v, w in zip(d, widths, strict=True)).rstrip() for d in data]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--writers", type=int, default=8)
    parser.add_argument("--jobs", type=int, default=12, help="workflow runs in the concurrency-group case")
    parser.add_argument("--out", type=Path, default=HERE / "results" / "lost_writes.json")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="memsync-lost-writes-") as tmp:
        rows = run_all(Path(tmp), args.writers, args.jobs)
    print()
    print(table(rows))
    memsync_lost = sum(r.lost for r in rows if r.system.startswith("memsync"))
    print(f"\nwrites lost by memsync: {memsync_lost}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"writers": args.writers, "jobs": args.jobs,
                                    "rows": [asdict(r) for r in rows]}, indent=2) + "\n")
    print(f"results: {args.out}")
    return 0 if memsync_lost == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
