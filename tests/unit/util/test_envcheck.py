"""util/envcheck: the environment's numbers and switches, checked once and returned as checked."""

from __future__ import annotations

import pytest

from memsync.errors import UsageError
from memsync.util import envcheck


def test_the_check_returns_what_it_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMSYNC_QUIET", "0.5")
    monkeypatch.setenv("MEMSYNC_GC_PACKS", "7")
    monkeypatch.setenv("MEMSYNC_PUSH_QUEUE", "0")
    monkeypatch.setenv("MEMSYNC_SETTLE", " ")  # empty: the reader's default
    found = envcheck.check_environment()
    mine = {"MEMSYNC_QUIET", "MEMSYNC_GC_PACKS", "MEMSYNC_PUSH_QUEUE", "MEMSYNC_SETTLE"}
    assert {k: v for k, v in found.items() if k in mine} == {"MEMSYNC_QUIET": 0.5, "MEMSYNC_GC_PACKS": 7,
                                                             "MEMSYNC_PUSH_QUEUE": False}
    assert type(found["MEMSYNC_GC_PACKS"]) is int
    assert envcheck.number("MEMSYNC_QUIET", 2.0) == 0.5
    assert envcheck.number("MEMSYNC_SETTLE", 0.25) == 0.25
    assert envcheck.switch("MEMSYNC_PUSH_QUEUE") is False


@pytest.mark.parametrize(("name", "raw"), [("MEMSYNC_TURN_TIMEOUT", "soon"), ("MEMSYNC_TURN_TIMEOUT", "-1"),
                                           ("MEMSYNC_GC_LOOSE", "1.5"), ("MEMSYNC_QUIET", "nan")])
def test_a_reader_gets_the_same_refusal_as_the_check(monkeypatch: pytest.MonkeyPatch, name: str, raw: str) -> None:
    """A library caller that never ran check_environment is refused the same way, not handed a
    silent default."""
    monkeypatch.setenv(name, raw)
    with pytest.raises(UsageError) as info:
        envcheck.number(name, 1.0)
    assert name in info.value.message and info.value.hint
    with pytest.raises(UsageError):
        envcheck.check_environment()


def test_a_switch_is_0_or_1(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMSYNC_PUSH_QUEUE", "off")
    with pytest.raises(UsageError):
        envcheck.switch("MEMSYNC_PUSH_QUEUE")
    monkeypatch.setenv("MEMSYNC_PUSH_QUEUE", "1")
    assert envcheck.switch("MEMSYNC_PUSH_QUEUE", default=False) is True


def test_every_reader_of_a_number_takes_envchecks_value(monkeypatch: pytest.MonkeyPatch) -> None:
    """The readers spread over the layers parse nothing themselves: what envcheck accepted is what
    they return (surrounding blanks included), and what it refuses they refuse."""
    from memsync.core import locking
    from memsync.git import remote
    from memsync.run import session, stopping
    from memsync.sync import gc, proposals

    readers = {"MEMSYNC_LOCK_TIMEOUT": locking.lock_timeout, "MEMSYNC_PUSH_PATIENCE": remote.push_patience,
               "MEMSYNC_QUIET": session.quiet_seconds, "MEMSYNC_SETTLE": session.settle_seconds,
               "MEMSYNC_STOP_GRACE": stopping.stop_grace, "MEMSYNC_PROPOSAL_DAYS": gc.proposal_days,
               "MEMSYNC_MAX_PROPOSALS": proposals.max_open}
    for name, read in readers.items():
        monkeypatch.setenv(name, " 7 ")
        assert read() == 7
        monkeypatch.setenv(name, "x")
        with pytest.raises(UsageError, match=name):
            read()
        monkeypatch.delenv(name)
