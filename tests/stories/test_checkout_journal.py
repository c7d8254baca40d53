"""A checkout cut short never becomes a local change (git/checkoutjournal.py).

libgit2 writes a checked-out file in place, so a pull stopped in the middle of a file (a full
disk, a file size limit, a kill -9) leaves a prefix of it. The next command must roll that back
and bring the hub's bytes, committing nothing and making no conflict copy. The writes are cut
short for real: by RLIMIT_FSIZE (EFBIG at an exact byte) or by a small tmpfs that fills up.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pygit2
import pytest

from memsync.git import checkoutjournal
from tests.conftest import Cli, git, hub_path, memsync_cmd, write
from tests.helpers.gathered import losers

BIG = 3 * 1024 * 1024


def content(tag: str, size: int) -> bytes:
    """`size` bytes of text, different for each tag (compressible: the hub stays small)."""
    line = f"{tag}: the hub's version of this note, line ".encode()
    out = bytearray()
    n = 0
    while len(out) < size:
        out += line + str(n).encode() + b"\n"
        n += 1
    return bytes(out[:size])


def limited(limit: int) -> Callable[[], None]:
    def apply() -> None:  # a write past `limit` bytes fails with EFBIG (python ignores SIGXFSZ)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return apply


def run_limited(args: list[str], cwd: Path, limit: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "memsync", *args], cwd=cwd, capture_output=True, text=True,
                          preexec_fn=limited(limit), timeout=120)


def head(root: Path) -> str:
    return git("rev-parse", "HEAD", cwd=root).strip()


def hub_tip() -> str:
    return git("rev-parse", "memory/research", cwd=hub_path()).strip()


def conflict_copies(root: Path) -> list[str]:
    return sorted(p.name for p in root.rglob("*.conflict*"))


@pytest.fixture
def pair(tmp_path: Path, cli: Cli) -> Iterator[tuple[Path, Path]]:
    """The operator's memory `research` (pushed) and a second clone of it (made in-process: the
    tests' own commands are the subprocesses that crash)."""
    work = tmp_path / "research"
    work.mkdir()
    assert cli("init", cwd=work).code == 0
    write(work, "notes.md", "small notes\n")
    assert cli("push", cwd=work).code == 0
    copy = tmp_path / "copy"
    assert cli("clone", "research", str(copy), cwd=tmp_path).code == 0
    yield work, copy


def publish(work: Path, data: bytes, rel: str = "big.txt") -> str:
    write(work, rel, data)
    memsync_cmd("push", cwd=work, check=True)
    return hub_tip()


def assert_recovered(copy: Path, before: str, expected: dict[str, bytes]) -> None:
    """The next pull brought the hub's bytes, made no commit of its own and no conflict copy."""
    proc = memsync_cmd("pull", cwd=copy)
    assert proc.returncode == 0, proc.stderr
    for rel, data in expected.items():
        assert (copy / rel).read_bytes() == data, f"{rel} is not the hub's version"
    assert head(copy) == hub_tip(), "the pull committed something of its own"
    assert git("rev-list", f"{before}..HEAD", "--author=", cwd=copy).count("\n") == \
        git("rev-list", f"{before}..{hub_tip()}", cwd=hub_path()).count("\n")
    assert not conflict_copies(copy)
    assert git("status", "--porcelain", cwd=copy).strip() == ""
    assert not checkoutjournal.pending(copy / ".git")


@pytest.mark.parametrize("old_size", [0, 100_000], ids=["new-file", "changed-file"])
@pytest.mark.slow
def test_a_pull_cut_short_inside_a_file_is_undone_and_the_next_pull_commits_nothing(
        pair: tuple[Path, Path], old_size: int) -> None:
    work, copy = pair
    if old_size:
        publish(work, content("old", old_size))
        memsync_cmd("pull", cwd=copy, check=True)
    before = head(copy)
    new = content("new", BIG)
    publish(work, new)

    proc = run_limited(["pull"], copy, 1024 * 1024)  # the checkout's write stops at 1 MiB of 3
    assert proc.returncode == 7, proc.stderr
    assert proc.stderr.startswith("error: ") and "\nhint: " in proc.stderr and "Traceback" not in proc.stderr
    on_disk = (copy / "big.txt").read_bytes() if (copy / "big.txt").exists() else None
    assert on_disk != new[:1024 * 1024], "the file cut short is still there"
    assert head(copy) == before

    assert_recovered(copy, before, {"big.txt": new, "notes.md": b"small notes\n"})


@pytest.mark.slow
def test_a_rollback_that_cannot_write_either_is_finished_by_the_next_command(pair: tuple[Path, Path]) -> None:
    """The old version is as big as the limit too: the failed pull cannot put it back, so the
    record stays and the next command (a push here, which must not publish the prefix) does."""
    work, copy = pair
    old = content("old", BIG)
    publish(work, old)
    memsync_cmd("pull", cwd=copy, check=True)
    new = content("new", BIG)
    tip = publish(work, new)
    proc = run_limited(["pull"], copy, 1024 * 1024)
    assert proc.returncode == 7, proc.stderr
    assert "next memsync command" in proc.stderr
    assert checkoutjournal.pending(copy / ".git")

    proc = memsync_cmd("push", cwd=copy)
    assert proc.returncode == 0, proc.stderr
    assert "warning: a checkout cut short" in proc.stderr and "1 file(s) put back" in proc.stderr, proc.stderr
    assert (copy / "big.txt").read_bytes() == new  # the push's own exchange checked it out again
    assert hub_tip() == tip, "the push published a commit of its own"
    assert not conflict_copies(copy)


