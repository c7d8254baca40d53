"""What a tracker asks of the kernel (the rest of the tracker: tests/servers/test_tracker.py).

watchdog's default mask has IN_OPEN and IN_CLOSE_NOWRITE: every opendir and every read of a
watched file is an event, and a walk of a memory of 5,000 folders overflowed the kernel's queue
(16,384 events); watchdog's own rebuild walk after an overflow overflowed it again, so an idle
server burned a core and every answer waited out flush_wait and was "unknown". And a recursive
watch reaches every folder of .git: a commit of 10,000 files passed ~100,000 events through the
server's threads (~1.2 CPU-seconds), all of them dropped by the tracker.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from memsync.serve.tracker import Tracker
from tests.conftest import write

IN_OPEN, IN_CLOSE_NOWRITE = 0x20, 0x10


def _watch_masks() -> list[int]:
    """The mask of every inotify watch this process holds (/proc/self/fdinfo)."""
    masks = []
    for name in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{name}") != "anon_inode:inotify":
                continue
            with open(f"/proc/self/fdinfo/{name}", encoding="ascii") as fh:
                masks += [int(line.split("mask:")[1].split()[0], 16) for line in fh if line.startswith("inotify wd:")]
        except OSError:
            continue
    return masks


def test_a_trackers_watches_see_changes_not_reads(memory: Path) -> None:
    tracked = Tracker(os.path.realpath(memory))
    try:
        masks = _watch_masks()
        assert len(masks) >= 3  # the root, its folders, .git
        assert not [m for m in masks if m & (IN_OPEN | IN_CLOSE_NOWRITE)], [hex(m) for m in masks]
        token = tracked.since()["token"]
        tracked.hand_back(token, "t" * 40, "fp", [], True)
        for top, _, files in os.walk(memory):  # a reader
            for name in files:
                (Path(top) / name).read_bytes()
        (memory / "summary.md").write_text("changed\n")
        assert tracked.since()["paths"] == ["summary.md"]
    finally:
        tracked.close()


def test_nothing_below_a_git_folder_is_watched(memory: Path) -> None:
    """.git itself is watched (its replacement, the flush cookie); its objects, refs and logs not."""
    for n in range(50):
        write(memory, f"many/{n}.md", f"{n}\n")
    tracked = Tracker(os.path.realpath(memory))
    try:
        watched = len(_watch_masks())
        folders = sum(1 for top, _, _ in os.walk(memory) if ".git" not in Path(top).relative_to(memory).parts)
        assert watched == folders + 1
        token = tracked.since()["token"]
        tracked.hand_back(token, "t" * 40, "fp", [], True)
        subprocess.run(["git", "add", "-A"], cwd=memory, check=True)
        subprocess.run(["git", "-c", "user.name=a", "-c", "user.email=a@b", "commit", "-qm", "m"], cwd=memory,
                       check=True, capture_output=True)
        assert tracked.since()["paths"] == []  # the commit changed no file of the work tree
        assert len(_watch_masks()) == watched  # and the objects' new folders got no watch
    finally:
        tracked.close()
