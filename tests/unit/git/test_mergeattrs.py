"""git/mergeattrs: whatever a `.gitattributes` in the tree says, libgit2 merges every file with
its default line merge (memsync's policy goes on top), and the rule is kept last, once."""

from __future__ import annotations

import os
from pathlib import Path

import pygit2

from memsync.git.mergeattrs import BLOCK, neutralize


def _repo(tmp_path: Path) -> pygit2.Repository:
    return pygit2.init_repository(str(tmp_path / "work"))


def test_a_tree_rule_file_no_longer_chooses_the_merge(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    (tmp_path / "work" / ".gitattributes").write_text("* merge=union\n*.json merge=ours\n")
    assert repo.get_attr("state.json", "merge") == "ours"
    neutralize(repo)
    assert repo.get_attr("state.json", "merge") is True and repo.get_attr("notes.md", "merge") is True


def test_the_operators_own_lines_are_kept_and_the_rule_stays_last_once(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    attributes = Path(repo.path) / "info" / "attributes"
    attributes.parent.mkdir(exist_ok=True)
    attributes.write_text(BLOCK + "*.txt text eol=lf")  # the block no longer last, no final newline
    neutralize(repo)
    assert attributes.read_text() == "*.txt text eol=lf\n" + BLOCK
    before = attributes.stat().st_mtime_ns, attributes.stat().st_ino
    neutralize(repo)  # already right: not written again
    assert (attributes.stat().st_mtime_ns, attributes.stat().st_ino) == before


def test_a_planted_link_is_replaced_never_written_through(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    victim = tmp_path / "victim.txt"
    victim.write_text("not memsync's\n")
    info = Path(repo.path) / "info"
    info.mkdir(exist_ok=True)
    os.symlink(victim, info / "attributes")
    neutralize(repo)
    assert victim.read_text() == "not memsync's\n"
    assert not (info / "attributes").is_symlink() and (info / "attributes").read_text() == BLOCK
