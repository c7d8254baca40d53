"""core/root: a memory is the nearest folder holding `.vm0/storage.yaml`."""

from __future__ import annotations

from pathlib import Path

from memsync.core.root import find_root
from tests.conftest import write


def test_the_nearest_memory_at_or_above_is_found(tmp_path: Path) -> None:
    write(tmp_path, "outer/.vm0/storage.yaml", "name: outer\n")
    write(tmp_path, "outer/inner/.vm0/storage.yaml", "name: inner\n")
    (tmp_path / "outer" / "inner" / "deep").mkdir()
    assert find_root(tmp_path / "outer" / "inner" / "deep") == (tmp_path / "outer" / "inner").resolve()
    assert find_root(tmp_path / "outer") == (tmp_path / "outer").resolve()


def test_a_vm0_folder_without_its_file_is_no_memory(tmp_path: Path) -> None:
    (tmp_path / "nothing" / ".vm0").mkdir(parents=True)
    assert find_root(tmp_path / "nothing") is None
