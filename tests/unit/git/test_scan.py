"""git/scan.own_exclude: memsync's own exclude rules, matched as git matches them in info/exclude."""

from __future__ import annotations

from pathlib import Path

import pygit2
import pytest

from memsync.git.repo import EXCLUDES
from memsync.git.scan import own_exclude

HIDDEN = [".vm0/", ".vm0/storage.yaml", "notes/a.swp", "a.swo", "b.swx", ".c.swn", "deep/.x.swz", "draft.md~",
          ".#summary.md", "#summary.md#", "deep/#x#", "4913", "deep/4913", ".tmp.abc", "deep/.tmp.1", "a.tmp",
          "half.tmp/", ".memsync-lease", "deep/.memsync-x"]
SHOWN = ["notes.md", "swp.md", "a.swpx", "4913.md", "x4913", "#draft", "tmp.md", "a.tmp.md", "memsync-x",
         "vm0/x", "deep/.vm0/storage.yaml", "notes/", "x/a.md"]


@pytest.fixture(scope="module")
def git_verdict(tmp_path_factory: pytest.TempPathFactory) -> pygit2.Repository:
    """A repository whose only ignore rules are memsync's, written where memsync writes them."""
    root = tmp_path_factory.mktemp("excl")
    repo = pygit2.init_repository(str(root))
    (Path(repo.path) / "info").mkdir(exist_ok=True)
    (Path(repo.path) / "info" / "exclude").write_text(EXCLUDES, encoding="utf-8")
    return repo


@pytest.mark.parametrize("path", HIDDEN + SHOWN)
def test_own_exclude_agrees_with_git(git_verdict: pygit2.Repository, path: str) -> None:
    assert own_exclude(path) is (path in HIDDEN)
    assert bool(git_verdict.path_is_ignored(path)) is (path in HIDDEN)
