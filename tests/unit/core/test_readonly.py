"""The read-only undo itself (memsync/core/readonly.py), called directly on a real memory: what a
command changed in a read-only memory is put back byte for byte and mode for mode, what it made is
moved aside, its commits are dropped from the branch, and a run killed before its undo has it
finished by the next memsync that opens the memory. (Tests run as root, which ignores the
non-writable modes: the undo, not the modes, is what is tested here.)"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from memsync.core import readonly
from memsync.core.memory import open_memory
from tests.conftest import git, write


def _state(root: Path) -> dict[str, tuple[int, bytes | str]]:
    found: dict[str, tuple[int, bytes | str]] = {}
    for here, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in (".git", ".vm0")]
        for name in [*files, *dirs]:
            path = Path(here) / name
            st = path.lstat()
            content: bytes | str = os.readlink(path) if path.is_symlink() else (
                b"<dir>" if path.is_dir() else path.read_bytes())
            found[str(path.relative_to(root))] = (stat.S_IMODE(st.st_mode), content)
    return found


def test_what_the_command_changed_is_put_back_and_what_it_made_kept_aside(memory: Path) -> None:
    write(memory, "notes/deep.md", "deep\n")
    (memory / "tool.sh").write_text("#!/bin/sh\n")
    (memory / "tool.sh").chmod(0o755)
    before = _state(memory)
    mem = open_memory(memory)
    protection = readonly.protect(mem, "ro-run-1")
    assert not stat.S_IMODE((memory / "summary.md").stat().st_mode) & 0o222  # made non-writable
    # the command, past the modes (as root could): edits, deletes, chmods, makes files and folders
    (memory / "summary.md").chmod(0o644)
    (memory / "summary.md").write_text("vandalised\n")
    (memory / "runs" / "first.md").unlink()
    (memory / "tool.sh").chmod(0o644)
    (memory / "notes").chmod(0o755)
    write(memory, "planted.md", "new\n")
    write(memory, "newdir/inside.md", "inside\n")
    (memory / "link").symlink_to("/etc/passwd")
    done = readonly.undo(open_memory(memory), protection)
    assert _state(memory) == before
    assert done.kept_in is not None
    kept = Path(done.kept_in)
    assert (kept / "planted.md").read_text() == "new\n" and (kept / "newdir" / "inside.md").read_text() == "inside\n"
    assert os.readlink(kept / "link") == "/etc/passwd"
    assert {"summary.md", "runs/first.md", "planted.md"} <= set(done.changed)
    assert not (memory / ".git" / readonly.MARK).exists()


def test_commits_the_command_made_are_dropped_from_the_branch(memory: Path) -> None:
    head = git("rev-parse", "HEAD", cwd=memory).strip()
    protection = readonly.protect(open_memory(memory), "ro-run-2")
    (memory / "summary.md").chmod(0o644)
    write(memory, "summary.md", "committed by the agent\n")
    git("-c", "user.name=a", "-c", "user.email=a@x", "commit", "-qam", "agent", cwd=memory)
    done = readonly.undo(open_memory(memory), protection)
    assert git("rev-parse", "HEAD", cwd=memory).strip() == head
    assert done.dropped_commit is not None and done.dropped_commit != head
    assert (memory / "summary.md").read_text() == "# Summary\n\nfirst line\n"
    assert git("status", "--porcelain", cwd=memory) == ""


def test_a_live_runs_guard_is_left_alone(memory: Path) -> None:
    """Opening a memory whose read-only run is still going does not undo it under the run."""
    readonly.protect(open_memory(memory), "ro-live")  # this process: alive
    (memory / "summary.md").chmod(0o644)
    write(memory, "summary.md", "still running\n")
    assert readonly.recover(open_memory(memory)) is None
    assert (memory / "summary.md").read_text() == "still running\n"
    assert (memory / ".git" / readonly.MARK).exists()
