"""git/localignores: a run follows only the operator's ignore rules (info/exclude, the global
excludes file); the operator's own commits also follow `.gitignore` files that are the
operator's, a deeper one's verdict winning, as in git."""

from __future__ import annotations

from pathlib import Path

import pygit2
from pygit2.enums import ConfigLevel

from memsync.git.localignores import LocalIgnores
from tests.conftest import write


def test_a_tree_gitignore_hides_nothing_from_a_run(memory: Path) -> None:
    write(memory, ".gitignore", "*.md\n")
    write(memory, ".git/info/exclude", "scratch/\n*.swp\n")
    rules = LocalIgnores(pygit2.Repository(str(memory)))
    assert not rules.hides("notes.md")  # only the tree's file says so
    assert rules.hides("scratch/") and rules.hides("deep/x.swp")


def test_the_users_excludes_file_counts(memory: Path, tmp_path: Path) -> None:
    xdg = pygit2.settings.search_path[ConfigLevel.XDG]  # where libgit2 looks without core.excludesFile
    write(Path(xdg), "ignore", "*.bak\n")
    repo = pygit2.Repository(str(memory))
    assert LocalIgnores(repo).hides("notes/old.bak")
    repo.config["core.excludesFile"] = str(write(tmp_path, "my-excludes", "*.orig\n"))
    rules = LocalIgnores(repo)
    assert rules.hides("a.orig") and not rules.hides("old.bak")  # the configured file replaces it


def test_the_operators_own_gitignore_counts_for_the_operators_commits(memory: Path) -> None:
    write(memory, ".gitignore", "*.log\n")  # a local edit: not on the hub
    write(memory, "deep/.gitignore", "!keep.log\n")
    repo = pygit2.Repository(str(memory))
    repo.index.read()
    repo.index.add("deep/.gitignore")  # tracked: a candidate
    repo.index.write()
    rules = LocalIgnores(repo, tree_rules=True)
    assert rules.hides("build.log") and rules.hides("deep/other.log")
    assert not rules.hides("deep/keep.log")  # the deeper file's verdict wins
    assert not LocalIgnores(repo).hides("build.log")  # a run: the tree's rules decide nothing


def test_files_under_a_folder_git_skipped_are_listed_or_named_hidden(memory: Path) -> None:
    write(memory, "skipped/a.md", "a\n")
    write(memory, "skipped/tmp/b.md", "b\n")
    write(memory, "skipped/nested/.git/HEAD", "ref: refs/heads/main\n")
    write(memory, ".git/info/exclude", "tmp/\n")
    repo = pygit2.Repository(str(memory))
    found, hidden = LocalIgnores(repo).files_under(memory, "skipped/", repo.index)
    assert found == ["skipped/a.md"] and hidden == ["skipped/tmp/"]
