"""What a hub version's tree can do to a clone (docs/SECURITY.md, "What a hub version may contain"
and "Limits on what a hub can make memsync do").

Hostile versions are written straight into the hub's object database, as anyone with push
access to the hub could: a `.vm0/storage.yaml` that redirects the memory's remote or turns its
secret scan off, a blob over max_file_size, a tree 1,500 directories deep.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pygit2
import pytest
from pygit2.enums import FileMode

from tests.conftest import Cli, git, hub_path, hub_tree, memsync_cmd, write
from tests.helpers.figures import Figures, figures
from tests.helpers.servers import HttpGitServer

pytestmark = pytest.mark.attack
__all__ = ["figures"]


def hub_version(files: dict[str, bytes | None], branch: str = "memory/research", hub: Path | None = None,
                message: str = "a hub version") -> str:
    """Commit `files` (None: remove) on top of `branch` directly in the hub; returns the id."""
    repo = pygit2.Repository(str(hub or hub_path()))
    ref = f"refs/heads/{branch}"
    parent = repo.references[ref].target if ref in repo.references else None
    index = pygit2.Index()
    if parent is not None:
        index.read_tree(repo[parent].peel(pygit2.Commit).tree)
    for path, data in files.items():
        if data is None:
            index.remove(path)
        else:
            index.add(pygit2.IndexEntry(path, repo.create_blob(data), FileMode.BLOB))
    tree = index.write_tree(repo)
    who = pygit2.Signature("someone", "someone@hub")
    oid = repo.create_commit(ref, who, who, message, tree, [parent] if parent is not None else [])
    return str(oid)


def deep_version(depth: int, branch: str) -> str:
    repo = pygit2.Repository(str(hub_path()))
    builder = repo.TreeBuilder()
    builder.insert("x", repo.create_blob(b"at the bottom\n"), FileMode.BLOB)
    oid = builder.write()
    for _ in range(depth - 1):
        builder = repo.TreeBuilder()
        builder.insert("d", oid, FileMode.TREE)
        oid = builder.write()
    who = pygit2.Signature("someone", "someone@hub")
    return str(repo.create_commit(f"refs/heads/{branch}", who, who, "deep", oid, []))


# -- .vm0 never comes from the hub ----------------------------------------------------------------
@pytest.mark.server
def test_hub_cannot_redirect_the_remote_to_steal_the_token(memory: Path, tmp_path: Path,
                                                           http_server: HttpGitServer, figures: Figures) -> None:
    """A version carrying `.vm0/storage.yaml` with another `remote:` used to replace the local
    one, so the next run sent MEMSYNC_TOKEN to the attacker's server."""
    figures.add("security attacks")
    evil = http_server.url("evil.git")
    hub_version({".vm0/storage.yaml": f"name: research\nremote: {evil}\n".encode()})
    env = dict(os.environ, MEMSYNC_TOKEN="the-users-token-123", MEMSYNC_USER="operator")
    work = tmp_path / "work"
    work.mkdir()
    first, second = (memsync_cmd("run", "--memory", f"research:{memory}", "--", sys.executable, "-c", "pass",
                                 cwd=work, env=env) for _ in range(2))
    sent = [r.header("Authorization") for r in http_server.requests]
    assert not any(sent), f"the user's token went to the server the hub named: {sent}"
    assert http_server.requests == [], "nothing at all went there"
    assert first.returncode == 7 and second.returncode == 7, first.stderr + second.stderr
    assert first.stderr.startswith("error: refused version") and "it holds '.vm0'" in first.stderr
    assert "memory 'research'" in first.stderr and "hint: " in first.stderr
    assert "evil" not in (memory / ".vm0" / "storage.yaml").read_text()
    figures.add("security attacks refused")


