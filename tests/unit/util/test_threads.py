"""util/threads: every thread memsync starts blocks the stop signals, and join_all waits
through Ctrl-C."""

from __future__ import annotations

import ast
import os
import signal
import threading
import time
from pathlib import Path

import pytest

import memsync
from memsync.util.threads import STOP_SIGNALS, helper_body, join_all


def test_every_thread_memsync_starts_runs_a_helper_body() -> None:
    """The rule the module states, held over the source: a `threading.Thread(...)` whose target
    is not wrapped by helper_body would take a SIGTERM the main thread must."""
    unwrapped = []
    for path in Path(memsync.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and ast.unparse(node.func) == "threading.Thread":
                target = next((k.value for k in node.keywords if k.arg == "target"), None)
                if not (isinstance(target, ast.Call) and ast.unparse(target.func) == "helper_body"):
                    unwrapped.append(f"{path.name}:{node.lineno}")
    assert unwrapped == []


def test_a_helper_body_blocks_the_stop_signals_in_its_thread_only() -> None:
    seen: list[set[int]] = []

    def look() -> None:
        seen.append(signal.pthread_sigmask(signal.SIG_BLOCK, []))

    thread = threading.Thread(target=helper_body(look))
    thread.start()
    thread.join()
    assert set(STOP_SIGNALS) <= seen[0]
    assert not set(STOP_SIGNALS) & signal.pthread_sigmask(signal.SIG_BLOCK, [])


def test_join_all_waits_through_ctrl_c_then_raises_it() -> None:
    """A SIGINT to the process while the thread still runs (the helpers block it, so only the
    main thread can take it): join_all waits for the thread to end, then raises it. A loop of
    join() and is_alive() stopped waiting at once: Python 3.11 marks the thread stopped."""
    ended: list[bool] = []

    def work() -> None:
        time.sleep(0.5)
        ended.append(True)

    def interrupt() -> None:
        time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGINT)

    thread = threading.Thread(target=helper_body(work))
    sender = threading.Thread(target=helper_body(interrupt))
    thread.start()
    sender.start()
    with pytest.raises(KeyboardInterrupt):
        join_all([thread])
    assert ended == [True] and not thread.is_alive()
    sender.join()
