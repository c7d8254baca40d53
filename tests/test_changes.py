"""The change monitor watches the memory's files, never `.git/` (written on every commit)."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from memsync.live.changes import ChangeMonitor
from tests.conftest import write

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="counts inotify watches in /proc")


def _inotify_watches() -> list[int]:
    """The inode numbers this process's inotify instances watch, from /proc/self/fdinfo."""
    inodes = []
    for fd in os.listdir("/proc/self/fdinfo"):
        try:
            text = Path(f"/proc/self/fdinfo/{fd}").read_text()
        except OSError:
            continue
        for line in text.splitlines():
            if line.startswith("inotify wd:"):
                field = dict(part.split(":", 1) for part in line.split()[1:] if ":" in part)
                inodes.append(int(field["ino"], 16))
    return inodes


def _wait_for(predicate, seconds: float = 5.0) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return bool(predicate())


def _settle(monitor: ChangeMonitor, quiet: float = 0.3, seconds: float = 5.0) -> None:
    """Wait until no event has been counted for `quiet` seconds."""
    deadline = time.monotonic() + seconds
    count = monitor.events
    while time.monotonic() < deadline:
        time.sleep(quiet)
        if monitor.events == count:
            return
        count = monitor.events
    raise AssertionError("file events did not settle")


def test_git_directory_is_never_watched(memory: Path) -> None:
    write(memory, "notes/deep/a.md", "a\n")
    before = set(_inotify_watches())
    monitor = ChangeMonitor(memory)
    monitor.start()
    try:
        watched = set(_inotify_watches()) - before
        git_dirs = {p.stat().st_ino for p in (memory / ".git").rglob("*") if p.is_dir()}
        git_dirs.add((memory / ".git").stat().st_ino)
        assert git_dirs and not watched & git_dirs
        wanted = {memory.stat().st_ino, *(p.stat().st_ino for p in (memory / "notes").rglob("*") if p.is_dir()),
                  (memory / "notes").stat().st_ino, (memory / "runs").stat().st_ino}
        assert wanted <= watched

        # a top-level directory made later is followed, and files below it are changes
        (memory / "later").mkdir()
        assert _wait_for(lambda: (memory / "later").stat().st_ino in _inotify_watches())
        monitor.take()
        write(memory, "later/x.md", "x\n")
        assert _wait_for(lambda: "later/x.md" in monitor.changed)
        # (the write's later events, modify and close, may still be on their way: let them land)
        _settle(monitor)
        # and a commit's writes under .git are not
        monitor.take()
        write(memory, ".git/objects/zz/fake", "not a change\n")
        time.sleep(0.3)
        assert monitor.peek()[0] is False and not monitor.changed
    finally:
        monitor.stop()
