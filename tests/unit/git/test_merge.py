"""The keep-both merge itself (memsync/git/merge.py), on real repositories: both sides of every
conflict stay in the tree (ours at the path, theirs in the path's gathered NAME.conflicts.md,
byte for byte), a
modification beats a deletion, a file and a directory at one path both survive, and clean
three-way merges stay clean."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pygit2
import pytest
from pygit2.enums import FileMode

from memsync.checks import gathered
from memsync.errors import RepoError
from memsync.git.merge import merge_keep_both
from tests.helpers.gathered import losers
from tests.helpers.trees import tree_files

WHEN = datetime(2026, 11, 26, 1, 2, 3, tzinfo=timezone.utc)
SIG = pygit2.Signature("t", "t@example.invalid", 1_700_000_000, 0)


class Repo:
    def __init__(self, path: Path) -> None:
        self.repo = pygit2.init_repository(str(path), bare=True)

    def commit(self, files: dict[str, bytes], parents: list[str]) -> str:
        index = pygit2.Index()
        for path, data in files.items():
            index.add(pygit2.IndexEntry(path, self.repo.create_blob(data), FileMode.BLOB))
        tree = index.write_tree(self.repo)
        return str(self.repo.create_commit(None, SIG, SIG, "v", tree, [pygit2.Oid(hex=p) for p in parents]))

    def files(self, tree: str) -> dict[str, bytes]:
        return tree_files(self.repo, tree)


@pytest.fixture
def r(tmp_path: Path) -> Repo:
    return Repo(tmp_path / "r.git")


def test_both_modified_keeps_ours_at_the_path_and_theirs_beside_it(r: Repo) -> None:
    base = r.commit({"summary.md": b"line\n", "other.md": b"o\n"}, [])
    ours = r.commit({"summary.md": b"ours\n", "other.md": b"o\n"}, [base])
    theirs = r.commit({"summary.md": b"theirs\n", "other.md": b"o\n"}, [base])
    result = merge_keep_both(r.repo, ours, theirs, "run-7", now=WHEN)
    files = r.files(result.tree)
    assert files["summary.md"] == b"ours\n"
    copy = "summary.conflicts.md"
    assert losers(files, "summary.md") == [b"theirs\n"]
    assert [(c.path, c.copy, c.reason) for c in result.conflicts] == [("summary.md", copy, "both modified")]
    assert files["other.md"] == b"o\n"


def test_both_added_is_a_conflict_too(r: Repo) -> None:
    base = r.commit({"a.md": b"a\n"}, [])
    ours = r.commit({"a.md": b"a\n", "new.md": b"mine\n"}, [base])
    theirs = r.commit({"a.md": b"a\n", "new.md": b"yours\n"}, [base])
    result = merge_keep_both(r.repo, ours, theirs, "x", now=WHEN)
    files = r.files(result.tree)
    assert files["new.md"] == b"mine\n" and losers(files, "new.md") == [b"yours\n"]
    assert result.conflicts[0].reason == "both added"


def test_a_modification_beats_a_deletion_from_either_side(r: Repo) -> None:
    base = r.commit({"a.md": b"a\n", "b.md": b"b\n"}, [])
    ours = r.commit({"a.md": b"a changed\n"}, [base])  # we changed a, deleted b
    theirs = r.commit({"b.md": b"b changed\n"}, [base])  # they deleted a, changed b
    result = merge_keep_both(r.repo, ours, theirs, "x", now=WHEN)
    assert r.files(result.tree) == {"a.md": b"a changed\n", "b.md": b"b changed\n"}
    assert sorted(result.kept_modified) == ["a.md", "b.md"]
    assert result.conflicts == []


def test_a_file_and_a_directory_at_one_path_both_survive(r: Repo) -> None:
    base = r.commit({"x.md": b"x\n"}, [])
    ours = r.commit({"x.md": b"x\n", "notes": b"a file\n"}, [base])
    theirs = r.commit({"x.md": b"x\n", "notes/inside.md": b"in a folder\n"}, [base])
    result = merge_keep_both(r.repo, ours, theirs, "x", now=WHEN)
    files = r.files(result.tree)
    assert files["notes/inside.md"] == b"in a folder\n"
    copies = [p for p in files if p.startswith("notes.conflict-")]
    assert len(copies) == 1 and files[copies[0]] == b"a file\n"


def test_binary_files_are_kept_both(r: Repo) -> None:
    base = r.commit({"img.bin": b"\0base"}, [])
    ours = r.commit({"img.bin": b"\0ours"}, [base])
    theirs = r.commit({"img.bin": b"\0theirs"}, [base])
    files = r.files(merge_keep_both(r.repo, ours, theirs, "x", now=WHEN).tree)
    assert files["img.bin"] == b"\0ours"
    (entry,) = gathered.parse(files["img.bin.conflicts.md"]).entries.values()
    assert entry.inline() is None and entry.blob == str(pygit2.hash(b"\0theirs"))  # binary: by blob id


def test_changes_to_different_lines_merge_cleanly(r: Repo) -> None:
    base = r.commit({"s.md": b"1\n2\n3\n4\n5\n"}, [])
    ours = r.commit({"s.md": b"one\n2\n3\n4\n5\n"}, [base])
    theirs = r.commit({"s.md": b"1\n2\n3\n4\nfive\n"}, [base])
    result = merge_keep_both(r.repo, ours, theirs, "x", now=WHEN)
    assert r.files(result.tree) == {"s.md": b"one\n2\n3\n4\nfive\n"} and result.conflicts == []


def test_an_old_style_copy_stays_and_a_new_loser_is_gathered(r: Repo) -> None:
    copy = "s.conflict-x-20261126T010203Z.md"
    base = r.commit({"s.md": b"base\n", copy: b"an older copy\n"}, [])
    ours = r.commit({"s.md": b"ours\n", copy: b"an older copy\n"}, [base])
    theirs = r.commit({"s.md": b"theirs\n", copy: b"an older copy\n"}, [base])
    files = r.files(merge_keep_both(r.repo, ours, theirs, "x", now=WHEN).tree)
    assert files[copy] == b"an older copy\n" and losers(files, "s.md") == [b"theirs\n"]


def test_a_folder_where_the_gathered_file_would_go_gets_a_numbered_sibling_copy(r: Repo) -> None:
    folder = "s.conflicts.md/readme.md"
    copy = "s.conflict-x-20261126T010203Z.md"
    base = r.commit({"s.md": b"base\n", folder: b"f\n", copy: b"an older copy\n"}, [])
    ours = r.commit({"s.md": b"ours\n", folder: b"f\n", copy: b"an older copy\n"}, [base])
    theirs = r.commit({"s.md": b"theirs\n", folder: b"f\n", copy: b"an older copy\n"}, [base])
    files = r.files(merge_keep_both(r.repo, ours, theirs, "x", now=WHEN).tree)
    assert files[copy] == b"an older copy\n" and files[f"{copy}.2"] == b"theirs\n" and files[folder] == b"f\n"


def test_unrelated_histories_are_refused(r: Repo) -> None:
    ours = r.commit({"a.md": b"a\n"}, [])
    theirs = r.commit({"b.md": b"b\n"}, [])
    with pytest.raises(RepoError, match="share no history"):
        merge_keep_both(r.repo, ours, theirs, "x", now=WHEN)
