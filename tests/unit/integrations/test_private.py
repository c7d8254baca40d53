"""integrations/private: folders a tool creates are 0700 whatever the umask; existing ones are
never touched."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from memsync.integrations.private import DIR_MODE, make_dirs


@pytest.fixture
def umask_zero() -> Iterator[None]:
    """A container's usual umask: everything it makes would be world-writable."""
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


def test_every_missing_folder_is_the_operators_alone(tmp_path: Path, umask_zero: None) -> None:
    existing = tmp_path / "existing"
    existing.mkdir(mode=0o755)
    os.chmod(existing, 0o755)
    make_dirs(existing / "a" / "b" / "c")
    for folder in (existing / "a", existing / "a" / "b", existing / "a" / "b" / "c"):
        assert stat.S_IMODE(folder.stat().st_mode) == DIR_MODE
    assert stat.S_IMODE(existing.stat().st_mode) == 0o755  # not made here: left as it is
    make_dirs(existing / "a")  # all there already: nothing changes
    assert stat.S_IMODE((existing / "a").stat().st_mode) == DIR_MODE
