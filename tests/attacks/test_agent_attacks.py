"""What an agent can do with files to a memory, and what memsync does about it: read-only mounts,
protect policies, and restore where the agent left symlinks. Each test is an attack that worked
on earlier versions; `figures` counts them for the reliability report."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import Cli, git, hub_path, hub_tree, memsync_cmd, write
from tests.helpers.figures import Figures, figures

__all__ = ["figures"]

pytestmark = pytest.mark.attack


def _attack(figures: Figures, stopped: bool) -> None:
    figures.add("agent attacks")
    if stopped:
        figures.add("agent attacks stopped")


def _rev(ref: str = "memory/research") -> str:
    return git("rev-parse", ref, cwd=hub_path()).strip()


# -- restore ---------------------------------------------------------------------------------------

def test_restore_never_writes_through_a_symlinked_folder(memory: Path, tmp_path: Path, cli: Cli,
                                                         figures: Figures) -> None:
    write(memory, "notes/a.md", "a\n")
    write(memory, "notes/sub/b.md", "b\n")
    assert cli("push", cwd=memory).code == 0
    rev = _rev()[:8]
    outside = tmp_path / "outside"
    outside.mkdir()
    for f in (memory / "notes" / "sub" / "b.md", memory / "notes" / "a.md"):
        f.unlink()
    (memory / "notes" / "sub").rmdir()
    (memory / "notes").rmdir()
    (memory / "notes").symlink_to(outside)  # what an agent left behind, pushed by its run
    assert cli("push", cwd=memory).code == 0
    for target in ("notes/sub/b.md", "notes/a.md", "notes"):
        result = cli("restore", target, "--at", rev, cwd=memory)
        stopped = result.code == 7 and not any(outside.iterdir())
        _attack(figures, stopped)
        assert list(outside.iterdir()) == [], result.err  # nothing created outside, not even a folder
        assert result.code == 7, result.err
        assert "error: refusing to write notes/" in result.err and "notes is a symlink" in result.err
        assert "hint: remove the symlink notes" in result.err
    assert (memory / "notes").is_symlink()


# -- read-only memories ----------------------------------------------------------------------------

VANDAL = r"""
import json, os, pathlib, shutil, stat, subprocess
ro = pathlib.Path(os.environ["MEMSYNC_MEMORY_REF_MEM_DIR"])
seen = {"root writable": bool(ro.stat().st_mode & 0o222), "docs writable": bool((ro / "docs").stat().st_mode & 0o222),
        "fact writable": bool((ro / "fact.md").stat().st_mode & 0o222)}
def attempt(name, action):
    try:
        action()
        seen[name] = "done"
    except OSError as exc:
        seen[name] = "denied " + type(exc).__name__
attempt("modify", lambda: (ro / "fact.md").write_text("vandalised\n"))
attempt("add", lambda: (ro / "new.md").write_text("new\n"))
attempt("delete", lambda: (ro / "docs" / "b.md").unlink())
attempt("new folder", lambda: (ro / "newdir" / "deep").mkdir(parents=True))
attempt("new file in new folder", lambda: (ro / "newdir" / "deep" / "x.md").write_text("x\n"))
attempt("remove folder", lambda: shutil.rmtree(ro / "keep"))
attempt("chmod -x", lambda: os.chmod(ro / "tool.sh", 0o600))
attempt("chmod 777", lambda: os.chmod(ro / "docs" / "a.md", 0o777))
def to_symlink():
    (ro / "swap.md").unlink()
    (ro / "swap.md").symlink_to("/etc/passwd")
attempt("file to symlink", to_symlink)
def to_dir():
    (ro / "dirfile.md").unlink()
    (ro / "dirfile.md").mkdir()
    (ro / "dirfile.md" / "inner.md").write_text("inner\n")
attempt("file to folder", to_dir)
def folder_to_symlink():
    shutil.rmtree(ro / "sub")
    (ro / "sub").symlink_to(os.environ["OUTSIDE_DIR"])
attempt("folder to symlink", folder_to_symlink)
def hide():
    with open(ro / ".git" / "info" / "exclude", "a") as fh:
        fh.write("*.hidden\n")
    (ro / "notes.hidden").write_text("hidden from git status\n")
