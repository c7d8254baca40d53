"""util/holders: whether a lock's holder may still be alive, judged by pid, start time and boot
id (never by a clock): this process is alive, a reused pid or a previous boot is not."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from memsync.util import holders
from memsync.util.records import replace

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc tells start times and boot ids")


def _free_pid() -> int:
    pid = 4_000_000
    while Path(f"/proc/{pid}").exists():
        pid -= 1
    return pid


def test_this_process_is_alive_and_another_machines_cannot_be_judged() -> None:
    me = holders.current()
    assert me.pid == os.getpid() and holders.may_be_alive(me)
    elsewhere = replace(me, host=me.host + "-elsewhere", pid=_free_pid())
    assert holders.may_be_alive(elsewhere)  # nothing here can tell
    assert me.fields()[:2] == [str(os.getpid()), me.host]


@linux_only
def test_a_free_pid_a_reused_pid_and_an_earlier_boot_are_gone() -> None:
    me = holders.current()
    assert me.boot is not None and me.started is not None
    assert not holders.may_be_alive(replace(me, pid=_free_pid()))
    assert not holders.may_be_alive(replace(me, started=str(int(me.started) + 1)))  # our pid, another process
    assert not holders.may_be_alive(replace(me, boot="another-boot"))
    assert holders.may_be_alive(replace(me, started=None))  # a live pid whose start was not recorded


@linux_only
def test_start_ticks_become_a_time_near_now() -> None:
    import time

    started = holders.started_at(holders.process_started(os.getpid()))
    assert started is not None and started <= time.time() + 1
    assert holders.started_at(None) is None and holders.started_at("not ticks") is None


@linux_only
def test_a_file_open_only_here_is_open_nowhere_else(tmp_path: Path) -> None:
    lock = tmp_path / "index.lock"
    with lock.open("w"):
        assert holders.open_elsewhere(lock) is None  # this process's own descriptors do not count
    assert holders.git_working_in([tmp_path]) is None
