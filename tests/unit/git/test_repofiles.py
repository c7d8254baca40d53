"""git/repofiles: the hooks installer's questions about a project's own repository."""

from __future__ import annotations

from pathlib import Path

import pygit2

from memsync.git.repofiles import exclude, is_tracked
from tests.conftest import write

WHO = pygit2.Signature("t", "t@example.com")


def test_tracked_in_the_index_or_head_only(tmp_path: Path) -> None:
    repo = pygit2.init_repository(str(tmp_path / "project"))
    root = tmp_path / "project"
    settings = write(root, ".claude/settings.json", "{}\n")
    assert not is_tracked(root, settings)  # unborn, not added
    repo.index.add(".claude/settings.json")
    repo.index.write()
    assert is_tracked(root / ".claude", settings)
    repo.create_commit("HEAD", WHO, WHO, "m\n", repo.index.write_tree(), [])
    repo.index.remove(".claude/settings.json")
    repo.index.write()
    assert is_tracked(root, settings)  # still in HEAD
    assert not is_tracked(root, tmp_path / "elsewhere.json") and not is_tracked(tmp_path, settings)


def test_a_personal_file_is_excluded_once(tmp_path: Path) -> None:
    pygit2.init_repository(str(tmp_path / "project"))
    root = tmp_path / "project"
    local = write(root, ".claude/settings.local.json", "{}\n")
    target = exclude(root, local)
    assert target == root / ".git" / "info" / "exclude"
    assert exclude(root, local) == target
    assert target.read_text().splitlines().count("/.claude/settings.local.json") == 1
    assert exclude(tmp_path, local) is None  # outside a repository
