"""GitRepo.let_go: a large index and libgit2's caches given up before a pack is built, the
repository still read right afterwards, a shallow one included (`Repository.free()` alone made
libgit2 forget `.git/shallow`, and a walk then went looking for the parents a clone left out)."""

from __future__ import annotations

from pathlib import Path

import pygit2

from memsync.git.repo import GitRepo
from tests.conftest import git, write


def _shallow_clone(tmp_path: Path) -> GitRepo:
    src = tmp_path / "src"
    git("init", "-q", "-b", "main", str(src), cwd=tmp_path)
    for i in range(3):
        write(src, f"n{i}.md", f"{i}\n")
        git("add", "-A", cwd=src)
        git("-c", "user.name=a", "-c", "user.email=a@b", "commit", "-qm", f"v{i}", cwd=src)
    dest = tmp_path / "dest"
    git("clone", "-q", "--depth", "1", f"file://{src}", str(dest), cwd=tmp_path)
    return GitRepo.open(dest)


def test_a_shallow_repository_let_go_still_stops_where_its_history_does(tmp_path: Path) -> None:
    repo = _shallow_clone(tmp_path)
    assert len(repo.index) == 3
    before = repo.reader
    repo.let_go(above=0)
    assert repo.reader is not before  # a new handle: the old one's index and caches given up
    walked = list(repo.reader.walk(repo.reader.head.target, pygit2.enums.SortMode.TOPOLOGICAL))
    assert len(walked) == 1  # the clone's one version; its parent is not looked for
    assert len(repo.index) == 3  # read again from its file


def test_a_small_index_or_one_with_unwritten_changes_is_kept(tmp_path: Path) -> None:
    repo = _shallow_clone(tmp_path)
    index, handle = repo.index, repo.reader
    repo.let_go()  # 3 entries: under the default, nothing to gain
    assert repo.reader is handle and repo.index is index
    repo.index_changed()
    repo.let_go(above=0)  # staged changes not yet written: never dropped
    assert repo.reader is handle and repo.index is index
