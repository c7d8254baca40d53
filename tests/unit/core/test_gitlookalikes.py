"""core/gitlookalikes: folders named `.git` in another letter case, which libgit2's walk never
shows, are found (not inside the memory's own `.git` or a nested repository)."""

from __future__ import annotations

from pathlib import Path

import pytest

from memsync.core.gitlookalikes import beside, unseen_git_folders
from tests.conftest import write


def test_lookalikes_are_named_and_real_repositories_are_not_entered(tmp_path: Path) -> None:
    write(tmp_path, ".git/HEAD", "ref: refs/heads/main\n")  # the memory's own
    write(tmp_path, ".GIT/hidden.md", "x\n")
    write(tmp_path, "notes/.Git/also.md", "x\n")
    write(tmp_path, "nested/.git/HEAD", "x\n")  # a nested repository: not entered
    write(tmp_path, "nested/.GIT/inside.md", "x\n")
    write(tmp_path, ".vm0/.GIT/config.md", "x\n")  # the local configuration is not the memory's
    assert unseen_git_folders(tmp_path) == [".GIT", "notes/.Git"]


def test_a_plain_tree_has_none(tmp_path: Path) -> None:
    write(tmp_path, "a/b/c.md", "x\n")
    assert unseen_git_folders(tmp_path) == []


def test_the_walk_beside_finds_the_same(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Walked in a thread begun before (a run's scan meanwhile), or when asked (switched off)."""
    write(tmp_path, ".git/HEAD", "ref: refs/heads/main\n")
    write(tmp_path, "deep/er/.gIT/x.md", "x\n")
    for switched_off in ("0", "1"):
        monkeypatch.setenv("MEMSYNC_NO_EARLY_WALK", switched_off)
        assert beside(tmp_path)() == ["deep/er/.gIT"]
    (tmp_path / "gone").mkdir()
    assert beside(tmp_path / "gone")() == []
