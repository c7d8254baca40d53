"""The index memsync leaves behind: stat data for files no longer fresh, and pulls that touch only what changed."""

from __future__ import annotations

import os
import time
from pathlib import Path

from memsync.core import snapshot
from tests.conftest import Cli, fresh_for_a_minute, git, hub_tree, write


def _index_stat(root: Path, rel: str) -> tuple[str, str]:
    """(mtime, size) as `git ls-files --debug` shows them for one entry."""
    lines = git("ls-files", "--debug", rel, cwd=root).splitlines()
    mtime = next(line.split(":", 1)[1].strip() for line in lines if line.strip().startswith("mtime:"))
    size = next(line.split("size:", 1)[1].split()[0] for line in lines if "size:" in line)
    return mtime, size


def test_push_records_stat_data_of_files_no_longer_fresh_only(memory: Path, cli: Cli) -> None:
    old = write(memory, "notes/old.md", "written long ago\n")
    stamp = old.stat().st_mtime_ns
    old_at = max(stamp, old.stat().st_ctime_ns) + snapshot.FRESH_NS
    while time.time_ns() <= old_at:  # snapshot's 2-second rule, waited out for real
        time.sleep(0.1)
    assert cli("push", cwd=memory).code == 0
    mtime, size = _index_stat(memory, "notes/old.md")
    assert mtime == f"{stamp // 10**9}:{stamp % 10**9}" and size == str(len("written long ago\n"))
    fresh = write(memory, "notes/fresh.md", "just written\n")
    fresh_for_a_minute(fresh)
    assert cli("push", cwd=memory).code == 0
    assert _index_stat(memory, "notes/fresh.md") == ("0:0", "0")
    # either way git and memsync agree the work tree is clean, and an edit is still seen
    assert git("status", "--porcelain", cwd=memory) == ""
    write(memory, "notes/old.md", "written long ago\nand edited\n")
    assert "notes/old.md" in cli("status", cwd=memory).out
    assert cli("push", cwd=memory).code == 0
    assert hub_tree()["notes/old.md"] == b"written long ago\nand edited\n"


def test_pull_updates_exactly_the_changed_paths(memory: Path, tmp_path: Path, cli: Cli) -> None:
    other = tmp_path / "other"
    assert cli("clone", "research", str(other)).code == 0
    write(other, "summary.md", "# Summary\n\nremote edit\n")
    (other / "runs" / "first.md").unlink()  # its folder ends up empty
    write(other, "deep/a/b/new*[1].md", "a name with pattern characters\n")
    write(other, "plain.md", "will become a folder\n")
    assert cli("push", cwd=other).code == 0
    assert cli("pull", cwd=memory).code == 0
    (other / "plain.md").unlink()
    write(other, "plain.md/inside.md", "a file replaced by a folder\n")
    os.chmod(write(other, "tool.sh", "#!/bin/sh\n"), 0o755)
    assert cli("push", cwd=other).code == 0
    write(memory, "local.md", "local, not yet pushed\n")  # pull commits it: a merge, not a fast-forward
    r = cli("pull", cwd=memory)
    assert r.code == 0, r.err
    files = {str(p.relative_to(memory)) for p in memory.rglob("*") if p.is_file() and ".git" not in p.parts
             and ".vm0" not in p.parts}
    assert files == set(hub_tree()) | {"local.md"}
    assert not (memory / "runs").exists()
    assert (memory / "deep/a/b/new*[1].md").read_text() == "a name with pattern characters\n"
    assert (memory / "plain.md/inside.md").read_text() == "a file replaced by a folder\n"
    assert os.stat(memory / "tool.sh").st_mode & 0o111
    assert git("status", "--porcelain", cwd=memory) == ""


def _stamp(path: Path) -> tuple[int, int]:
    st = path.stat()
    return st.st_ino, st.st_mtime_ns


def test_status_rewrites_the_index_only_when_it_refreshed_stat_data(memory: Path, cli: Cli) -> None:
    """A status with nothing new leaves .git/index alone; after files are copied in (same bytes,
    new mtimes) the first status refreshes the stat cache and writes it, so the next one does
    not re-hash them, and does not write it again."""
    write(memory, "notes/a.md", "a\n")
    assert cli("push", cwd=memory).code == 0
    index = memory / ".git" / "index"
    assert cli("status", cwd=memory).code == 0  # (a first status may rebuild the tree cache once)
    before = _stamp(index)
    r = cli("status", cwd=memory)
    assert r.code == 0 and "Uncommitted: none" in r.out
    assert _stamp(index) == before
    assert cli("push", cwd=memory).code == 0  # a push with nothing to commit writes nothing either
    assert _stamp(index) == before
    stamp = 1_600_000_000
    for rel in ("summary.md", "runs/first.md", "notes/a.md"):
        os.utime(memory / rel, (stamp, stamp))  # what `cp` of the same files over the memory does
    r = cli("status", cwd=memory)
    assert r.code == 0 and "Uncommitted: none" in r.out
    assert _stamp(index) != before
    assert _index_stat(memory, "notes/a.md")[0] == f"{stamp}:0"  # the refreshed stat data was kept
    after = _stamp(index)
    assert "Uncommitted: none" in cli("status", cwd=memory).out
    assert _stamp(index) == after
    write(memory, "notes/a.md", "a, edited\n")
    assert "notes/a.md" in cli("status", cwd=memory).out
    assert git("status", "--porcelain", cwd=memory) == " M notes/a.md\n"


def test_a_command_uses_one_index_of_its_repository(memory: Path) -> None:
    """libgit2 keeps one index per repository; GitRepo hands out one wrapper of it, so every step
    of a command sees what the others staged, and a change git makes on disk is still read."""
    from memsync.git.repo import GitRepo

    repo = GitRepo.open(memory)
    assert repo.index is repo.index
    write(memory, "notes/by-git.md", "staged by git\n")
    git("add", "notes/by-git.md", cwd=memory)  # the file on disk changes under the open repository
    repo.index.read(force=False)
    assert "notes/by-git.md" in [entry.path for entry in repo.index]
