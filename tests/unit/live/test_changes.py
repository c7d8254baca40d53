"""The change monitor (watchdog) counts the memory's files, never `.git/` (written on every commit)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from memsync.live.changes import ChangeMonitor
from tests.conftest import write


def _wait_for(predicate, seconds: float = 5.0) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return bool(predicate())


def _wait_quiet(monitor: ChangeMonitor, quiet: float = 0.3, seconds: float = 5.0) -> None:
    """Wait until no event has been counted for `quiet` seconds."""
    deadline = time.monotonic() + seconds
    count = monitor.events
    while time.monotonic() < deadline:
        time.sleep(quiet)
        if monitor.events == count:
            return
        count = monitor.events
    raise AssertionError("file events did not go quiet")


def test_git_directory_is_never_a_change(memory: Path) -> None:
    write(memory, "notes/deep/a.md", "a\n")
    monitor = ChangeMonitor(memory)
    monitor.start()
    try:
        assert not monitor.polling
        write(memory, "notes/deep/a.md", "a, edited\n")
        assert _wait_for(lambda: "notes/deep/a.md" in monitor.changed)
        _wait_quiet(monitor)
        # a top-level directory made later is followed, and files below it are changes
        (memory / "later").mkdir()
        _wait_quiet(monitor)
        monitor.take()
        write(memory, "later/x.md", "x\n")
        assert _wait_for(lambda: "later/x.md" in monitor.changed)
        # (the write's later events, modify and close, may still be on their way: let them land)
        _wait_quiet(monitor)
        # and a commit's writes under .git are not, nor .vm0's
        monitor.take()
        write(memory, ".git/objects/zz/fake", "not a change\n")
        write(memory, ".vm0/local.txt", "not a change either\n")
        time.sleep(0.5)
        assert monitor.peek()[0] is False and not monitor.changed
    finally:
        monitor.stop()


def test_without_file_events_the_tree_is_polled(memory: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def refused(root: Path, on_event: object) -> None:
        raise OSError(28, "inotify watch limit reached")

    said: list[str] = []
    monitor = ChangeMonitor(memory, said.append, poll_every=0.05, observe=refused)
    monitor.start()
    try:
        assert monitor.polling and "polling" in said[0] and "inotify watch limit reached" in said[0]
        monitor.take()
        write(memory, "polled.md", "seen by a poll\n")
        assert _wait_for(lambda: monitor.peek()[0])
    finally:
        monitor.stop()


def test_watchdog_never_prints_into_the_commands_output(tmp_path: Path) -> None:
    """A stopped emitter's last read is logged by watchdog at error level; with no handler of its
    own, Python's last resort printed it on stderr in the middle of the watched command's output.
    (pytest's own root handlers would hide that here: the handler itself is checked.)"""
    import logging

    from memsync.live import changes

    observer = changes._observe(tmp_path, lambda event: None)
    observer.stop()
    observer.join(timeout=5)
    handlers = logging.getLogger("watchdog").handlers
    assert any(isinstance(h, logging.NullHandler) for h in handlers)
