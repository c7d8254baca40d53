"""Nothing from a hub can make memsync write outside the memory directory, and read-only
memories never change on the hub.

Malicious versions are written straight into the embedded hub as raw git objects
(`git hash-object --literally`), as a hostile or compromised hub could serve them: tree entries
named `..`, `.git`, `.GIT`, `../../x`, an absolute path, and a tree holding both a symlink `a`
and a directory `a/` (the classic "symlink, then a file under it" attack).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pygit2
import pytest
from pygit2.enums import FileMode

from tests.conftest import git, hub_path, hub_tree, memsync_cmd, write
from tests.helpers.figures import Figures, figures

pytestmark = pytest.mark.attack
__all__ = ["figures"]


def _object(kind: str, data: bytes) -> str:
    return subprocess.run(["git", "hash-object", "-t", kind, "--literally", "-w", "--stdin"], cwd=hub_path(),
                          input=data, capture_output=True, check=True).stdout.decode().strip()


def _tree(entries: list[tuple[str, bytes, str]]) -> str:
    return _object("tree", b"".join(mode.encode() + b" " + name + b"\0" + bytes.fromhex(oid)
                                    for mode, name, oid in entries))


def _deep_tree(depth: int, blob: str) -> str:
    """A chain of `depth` directories `d/d/d/...` with one file at the bottom (pygit2 writes
    1,500 trees in milliseconds)."""
    repo = pygit2.Repository(str(hub_path()))
    leaf = repo.TreeBuilder()
    leaf.insert("x", pygit2.Oid(hex=blob), FileMode.BLOB)
    oid = leaf.write()
    for _ in range(depth - 1):
        builder = repo.TreeBuilder()
        builder.insert("d", oid, FileMode.TREE)
        oid = builder.write()
    return str(oid)


def evil_tree(kind: str, outside: Path) -> str:
    blob = _object("blob", b"written by the hub\n")
    inner = _tree([("100644", b"x", blob)])
    link = _object("blob", str(outside).encode())
    redirect = _object("blob", b"name: research\nremote: http://127.0.0.1:9/evil.git\nsecrets: off\n")
    config_dir = _tree([("100644", b"storage.yaml", redirect)])
    return {
        "dotdot": lambda: _tree([("40000", b"..", inner)]),
        "dotgit": lambda: _tree([("40000", b".git", _tree([("100644", b"config", blob)]))]),
        "dotgit-upper": lambda: _tree([("40000", b".GIT", _tree([("100644", b"config", blob)]))]),
        "dotgit-ntfs": lambda: _tree([("40000", b".git. ", _tree([("100644", b"config", blob)]))]),
        "dotgit-hfs": lambda: _tree([("40000", ".g\u200cit".encode(), _tree([("100644", b"config", blob)]))]),
        "dotgit-nested": lambda: _tree([("40000", b"notes", _tree([("40000", b".git", inner)]))]),
        "slashes": lambda: _tree([("100644", b"../../escape", blob)]),
        "absolute": lambda: _tree([("100644", str(outside / "abs").encode(), blob)]),
        "symlink-then-file": lambda: _tree([("120000", b"a", link), ("40000", b"a", inner)]),
        "dotvm0": lambda: _tree([("40000", b".vm0", config_dir)]),
        "dotvm0-upper": lambda: _tree([("40000", b".VM0", config_dir)]),
        "dotvm0-file": lambda: _tree([("100644", b".Vm0", redirect)]),
        "dotvm0-symlink": lambda: _tree([("120000", b".vm0", link)]),
        "dotvm0-nested": lambda: _tree([("40000", b"notes", _tree([("40000", b"deeper", _tree(
            [("40000", b".vm0", config_dir)]))]))]),
        "dotvm0-ntfs": lambda: _tree([("40000", b".vm0 .", config_dir)]),
        "dotvm0-shortname": lambda: _tree([("40000", b"VM0~1", config_dir)]),
        "dotvm0-stream": lambda: _tree([("100644", b".vm0::$DATA", redirect)]),
        "dotvm0-hfs": lambda: _tree([("40000", ".v\u200dm0".encode(), config_dir)]),
        "deep-tree": lambda: _deep_tree(1500, blob),
    }[kind]()


def _commit(tree: str, parent: str | None, ref: str) -> str:
    args = ["-c", "user.name=evil", "-c", "user.email=evil@hub", "commit-tree", tree, "-m", "evil version"]
    args += ["-p", parent] if parent else []
    oid = git(*args, cwd=hub_path()).strip()
    git("update-ref", ref, oid, cwd=hub_path())
    return oid


KINDS = ["dotdot", "dotgit", "dotgit-upper", "dotgit-ntfs", "dotgit-hfs", "dotgit-nested", "slashes", "absolute",
         "symlink-then-file", "dotvm0", "dotvm0-upper", "dotvm0-file", "dotvm0-symlink", "dotvm0-nested",
         "dotvm0-ntfs", "dotvm0-shortname", "dotvm0-stream", "dotvm0-hfs", "deep-tree"]


def _refusal_text(kind: str) -> str:
    if kind.startswith("dotvm0"):
        return "memsync's local configuration (.vm0 never comes from a hub)"
    if kind == "deep-tree":
        return "its tree is deeper than 256 directories"
    return "outside the memory"


@pytest.mark.parametrize("kind", KINDS)
def test_malicious_hub_cannot_write_outside(kind: str, memory: Path, tmp_path: Path, figures: Figures) -> None:
    figures.add("security attacks")
    outside = tmp_path / "outside"
    outside.mkdir()
    sandbox = tmp_path / "sandbox"
    sandbox.mkdir()
    config_before = (memory / ".git" / "config").read_bytes()
    storage_before = (memory / ".vm0" / "storage.yaml").read_bytes()
    head_before = git("rev-parse", "HEAD", cwd=memory).strip()
    # 1. a clone of an evil memory
    _commit(evil_tree(kind, outside), None, "refs/heads/memory/evil-mem")
    clone = memsync_cmd("clone", "evil-mem", cwd=sandbox)
    assert clone.returncode == 7, clone.stderr
    assert clone.stderr.startswith("error: ") and "hint: " in clone.stderr and "Traceback" not in clone.stderr
    assert list(sandbox.iterdir()) == [], "no half-made clone left"
    # 2. an evil version on top of a memory someone already has: pull refuses it
    _commit(evil_tree(kind, outside), head_before, "refs/heads/memory/research")
    pull = memsync_cmd("pull", cwd=memory)
    assert pull.returncode == 7, pull.stderr
    assert "Traceback" not in pull.stderr
    if kind != "symlink-then-file":
        assert "refused version" in pull.stderr and _refusal_text(kind) in pull.stderr, pull.stderr
        assert "of memory 'research'" in pull.stderr and "hint: " in pull.stderr
    # nothing written outside the memory, into its .git, or above it
    assert list(outside.iterdir()) == []
    assert not (tmp_path / "escape").exists() and not (tmp_path.parent / "escape").exists()
    assert (memory / ".git" / "config").read_bytes() == config_before
    assert git("rev-parse", "HEAD", cwd=memory).strip() == head_before, "the branch did not move"
    assert (memory / "summary.md").read_text() == "# Summary\n\nfirst line\n"
    assert git("diff", "--name-only", "HEAD", cwd=memory) == "", "no tracked file removed or changed"
    assert git("diff", "--cached", "--name-only", cwd=memory) == "", "the index still matches HEAD"
    assert (memory / ".vm0" / "storage.yaml").read_bytes() == storage_before
    assert sorted(p.name for p in memory.iterdir()) == [".git", ".vm0", "runs", "summary.md"]
    figures.add("security attacks refused")


def test_symlink_in_a_pulled_memory_cannot_redirect_writes(memory: Path, tmp_path: Path, figures: Figures) -> None:
    """Version 1 has `notes -> <outside>`; version 2 replaces it with a directory `notes/`. A
    memory that has version 1 checked out pulls version 2: the link is replaced, never followed."""
    figures.add("security attacks")
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(outside, memory / "notes")
    assert memsync_cmd("push", cwd=memory).returncode == 0
    other = tmp_path / "other"
    assert memsync_cmd("clone", "research", str(other), cwd=tmp_path).returncode == 0
    assert os.readlink(other / "notes") == str(outside)
    (memory / "notes").unlink()
    write(memory, "notes/x.md", "inside the memory\n")
    write(memory, "notes/.conflict-bait.md", "more\n")
    assert memsync_cmd("push", cwd=memory).returncode == 0
    pull = memsync_cmd("pull", cwd=other)
    assert pull.returncode == 0, pull.stderr
    assert not (other / "notes").is_symlink() and (other / "notes" / "x.md").read_text() == "inside the memory\n"
    assert list(outside.iterdir()) == []
    # a run in the clone writes through its own `notes/` only
    script = "import pathlib; pathlib.Path('notes/y.md').write_text('run\\n')"
    run = memsync_cmd("run", "--", sys.executable, "-c", script, cwd=other)
    assert run.returncode == 0, run.stderr
    assert list(outside.iterdir()) == [] and hub_tree()["notes/y.md"] == b"run\n"
    figures.add("security attacks refused")


def test_symlink_committed_by_an_agent_is_stored_as_a_link(memory: Path, tmp_path: Path,
                                                          figures: Figures) -> None:
    """A link to a secret outside the memory is committed as a link: the target's bytes never
    reach the hub."""
    figures.add("security attacks")
    secret = tmp_path / "secret.txt"
    secret.write_text("do not upload\n")
    os.symlink(secret, memory / "innocent.md")
    assert memsync_cmd("push", cwd=memory).returncode == 0
    assert hub_tree()["innocent.md"] == str(secret).encode()
    everything = subprocess.run(["git", "cat-file", "--batch-all-objects", "--batch"], cwd=hub_path(),
                                capture_output=True, check=True).stdout
    assert b"do not upload" not in everything
    figures.add("security attacks refused")


def test_read_only_memory_stays_unchanged_on_the_hub(memory: Path, tmp_path: Path, figures: Figures) -> None:
    figures.add("security attacks")
    before = git("rev-parse", "memory/research", cwd=hub_path()).strip()
    history = git("rev-list", "--all", cwd=hub_path())
    work = tmp_path / "work"
    work.mkdir()
    script = ("import os, pathlib, shutil, time\n"
              "ro = pathlib.Path(os.environ['MEMSYNC_MEMORY_RESEARCH_DIR'])\n"
              "for action in (lambda: (ro / 'summary.md').write_text('vandalised\\n'),\n"
              "               lambda: (ro / 'new.md').write_text('new\\n'),\n"
              "               lambda: shutil.rmtree(ro / 'runs')):\n"
              "    try:\n"
              "        action()\n"
              "    except PermissionError:\n"
              "        pass\n"
              "time.sleep(2.5)\n")  # long enough for checkpoints (every 1 s) to happen
    run = memsync_cmd("run", "--checkpoint", "1", "--memory", f"research:{memory}:ro", "--",
                      sys.executable, "-c", script, cwd=work, env=dict(os.environ, MEMSYNC_QUIET="0.3"))
    assert run.returncode == 9, run.stderr  # the command changed a read-only memory: undone, exit 9
    assert "read-only memory 'research' was changed during the run (not saved, not pushed)" in run.stderr
    assert git("status", "--porcelain", cwd=memory) == ""  # put back as it was
    assert git("rev-parse", "memory/research", cwd=hub_path()).strip() == before
    assert git("rev-list", "--all", cwd=hub_path()) == history, "no new object reachable on the hub"
    # the next writable run does not push the vandalism either: the local changes stay local
    assert git("rev-parse", "HEAD", cwd=memory).strip() == before
    figures.add("security attacks refused")
