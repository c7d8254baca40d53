"""util/leases: a file open anywhere is busy; a leased file cannot be opened until released."""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

import pytest

from memsync.util import leases

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="write leases are Linux's")


def test_a_file_open_elsewhere_is_busy(tmp_path: Path) -> None:
    """The kernel grants a write lease only on a file no other descriptor has open: another
    process's (an agent's editor) or, as here, one of this process's own; it is the same check."""
    (tmp_path / "log.md").write_text("x\n")
    (tmp_path / "idle.md").write_text("y\n")
    for mode in ("a", "r"):
        with open(tmp_path / "log.md", mode), leases.held(tmp_path, ["log.md", "idle.md", "missing.md"]) as held:
            assert held.available
            assert held.busy == ["log.md"]
    with leases.held(tmp_path, ["log.md"]) as held:
        assert held.available and held.busy == []


def test_an_open_waits_until_the_lease_is_released(tmp_path: Path) -> None:
    path = tmp_path / "notes.md"
    path.write_text("old\n")
    opened: list[float] = []

    def writer() -> None:
        with open(path, "a") as fh:  # blocks while the lease is held
            opened.append(time.monotonic())
            fh.write("appended\n")

    with leases.held(tmp_path, ["notes.md"], writable=["notes.md"]) as held:
        assert held.busy == [] and held.available
        thread = threading.Thread(target=writer)
        thread.start()
        time.sleep(0.3)
        assert opened == []  # still waiting for the lease
        fd = held.fds["notes.md"]
        os.ftruncate(fd, 0)
        os.pwrite(fd, b"new\n", 0)  # what a checkout writes, through the leased descriptor
        released = time.monotonic()
    thread.join(30)
    assert opened and opened[0] >= released
    assert path.read_text() == "new\nappended\n"  # the append went after the rewrite, not lost


def test_links_and_fifos_are_skipped_never_opened(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "link").symlink_to(tmp_path / "pipe")
    with leases.held(tmp_path, ["pipe", "link"]) as held:  # would hang if opened for a blocking read
        assert held.busy == [] and held.fds == {}