def test_hub_cannot_turn_the_secret_scan_off(memory: Path, cli: Cli, figures: Figures) -> None:
    figures.add("security attacks")
    (memory / ".vm0" / "storage.yaml").write_text("name: research\nsecrets: block\n")
    hub_version({".vm0/storage.yaml": b"name: research\nsecrets: off\n", "new.md": b"from the hub\n"})
    r = cli("pull", cwd=memory)
    assert r.code == 7 and "it holds '.vm0'" in r.err and "hint: " in r.err
    assert (memory / ".vm0" / "storage.yaml").read_text() == "name: research\nsecrets: block\n"
    assert not (memory / "new.md").exists(), "nothing of the refused version was written"
    write(memory, "notes.md", "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n")
    push = cli("push", cwd=memory)
    assert push.code != 0 and "notes.md" not in hub_tree()  # still blocked: the policy is the user's
    figures.add("security attacks refused")


def test_restore_and_revert_of_a_refused_version_write_no_vm0(memory: Path, cli: Cli, figures: Figures) -> None:
    """Only the version checked out is checked (as git does), so history may hold a `.vm0`:
    restore and revert read any version, and refuse the same names."""
    figures.add("security attacks")
    before = (memory / ".vm0" / "storage.yaml").read_text()
    evil = hub_version({".vm0/storage.yaml": b"name: research\nsecrets: off\n"})
    hub_version({".vm0/storage.yaml": None, "later.md": b"later\n"})  # reverting this re-adds it
    assert cli("pull", cwd=memory).code == 0, "the tip itself is clean"
    r = cli("restore", ".", "--at", evil[:8], cwd=memory)
    assert r.code == 7 and "it holds '.vm0/storage.yaml'" in r.err, r.err
    later = git("rev-parse", "origin/memory/research", cwd=memory).strip()
    r = cli("revert", later[:8], cwd=memory)
    assert r.code == 7 and ".vm0" in r.err, r.err
    assert (memory / ".vm0" / "storage.yaml").read_text() == before
    figures.add("security attacks refused")


# -- limits: files over max_file_size ------------------------------------------------------------
def test_oversize_blob_is_held_back_and_kept(memory: Path, tmp_path: Path, cli: Cli, figures: Figures) -> None:
    figures.add("security attacks")
    (memory / ".vm0" / "storage.yaml").write_text("name: research\nmax_file_size: 64KiB\n")
    big = b"x" * (200 * 1024)
    hub_version({"big.bin": big, "notes/ok.md": b"small and fine\n"})
    r = cli("pull", cwd=memory)
    assert r.code == 0, r.err
    assert "not checked out: big.bin (200.0 KB, larger than max_file_size)" in r.err, r.err
    assert not (memory / "big.bin").exists() and (memory / "notes" / "ok.md").read_text() == "small and fine\n"
    # the operator's next version keeps the hub's file: it is not recorded as deleted
    write(memory, "summary.md", "# Summary\n\nedited\n")
    assert cli("push", cwd=memory).code == 0
    assert hub_tree()["big.bin"] == big and hub_tree()["summary.md"] == b"# Summary\n\nedited\n"
    s = cli("status", cwd=memory)
    assert "big.bin" not in s.out
    # a file the hub replaces by one over the limit: the old copy goes, the hub's version is kept
    hub_version({"summary.md": b"x" * (100 * 1024)})
    r = cli("pull", cwd=memory)
    assert r.code == 0 and "not checked out: summary.md" in r.err, r.err
    assert not (memory / "summary.md").exists()
    write(memory, "runs/next.md", "next\n")
    assert cli("push", cwd=memory).code == 0
    assert hub_tree()["summary.md"] == b"x" * (100 * 1024), "not undone by the operator's next version"
    # a later hub version that shrinks it is checked out as usual
    hub_version({"big.bin": b"now small\n"})
    assert cli("pull", cwd=memory).code == 0
    assert (memory / "big.bin").read_bytes() == b"now small\n"
    assert git("status", "--porcelain", cwd=memory) == " D summary.md\n", "plain git sees the held-back file"
    assert "summary.md" not in cli("status", cwd=memory).out
    figures.add("security attacks refused")


