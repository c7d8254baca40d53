"""core/orphans: what a killed `run --as-user` left is taken back by the next command as root:
the tree handed back, the mark kept without its --as-user record; nothing without root, for uid
0, or for a mark memsync did not write."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from memsync.core import lending
from memsync.core.orphans import reclaim
from memsync.util import notices
from tests.conftest import write

USER = 54329  # a uid no process runs as


@pytest.mark.skipif(os.geteuid() != 0, reason="taking a tree back needs root")
def test_a_dead_runs_lent_tree_is_taken_back_and_the_mark_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    said: list[str] = []
    monkeypatch.setattr(notices, "handler", said.append)
    notices.reset()
    root = tmp_path / "memory"
    note = write(root, "notes.md", "x\n")
    st = root.stat()
    lent = lending.Lent(os.getuid(), os.getgid(), 0o755, st.st_dev, st.st_ino, {}, {})
    for path in (root, note):
        os.chown(path, USER, USER)
    mark = tmp_path / "memsync-run.json"
    data = {"run_id": "r-dead", "pid": 1, "as_user": {"uid": USER, "lent": lending.lent_fields(lent)}}
    mark.write_text(json.dumps(data))
    reclaim(root, mark, "research", data)
    assert note.stat().st_uid == os.getuid() and root.stat().st_uid == os.getuid()
    assert json.loads(mark.read_text()) == {"run_id": "r-dead", "pid": 1}  # still that run's
    assert any("r-dead" in s and "taken back" in s for s in said)


@pytest.mark.parametrize("as_user", [None, "54329", {"uid": 0}, {"uid": "x"}, {}])
def test_nothing_is_done_for_a_mark_without_a_usable_record(tmp_path: Path, as_user: object) -> None:
    mark = tmp_path / "memsync-run.json"
    data = {"run_id": "r", "as_user": as_user}
    mark.write_text(json.dumps(data))
    reclaim(tmp_path, mark, "research", data)
    assert json.loads(mark.read_text()) == data