attempt("hidden by exclude", hide)
def self_ignoring():
    (ro / "quiet").mkdir()
    (ro / "quiet" / ".gitignore").write_text("*\n")
    (ro / "quiet" / "q.md").write_text("q\n")
attempt("self-ignoring folder", self_ignoring)
def hook():
    (ro / ".git" / "hooks" / "post-checkout").write_text("#!/bin/sh\necho pwned\n")
attempt("git hook", hook)
def hooks_elsewhere():
    os.rename(ro / ".git" / "info", ro / ".git" / "info-moved")
    os.symlink(os.environ["OUTSIDE_DIR"], ro / ".git" / "info")
attempt("info folder to symlink", hooks_elsewhere)
def config():
    with open(ro / ".vm0" / "storage.yaml", "a") as fh:
        fh.write("remote: /tmp/elsewhere.git\n")
attempt("storage.yaml", config)
env = dict(os.environ, GIT_AUTHOR_NAME="a", GIT_AUTHOR_EMAIL="a@x", GIT_COMMITTER_NAME="a", GIT_COMMITTER_EMAIL="a@x")
subprocess.run(["git", "add", "-A"], cwd=ro, env=env, capture_output=True)
done = subprocess.run(["git", "commit", "-qm", "agent work"], cwd=ro, env=env, capture_output=True)
seen["git commit"] = done.returncode
print(json.dumps(seen))
"""


def _seed_reference(tmp_path: Path, outside_file: Path) -> dict[str, bytes]:
    src = tmp_path / "src"
    src.mkdir()
    assert memsync_cmd("init", "--name", "ref-mem", cwd=src).returncode == 0
    for rel, text in (("fact.md", "fact\n"), ("docs/a.md", "a\n"), ("docs/b.md", "b\n"), ("keep/k.md", "k\n"),
                      ("swap.md", "swap\n"), ("dirfile.md", "dirfile\n"), ("sub/s.md", "s\n"),
                      ("tool.sh", "#!/bin/sh\n")):
        write(src, rel, text)
    (src / "tool.sh").chmod(0o755)
    (src / "link").symlink_to(outside_file)  # a symlink out of the memory: its target's mode must never change
    assert memsync_cmd("push", cwd=src).returncode == 0
    return hub_tree("memory/ref-mem")


def _tree_on_disk(root: Path) -> dict[str, bytes]:
    found: dict[str, bytes] = {}
    for here, dirs, files in os.walk(root):
        if Path(here) == root:
            dirs[:] = [d for d in dirs if d not in (".git", ".vm0")]
        for name in files + [d for d in dirs if (Path(here) / d).is_symlink()]:
            path = Path(here) / name
            rel = path.relative_to(root).as_posix()
            found[rel] = os.readlink(path).encode() if path.is_symlink() else path.read_bytes()
    return found


def test_read_only_memory_is_put_back_whatever_the_command_did(tmp_path: Path, figures: Figures) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    outside_file = outside / "target.txt"
    outside_file.write_text("outside\n")
    outside_file.chmod(0o640)
    pulled = _seed_reference(tmp_path, outside_file)
    work = tmp_path / "work"
    work.mkdir()
    before_hub = _rev("memory/ref-mem")
    env = dict(os.environ, OUTSIDE_DIR=str(outside))
    proc = memsync_cmd("run", "--memory", "ref-mem:ref:ro", "--run-id", "vandal", "--", sys.executable, "-c", VANDAL,
                       cwd=work, env=env)
    seen = json.loads(proc.stdout.splitlines()[-1])
    ro = work / "ref"
    on_disk = _tree_on_disk(ro)
    checks = {
        "exit 9, reported": proc.returncode == 9 and "read-only memory 'ref-mem' was changed" in proc.stderr,
        "content put back": on_disk == pulled,
        "nothing left to commit": git("status", "--porcelain", "--ignored=no", cwd=ro) == "",
        "commit dropped": git("rev-parse", "HEAD", cwd=ro).strip() == before_hub,
        "modes put back": (ro / "tool.sh").stat().st_mode & 0o777 == 0o755
        and (ro / "docs" / "a.md").stat().st_mode & 0o777 == 0o644,
        "folders writable again": all((ro / d).is_dir() and os.stat(ro / d).st_mode & 0o200
                                      for d in (".", "docs", "keep", "sub")),
        "outside untouched": stat.S_IMODE(outside_file.stat().st_mode) == 0o640 and sorted(
            p.name for p in outside.iterdir()) == ["target.txt"],
        "hub unchanged": _rev("memory/ref-mem") == before_hub,
        "hidden files moved out": not (ro / "notes.hidden").exists() and not (ro / "quiet").exists(),
        "git's and memsync's own files put back": not (ro / ".git" / "hooks" / "post-checkout").exists()
        and "hidden" not in (ro / ".git" / "info" / "exclude").read_text()
        and not (ro / ".git" / "info").is_symlink()
        and "elsewhere" not in (ro / ".vm0" / "storage.yaml").read_text(),
    }
    for ok in checks.values():
        _attack(figures, ok)
    assert checks == dict.fromkeys(checks, True), (checks, seen, proc.stderr)
    assert not (seen["root writable"] or seen["docs writable"] or seen["fact writable"])  # protected during the run
    kept = Path(os.environ["MEMSYNC_HOME"]) / "runs" / "vandal" / "ro" / "ref-mem"
    assert (kept / "fact.md").read_text() == "vandalised\n" and (kept / "new.md").read_text() == "new\n"
    assert (kept / "newdir" / "deep" / "x.md").read_text() == "x\n"
    assert (kept / "dirfile.md" / "inner.md").read_text() == "inner\n" and (kept / "swap.md").is_symlink()
    assert f"kept in {kept}" in proc.stderr
    assert (kept / "quiet" / "q.md").exists() and (kept / "notes.hidden").exists()
    assert (kept / ".git" / "hooks" / "post-checkout").exists() and (kept / ".vm0" / "storage.yaml").exists()
    # no later command commits any of it
    assert memsync_cmd("push", cwd=ro).returncode == 0
    assert _rev("memory/ref-mem") == before_hub


def test_a_killed_run_is_undone_by_the_next_command(tmp_path: Path, figures: Figures) -> None:
    outside_file = tmp_path / "target.txt"
    outside_file.write_text("outside\n")
    pulled = _seed_reference(tmp_path, outside_file)
    work = tmp_path / "work"
    work.mkdir()
    ready = tmp_path / "ready"
    script = ("import os, pathlib, time\n"
              "ro = pathlib.Path(os.environ['MEMSYNC_MEMORY_REF_MEM_DIR'])\n"
              "(ro / 'fact.md').write_text('vandalised\\n')\n"
              "(ro / 'new.md').write_text('new\\n')\n"
              f"pathlib.Path({str(ready)!r}).write_text('x')\n"
              "time.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, "-m", "memsync", "run", "--memory", "ref-mem:ref:ro", "--run-id", "killed",
                             "--", sys.executable, "-c", script], cwd=work, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not ready.exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        assert ready.exists()
        proc.kill()  # memsync, before it could undo anything
        proc.wait()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    ro = work / "ref"
    assert not os.stat(ro).st_mode & 0o222 or os.geteuid() == 0  # left protected by the killed run
    status = memsync_cmd("status", cwd=ro)
    ok = (status.returncode == 0 and _tree_on_disk(ro) == pulled and os.stat(ro).st_mode & 0o200 != 0
          and os.stat(ro / "docs").st_mode & 0o200 != 0)
    _attack(figures, ok)
    assert status.returncode == 0, status.stderr
    assert _tree_on_disk(ro) == pulled
    assert os.stat(ro).st_mode & 0o200 and os.stat(ro / "docs").st_mode & 0o200
    kept = Path(os.environ["MEMSYNC_HOME"]) / "runs" / "killed" / "ro" / "ref-mem"
    assert (kept / "new.md").read_text() == "new\n" and (kept / "fact.md").read_text() == "vandalised\n"
    assert not (ro / ".git" / "memsync-ro-guard.json").exists()


# -- protect policies ------------------------------------------------------------------------------

def _protect(memory: Path, cli: Cli, rules: str, files: dict[str, str]) -> None:
    for rel, text in files.items():
        write(memory, rel, text)
    assert cli("push", cwd=memory).code == 0
    write(memory, ".vm0/storage.yaml", f"name: research\ntype: memory\nprotect:\n{rules}")


def _agent(memory: Path, run_id: str, code: str) -> subprocess.CompletedProcess[str]:
    return memsync_cmd("run", "--run-id", run_id, "--", sys.executable, "-c", code, cwd=memory,
                       env=dict(os.environ, OUTSIDE_DIR=str(memory.parent / "outside")))


def test_a_conflict_shaped_name_is_no_way_into_a_protected_path(memory: Path, cli: Cli,
                                                                  figures: Figures) -> None:
    _protect(memory, cli, '  - {path: "reference/**", mode: read-only}\n', {"reference/facts.md": "fact\n"})
    shaped = "reference/facts.conflict-x-20260101T000000Z.md"
    proc = _agent(memory, "shaped", f"open({shaped!r}, 'w').write('planted\\n')")
    tree = hub_tree()
    stopped = shaped not in tree and f"policy: {shaped}: read-only: file added" in proc.stderr
    _attack(figures, stopped)
    assert shaped not in tree, proc.stderr
    assert f"policy: {shaped}: read-only: file added" in proc.stderr
    assert f"Memsync-Policy: {shaped}: read-only: file added" in git("log", "-1", "--format=%B", "memory/research",
                                                                       cwd=hub_path())


def test_a_protected_folder_replaced_by_a_symlink_or_a_file(memory: Path, cli: Cli,
                                                            figures: Figures) -> None:
    outside = memory.parent / "outside"
    outside.mkdir()
    _protect(memory, cli, '  - {path: "reference/", mode: read-only}\n  - {path: "logs/", mode: append-only}\n',
             {"reference/a.md": "a\n", "reference/deep/b.md": "b\n", "logs/l.md": "l\n"})
    proc = _agent(memory, "swapper", "import os, shutil\n"
                  "shutil.rmtree('reference'); os.symlink(os.environ['OUTSIDE_DIR'], 'reference')\n")
    second = _agent(memory, "filer",
                    "import shutil\nshutil.rmtree('logs'); open('logs', 'w').write('not a folder\\n')\n")
    third = _agent(memory, "folderer", "import os\nos.remove('reference/a.md'); os.makedirs('reference/a.md')\n"
                   "open('reference/a.md/x.md', 'w').write('x\\n')\n")
    victim = memory.parent / "victim.txt"
    victim.write_text("victim\n")
    fourth = _agent(memory, "linker", f"import os\nos.remove('reference/a.md'); os.symlink({str(victim)!r}, "
                    "'reference/a.md')\n")
    tree = hub_tree()
    checks = {
        "nothing written outside": list(outside.iterdir()) == [] and victim.read_text() == "victim\n",
        "file to symlink refused": tree.get("reference/a.md") == b"a\n"
        and not (memory / "reference/a.md").is_symlink(),
        "folder swap refused": tree.get("reference/a.md") == b"a\n" and (memory / "reference" / "a.md").is_file()
        and any(p.startswith("reference/a.conflict-folderer-") and p.endswith(".md/x.md") for p in tree),
        "symlink swap refused": tree.get("reference/a.md") == b"a\n" and tree.get("reference/deep/b.md") == b"b\n"
        and "reference" not in tree and (memory / "reference").is_dir() and not (memory / "reference").is_symlink(),
        "file swap refused": tree.get("logs/l.md") == b"l\n" and "logs" not in tree and (memory / "logs").is_dir(),
    }
    for ok in checks.values():
        _attack(figures, ok)
    assert checks == dict.fromkeys(checks, True), (checks, proc.stderr, second.stderr, third.stderr, fourth.stderr,
                                                   sorted(tree))
    assert (memory / "reference" / "a.md").read_text() == "a\n" and (memory / "logs" / "l.md").read_text() == "l\n"
    assert "policy: reference: read-only: protected folder replaced by a symlink" in proc.stderr
    assert "policy: reference/a.md: read-only: file deleted" in proc.stderr
    assert "policy: logs: append-only: protected folder replaced by a file" in second.stderr
    kept_link = [p for p in tree if p.startswith("reference.conflict-swapper-")]
    kept_file = [p for p in tree if p.startswith("logs.conflict-filer-")]
    assert len(kept_link) == 1 and tree[kept_link[0]] == str(outside).encode()  # kept, as the symlink it was
    assert (memory / kept_link[0]).is_symlink()
    assert len(kept_file) == 1 and tree[kept_file[0]] == b"not a folder\n"
    assert git("status", "--porcelain", cwd=memory) == ""


def test_the_operator_seeds_a_read_only_path_once(memory: Path, cli: Cli) -> None:
    write(memory, ".vm0/storage.yaml", 'name: research\ntype: memory\nprotect:\n'
          '  - {path: "reference/**", mode: read-only}\n  - {path: "fresh/**", mode: read-only}\n')
    write(memory, "reference/facts.md", "fact\n")
    first = cli("push", cwd=memory)
    assert first.code == 0 and "policy" not in first.err, first.err
    assert hub_tree()["reference/facts.md"] == b"fact\n"
    write(memory, "reference/more.md", "more\n")
    second = cli("push", cwd=memory)
    assert "policy: reference/more.md: read-only: file added" in second.err
    assert "reference/more.md" not in hub_tree()
    proc = _agent(memory, "seeder", "import os\nos.makedirs('fresh')\nopen('fresh/x.md', 'w').write('x\\n')\n")
    assert "policy: fresh/x.md: read-only: file added" in proc.stderr  # a run never seeds
    assert "fresh/x.md" not in hub_tree()


def _snapshot(root: Path) -> dict[str, tuple[bytes, int]]:
    return {p.relative_to(root).as_posix(): (b"" if p.is_dir() else p.read_bytes(), p.stat().st_mode)
            for p in root.rglob("*")}


def test_a_read_only_memory_replaced_by_a_symlink_is_not_followed(tmp_path: Path, figures: Figures) -> None:
    outside_file = tmp_path / "target.txt"
    outside_file.write_text("outside\n")
    _seed_reference(tmp_path, outside_file)
    decoy = tmp_path / "decoy"
    write(decoy, "fact.md", "decoy\n").chmod(0o444)
    write(decoy, "docs/a.md", "decoy\n").chmod(0o444)
    before = _snapshot(decoy)
    work = tmp_path / "work"
    work.mkdir()
    script = ("import os\n"
              "os.rename('ref', 'ref-moved')\n"
              f"os.symlink({str(decoy)!r}, 'ref')\n")
    proc = memsync_cmd("run", "--memory", "ref-mem:ref:ro", "--", sys.executable, "-c", script, cwd=work)
    after = _snapshot(decoy)
    _attack(figures, after == before)
    assert after == before, proc.stderr
    assert proc.returncode == 9, proc.stderr
    assert "is no longer the memory's folder (replaced during the run)" in proc.stderr


def test_the_operators_own_uncommitted_edit_in_a_read_only_memory_is_kept(tmp_path: Path) -> None:
    outside_file = tmp_path / "target.txt"
    outside_file.write_text("outside\n")
    _seed_reference(tmp_path, outside_file)
    work = tmp_path / "work"
    work.mkdir()
    assert memsync_cmd("run", "--memory", "ref-mem:ref:ro", "--", "true", cwd=work).returncode == 0
    (work / "ref" / "fact.md").write_text("the operator's edit\n")
    quiet = memsync_cmd("run", "--memory", "ref-mem:ref:ro", "--run-id", "quiet", "--", "true", cwd=work)
    assert quiet.returncode == 0 and "was changed" not in quiet.stderr, quiet.stderr
    assert not (Path(os.environ["MEMSYNC_HOME"]) / "runs" / "quiet").exists()  # nothing kept, nothing left
    assert (work / "ref" / "fact.md").read_text() == "the operator's edit\n"
    proc = memsync_cmd("run", "--memory", "ref-mem:ref:ro", "--run-id", "over-edit", "--", sys.executable, "-c",
                       "import os; open(os.environ['MEMSYNC_MEMORY_DIR'] + '/fact.md', 'w').write('agent\\n')",
                       cwd=work)
    assert proc.returncode == 9 and "fact.md" in proc.stderr
    assert (work / "ref" / "fact.md").read_text() == "the operator's edit\n"  # as the run found it, not as pulled
    kept = Path(os.environ["MEMSYNC_HOME"]) / "runs" / "over-edit" / "ro" / "ref-mem"
    assert (kept / "fact.md").read_text() == "agent\n"