def test_clone_holds_back_oversize_blob(memory: Path, tmp_path: Path, cli: Cli, figures: Figures) -> None:
    figures.add("security attacks")
    big = bytes(11 * 1024 * 1024)  # over the default 10 MiB
    hub_version({"huge.bin": big})
    r = cli("clone", "research", str(tmp_path / "copy"))
    assert r.code == 0, r.err
    assert "not checked out: huge.bin (11.0 MB" in r.err
    copy = tmp_path / "copy"
    assert not (copy / "huge.bin").exists() and (copy / "summary.md").exists()
    write(copy, "runs/second.md", "second\n")
    assert cli("push", cwd=copy).code == 0
    assert len(hub_tree()["huge.bin"]) == len(big)
    figures.add("security attacks refused")


# -- limits: deep trees --------------------------------------------------------------------------
def test_deep_tree_on_one_memory_does_not_break_the_hub(memory: Path, tmp_path: Path, cli: Cli,
                                                        figures: Figures) -> None:
    figures.add("security attacks")
    deep_version(1500, "memory/deep-mem")
    started = time.monotonic()
    r = cli("list")
    listed = time.monotonic() - started
    assert r.code == 0, r.err
    rows = {line.split()[0]: line for line in r.out.splitlines()[1:]}
    assert "refused" in rows["deep-mem"] and "refused" not in rows["research"]
    assert "deep-mem: refused version" in r.err and "deeper than 256 directories" in r.err
    started = time.monotonic()
    c = cli("clone", "deep-mem", str(tmp_path / "deep"))
    cloned = time.monotonic() - started
    assert c.code == 7 and "deeper than 256 directories" in c.err and "hint: " in c.err
    assert not (tmp_path / "deep").exists()
    assert cli("clone", "research", str(tmp_path / "fine")).code == 0
    assert listed < 10 and cloned < 10
    figures.timed("list with a 1,500-deep memory", listed)
    figures.timed("clone of a 1,500-deep memory (refused)", cloned)
    figures.add("security attacks refused")


# -- file/directory clashes keep both sides ---------------------------------------------------------
CLASHES = {
    # name: (what the other clone pushes, what this memory has locally, paths expected afterwards)
    "local-file-remote-dir": ({"notes/a.md": b"theirs a\n", "notes/b.md": b"theirs b\n"}, {"notes": b"ours\n"}),
    "local-dir-remote-file": ({"notes": b"theirs\n"}, {"notes/a.md": b"ours a\n", "notes/b.md": b"ours b\n"}),
    "nested": ({"x/y/notes": b"theirs\n"}, {"x/y/notes/deep/a.md": b"ours a\n"}),
}


@pytest.mark.parametrize("case", [*CLASHES, "local-symlink-remote-dir", "local-dir-remote-symlink"])
def test_file_directory_clash_keeps_both_sides(case: str, memory: Path, tmp_path: Path, cli: Cli,
                                               figures: Figures) -> None:
    figures.add("security attacks")
    other = tmp_path / "other"
    assert cli("clone", "research", str(other)).code == 0
    if case == "local-symlink-remote-dir":
        theirs: dict[str, bytes] = {"notes/a.md": b"theirs a\n"}
        os.symlink("summary.md", memory / "notes")
        ours = {"notes": b"summary.md"}
    elif case == "local-dir-remote-symlink":
        theirs = {"notes": b"summary.md"}
        os.symlink("summary.md", other / "notes")
        ours = {"notes/a.md": b"ours a\n"}
    else:
        theirs, ours = CLASHES[case]
    for path, data in theirs.items():
        if not (other / path).is_symlink():
            write(other, path, data)
    assert cli("push", cwd=other).code == 0
    for path, data in ours.items():
        if not (memory / path).is_symlink():
            write(memory, path, data)
    r = cli("pull", cwd=memory)
    assert r.code == 0, r.err
    assert "a file and a directory" in r.err, r.err
    # every file of both sides is in the merged version, each with its own content
    assert cli("push", cwd=memory).code == 0
    merged = hub_tree()
    for side in (theirs, ours):
        for path, data in side.items():
            if path in merged:
                assert merged[path] == data
            else:
                copies = [p for p in merged if p.startswith(path + ".conflict-")]
                assert len(copies) == 1 and merged[copies[0]] == data, (path, sorted(merged))
    assert merged["summary.md"] == b"# Summary\n\nfirst line\n" and merged["runs/first.md"] == b"first run\n"
    status = cli("status", cwd=memory)
    assert "Conflicts: 1" in status.out, status.out
    copy = next(p for p in merged if ".conflict-" in p)
    assert copy in status.out and copy in cli("log", cwd=memory).out
    assert cli("pull", cwd=other).code == 0, "the other clone takes the merge as a fast-forward"
    figures.add("security attacks refused")