@pytest.mark.slow
def test_an_edit_made_after_the_crash_is_kept(pair: tuple[Path, Path]) -> None:
    """A file on the checkout's list that holds neither version (nor a prefix of the new one)
    was changed after the crash: it is the user's, committed as such, never overwritten."""
    work, copy = pair
    publish(work, content("old", BIG))
    memsync_cmd("pull", cwd=copy, check=True)
    tip = publish(work, content("new", BIG))
    assert run_limited(["pull"], copy, 1024 * 1024).returncode == 7
    assert checkoutjournal.pending(copy / ".git")
    write(copy, "big.txt", "the user's own text, written after the crash\n")

    proc = memsync_cmd("pull", cwd=copy)
    assert proc.returncode == 0, proc.stderr
    gathered_file = copy / "big.txt.conflicts.md"
    kept = [(copy / "big.txt").read_bytes(),
            *losers({"big.txt.conflicts.md": gathered_file.read_bytes()} if gathered_file.exists() else {}, "big.txt")]
    assert b"the user's own text, written after the crash\n" in kept
    assert git("merge-base", "--is-ancestor", tip, "HEAD", cwd=copy) == ""


@pytest.mark.slow
def test_a_record_older_than_the_branch_is_dropped_and_touches_nothing(pair: tuple[Path, Path]) -> None:
    """Killed after the branch moved but before the record went: the checkout was complete."""
    work, copy = pair
    new = content("new", 10_000)
    publish(work, new)
    memsync_cmd("pull", cwd=copy, check=True)
    record = {"head": git("rev-parse", "HEAD~1", cwd=copy).strip(), "target": head(copy),
              "paths": ["big.txt"], "held": {}}
    (copy / ".git" / checkoutjournal.JOURNAL).write_text(json.dumps(record))
    proc = memsync_cmd("status", cwd=copy)
    assert proc.returncode == 0, proc.stderr
    assert (copy / "big.txt").read_bytes() == new
    assert not checkoutjournal.pending(copy / ".git")


@pytest.mark.slow
def test_a_link_planted_above_a_recorded_path_is_never_followed(pair: tuple[Path, Path], tmp_path: Path) -> None:
    """After a crash, the folder of a recorded file replaced by a link to elsewhere: the rollback
    neither removes nor writes through it."""
    work, copy = pair
    publish(work, b"x\n", "deep/file.txt")
    memsync_cmd("pull", cwd=copy, check=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "file.txt").write_bytes(b"")  # a prefix of anything: would look like the checkout's
    (outside / "other.txt").write_bytes(b"keep\n")
    record = {"head": head(copy), "target": head(copy), "paths": ["deep/file.txt", "deep/other.txt"], "held": {}}
    # a record whose target adds deep/other.txt: fake one by pointing at a commit that has it
    publish(work, b"keep\n", "deep/other.txt")
    git("fetch", "-q", str(hub_path()), "memory/research", cwd=copy)
    record["target"] = git("rev-parse", "FETCH_HEAD", cwd=copy).strip()
    os.rename(copy / "deep", tmp_path / "moved")
    (copy / "deep").symlink_to(outside)
    (copy / ".git" / checkoutjournal.JOURNAL).write_text(json.dumps(record))
    memsync_cmd("status", cwd=copy)
    assert (outside / "file.txt").exists() and (outside / "other.txt").read_bytes() == b"keep\n"
    assert pygit2.Repository(str(copy)).head.target  # still a repository


@pytest.mark.parametrize("record", [
    {"head": None, "target": None, "paths": [], "held": {}},  # filled in below: paths outside the memory
    {"head": "HEAD", "target": "0" * 40, "paths": ["notes.md"], "held": {}},  # a version this repository lacks
    "not json {",
], ids=["paths-outside", "unknown-version", "garbage"])
@pytest.mark.slow
def test_a_planted_record_touches_nothing_outside_and_never_blocks(
        pair: tuple[Path, Path], tmp_path: Path, record: object) -> None:
    """An agent (or anyone who can write .git) plants a record: no file outside the memory is
    removed or written, no local edit is lost, and the command goes on."""
    _, copy = pair
    outside = tmp_path / "outside.txt"
    outside.write_bytes(b"")  # empty: a prefix of anything
    write(copy, "notes.md", "an edit of the user's\n")
    if isinstance(record, dict):
        record = dict(record)
        record["head"] = head(copy)
        record["target"] = record["target"] or head(copy)
        record["paths"] = record["paths"] or [str(outside), "../outside.txt", "../../outside.txt", ".git/config"]
        text = json.dumps(record)
    else:
        text = str(record)
    (copy / ".git" / checkoutjournal.JOURNAL).write_text(text)
    proc = memsync_cmd("status", cwd=copy)
    assert proc.returncode == 0, proc.stderr
    assert outside.exists() and (copy / ".git" / "config").stat().st_size > 0
    assert (copy / "notes.md").read_text() == "an edit of the user's\n"
    assert not checkoutjournal.pending(copy / ".git")
