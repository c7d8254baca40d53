"""util/notices: the core warns without printing; each message reaches the handler once."""

from __future__ import annotations

import pytest

from memsync.util import notices


def test_each_message_is_delivered_once_until_reset(monkeypatch: pytest.MonkeyPatch) -> None:
    got: list[str] = []
    monkeypatch.setattr(notices, "handler", got.append)  # the documented way to install a handler
    notices.reset()
    notices.warn("unknown key 'x'")
    notices.warn("unknown key 'x'")
    notices.warn("another")
    assert got == ["unknown key 'x'", "another"]
    notices.reset()
    notices.warn("unknown key 'x'")
    assert got[-1] == "unknown key 'x'" and len(got) == 3
