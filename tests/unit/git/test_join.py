"""git/join: two histories of one memory that never met are joined keeping both sides' files:
theirs beside ours as a conflict copy when they differ, never over a file or a folder (a folder
of theirs where ours has a file once looped for ever looking for a free name under that file)."""

from __future__ import annotations

from pathlib import Path

import pygit2

from memsync.git.join import join_unrelated
from memsync.git.repo import GitRepo
from tests.helpers.trees import tree_files

WHO = pygit2.Signature("t", "t@example.com")


def _root_commit(repo: pygit2.Repository, files: dict[str, bytes]) -> str:
    index = pygit2.Index()
    for path, data in files.items():
        index.add(pygit2.IndexEntry(path, repo.create_blob(data), pygit2.enums.FileMode.BLOB))
    return str(repo.create_commit(None, WHO, WHO, "start\n", index.write_tree(repo), []))


def test_both_sides_files_are_kept_and_theirs_parents_first(tmp_path: Path) -> None:
    git = GitRepo.bare(tmp_path / "repo.git", create=True)
    repo = pygit2.Repository(str(tmp_path / "repo.git"))
    ours = _root_commit(repo, {"summary.md": b"ours\n", "same.md": b"same\n", "notes": b"a file here\n"})
    theirs = _root_commit(repo, {"summary.md": b"theirs\n", "same.md": b"same\n", "runs/r1.md": b"r1\n",
                                 "notes/deep.md": b"a folder there\n"})
    joined = join_unrelated(git, ours, theirs, "laptop", "join\n")
    files = tree_files(repo, joined)
    assert files["summary.md"] == b"ours\n" and files["same.md"] == b"same\n" and files["runs/r1.md"] == b"r1\n"
    copies = {p: d for p, d in files.items() if ".conflict-laptop" in p}
    assert sorted(copies.values()) == [b"a folder there\n", b"theirs\n"]  # beside ours, never over
    assert files["notes"] == b"a file here\n"
    assert any(p.startswith("notes.conflict-laptop-") and p.endswith("/deep.md") for p in copies)  # the folder renamed
    assert [str(p) for p in repo[joined].peel(pygit2.Commit).parent_ids] == [theirs, ours]