def _clone_peak_rss(name: str, dest: Path) -> int:
    """Peak RSS (KiB) of `memsync clone` in a process of its own."""
    probe = ("import resource, subprocess, sys\n"
             "r = subprocess.run([sys.executable, '-m', 'memsync', 'clone', sys.argv[1], sys.argv[2]],"
             " capture_output=True)\n"
             "assert r.returncode == 0, r.stderr\n"
             "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n")
    out = subprocess.run([sys.executable, "-c", probe, name, str(dest)], capture_output=True, text=True,
                         check=True, cwd=dest.parent).stdout
    return int(out.strip())


def test_clone_memory_stays_bounded_by_the_largest_allowed_file(memory: Path, tmp_path: Path,
                                                                figures: Figures) -> None:
    """A 40 MB blob over the limit, stored loose in the hub as a plain `git push` leaves it:
    memsync reads only its header, and libgit2 never packs it in memory."""
    figures.add("security attacks")
    baseline = _clone_peak_rss("research", tmp_path / "before")
    hub_version({"huge.bin": os.urandom(40 * 1024 * 1024)})
    peak = _clone_peak_rss("research", tmp_path / "after")
    assert not (tmp_path / "after" / "huge.bin").exists()
    assert peak < baseline + 15 * 1024, f"peak RSS {peak} KiB against {baseline} KiB without the blob"
    figures.add("security attacks refused")


# -- the name and size checks themselves --------------------------------------------------------------
@pytest.mark.parametrize(("name", "reserved"), [
    (".vm0", ".vm0"), (".VM0", ".vm0"), (".Vm0", ".vm0"), (".vm0.", ".vm0"), (".vm0 . ", ".vm0"),
    ("vm0~1", ".vm0"), ("VM0~1.", ".vm0"), (".vm0::$INDEX_ALLOCATION", ".vm0"), (".v\u200cm0", ".vm0"),
    ("\ufeff.vm0", ".vm0"), (".git", ".git"), (".GIT", ".git"), (".git.", ".git"), ("git~1", ".git"),
    (".g\u200dit", ".git"), (".git:stream", ".git"),
    ("vm0", None), (".vm01", None), ("x.vm0", None), (".vm0x", None), (".gitignore", None),
    (".gitmodules", None), ("git~2", None), (".vm", None), ("notes", None),
])
def test_reserved_names_as_git_sees_them(name: str, reserved: str | None) -> None:
    from memsync.git.hubtree import reserved_name

    assert reserved_name(name) == reserved


def test_entry_cap_refuses_a_wide_tree(memory: Path) -> None:
    from memsync.errors import EXIT_REPO
    from memsync.git.hubtree import TreeTooLarge, check_tree

    repo = pygit2.Repository(str(memory / ".git"))
    tree = repo.head.peel(pygit2.Commit).tree
    assert check_tree(repo, tree, None, version="0" * 40, max_entries=3).oversize == []
    with pytest.raises(TreeTooLarge) as caught:
        check_tree(repo, tree, None, version="0" * 40, memory="research", max_entries=2)
    assert "more than 2 entries" in caught.value.message and caught.value.exit_code == EXIT_REPO
