"""The Python API: the same operations as the CLI, returning data and raising MemsyncError."""

from __future__ import annotations

from pathlib import Path

import pytest

from memsync import api
from memsync.errors import MemoryNotFound, NotAMemory
from tests.conftest import write


def test_api_round_trip(tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    result = api.init(notes, name="research")
    assert result.created and result.name == "research"
    write(notes, "summary.md", "hello\n")
    pushed = api.push(notes)
    assert pushed.committed and pushed.exchange.pushed
    assert pushed.version is not None and pushed.version.files == 1 and pushed.version.size == 6  # init adds no file
    copy = api.clone("research", tmp_path / "copy")
    assert copy.version is not None and copy.version.oid == pushed.version.oid
    write(notes, "more.md", "more\n")
    api.push(notes)
    pulled = api.pull(tmp_path / "copy")
    assert (tmp_path / "copy" / "more.md").read_text() == "more\n"
    assert pulled.version is not None and pulled.version.files == 2
    report = api.status(tmp_path / "copy")
    assert (report.ahead, report.behind, report.uncommitted) == (0, 0, [])
    hub, memories = api.list_memories()
    assert hub.endswith("hub.git") and [m.name for m in memories] == ["research"]


def test_api_raises_typed_errors(tmp_path: Path) -> None:
    with pytest.raises(NotAMemory) as info:
        api.push(tmp_path)
    assert info.value.exit_code == 3 and info.value.hint
    with pytest.raises(MemoryNotFound):
        api.clone("missing-one", tmp_path / "x")
