"""The served change tracker's flush cookie (memsync/serve/treewatch.py) against an agent that shares
the memory: a link or a file planted where the cookie goes is never written through nor taken for
the cookie, a `.git` that is a link is never tracked, and a worker forked from the server keeps
none of the server's inotify descriptors (an agent reading one would take the tracker's events).
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import pytest

from memsync.serve import treewatch
from memsync.serve.tracker import Tracker, Trackers
from tests.conftest import write

pytestmark = [pytest.mark.attack, pytest.mark.skipif(
    not sys.platform.startswith("linux")
    or treewatch.filesystem(os.path.realpath(tempfile.gettempdir())) not in treewatch.LOCAL_FILESYSTEMS,
    reason="inotify (Linux) on a local file system")]

NAME = f"{treewatch.COOKIE_PREFIX}predicted"


def _baseline(tracked: Tracker) -> None:
    token = tracked.since()["token"]
    tracked.hand_back(token, "t" * 40, "fp", [], True)


def test_a_link_or_a_file_where_the_cookie_goes_is_never_written_through_nor_trusted(
        tmp_path: Path, memory: Path) -> None:
    """Even with the cookie's name known in advance (it never is: 128 random bits), what an agent
    planted there makes the answer "unknown" (a full scan), never a narrowed one that could miss
    the change made just before."""
    outside = tmp_path / "precious.txt"
    outside.write_bytes(b"precious\n")
    dangling = tmp_path / "made-by-memsync"
    tracked = Tracker(os.path.realpath(memory), cookie_name=lambda: NAME)
    try:
        _baseline(tracked)
        write(memory, "a.md", "a\n")
        assert tracked.since()["paths"] == ["a.md"]  # nothing planted: narrowed
        cookie = memory / ".git" / NAME
        for plant in (lambda: cookie.symlink_to(outside), lambda: cookie.symlink_to(dangling),
                      lambda: cookie.write_bytes(b"")):
            plant()
            write(memory, "secret.md", "slipped in\n")
            assert "paths" not in tracked.since()  # a full scan: secret.md cannot be missed
            assert outside.read_bytes() == b"precious\n" and not dangling.exists()
            assert cookie.is_symlink() or cookie.is_file()  # the agent's entry, left as it was
            cookie.unlink()
        assert "paths" in tracked.since()
    finally:
        tracked.close()


def test_cookie_named_plants_do_not_end_the_wait_or_get_followed(tmp_path: Path, memory: Path) -> None:
    outside = tmp_path / "precious.txt"
    outside.write_bytes(b"precious\n")
    git_dir = memory / ".git"
    (git_dir / f"{treewatch.COOKIE_PREFIX}{os.getpid()}-0").symlink_to(outside)
    (git_dir / f"{treewatch.COOKIE_PREFIX}x").write_bytes(b"")
    tracked = Tracker(os.path.realpath(memory))
    try:
        _baseline(tracked)
        for n in range(30):
            (git_dir / f"{treewatch.COOKIE_PREFIX}{n}").write_bytes(b"")  # a stream of look-alikes
            write(memory, f"late{n}.md", "x\n")
            assert f"late{n}.md" in tracked.since()["paths"]
        assert outside.read_bytes() == b"precious\n"
        os.utime(git_dir / f"{treewatch.COOKIE_PREFIX}x", (1, 1), follow_symlinks=False)
        os.utime(git_dir / f"{treewatch.COOKIE_PREFIX}{os.getpid()}-0", (1, 1), follow_symlinks=False)
    finally:
        tracked.close()
    Tracker(os.path.realpath(memory)).close()  # the next tracker sweeps old ones: links unlinked, not followed
    assert not (git_dir / f"{treewatch.COOKIE_PREFIX}x").exists()
    assert not (git_dir / f"{treewatch.COOKIE_PREFIX}{os.getpid()}-0").is_symlink()
    assert outside.read_bytes() == b"precious\n"


def test_a_git_folder_that_is_a_link_is_never_tracked(tmp_path: Path, memory: Path) -> None:
    elsewhere = tmp_path / "elsewhere.git"
    (memory / ".git").rename(elsewhere)
    (memory / ".git").symlink_to(elsewhere)
    before = sorted(os.listdir(elsewhere))
    trackers = Trackers()
    try:
        assert trackers.since(os.path.realpath(memory)) is None
        assert trackers.by_root == {}
    finally:
        trackers.close()
    assert sorted(os.listdir(elsewhere)) == before  # no cookie was made through the link


def _inotify_fds() -> list[str]:
    found = []
    for name in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{name}") == "anon_inode:inotify":
                found.append(name)
        except OSError:
            pass
    return found


def test_a_forked_worker_keeps_none_of_the_servers_inotify_descriptors(memory: Path) -> None:
    """watchdog makes its inotify descriptor without close-on-exec: a worker that kept it would
    pass it to the agent its `run` starts, which could read (and so take) the tracker's events."""
    trackers = Trackers()
    try:
        assert trackers.since(os.path.realpath(memory)) is not None
        assert _inotify_fds()  # the server holds one
        read, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                trackers.abandon()
                os.write(write_end, ",".join(_inotify_fds()).encode() + b".")
            finally:
                os._exit(0)
        os.close(write_end)
        with os.fdopen(read, "rb") as fh:
            seen = fh.read()
        os.waitpid(pid, 0)
        assert seen == b"."  # the worker closed every one
        assert trackers.by_root  # the server's own trackers are untouched
        write(memory, "after.md", "x\n")
        assert trackers.since(os.path.realpath(memory)) is not None
    finally:
        trackers.close()
