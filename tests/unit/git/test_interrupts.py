"""git/interrupts: memsync's own progress callbacks (cffi, called by libgit2 per object received)
fail closed: a Ctrl-C landing in one is kept on the callbacks object, for pygit2 to raise once
libgit2 returns, and libgit2 is told to stop; with no object to keep it on, it still stops."""

from __future__ import annotations

import types

from pygit2.ffi import ffi

from memsync.git import interrupts


def _ctrl_c(*_args: object) -> None:
    raise KeyboardInterrupt


def test_a_ctrl_c_in_the_quiet_progress_callback_stops_libgit2_and_is_kept() -> None:
    callbacks = types.SimpleNamespace()
    progress = interrupts.quiet_progress(_ctrl_c)
    assert progress(ffi.NULL, ffi.new_handle(callbacks)) == interrupts.REFUSE_STORED
    assert isinstance(callbacks._stored_exception, KeyboardInterrupt)
    assert progress(ffi.NULL, ffi.NULL) == interrupts.REFUSE  # nowhere to keep it: a refusal still


def test_a_ctrl_c_in_the_received_bytes_callback_stops_libgit2_and_is_kept() -> None:
    reported: list[tuple[int, int, int]] = []

    def report(received_bytes: int, received: int, total: int) -> None:
        reported.append((received_bytes, received, total))
        raise KeyboardInterrupt

    stats = ffi.new("git_indexer_progress *")
    stats.received_bytes, stats.received_objects, stats.total_objects = 4096, 3, 40
    callbacks = types.SimpleNamespace()
    progress = interrupts.received_bytes_progress(report)
    assert progress(stats, ffi.new_handle(callbacks)) == interrupts.REFUSE_STORED
    assert reported == [(4096, 3, 40)]
    assert isinstance(callbacks._stored_exception, KeyboardInterrupt)


def test_a_callback_that_returns_lets_libgit2_go_on() -> None:
    ticks: list[int] = []
    progress = interrupts.quiet_progress(lambda: ticks.append(1))
    assert progress(ffi.NULL, ffi.NULL) == 0 and ticks == [1]
