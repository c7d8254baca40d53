"""git/treediff: a version's change counts taken as the walk goes equal those of the deltas list."""

from __future__ import annotations

from pathlib import Path

import pygit2

from memsync.git import treediff


def _tree(repo: pygit2.Repository, files: dict[str, bytes]) -> pygit2.Oid:
    index = pygit2.Index()
    for path, data in files.items():
        index.add(pygit2.IndexEntry(path, repo.create_blob(data), pygit2.enums.FileMode.BLOB))
    return index.write_tree(repo)


def test_tally_counts_what_the_deltas_count(tmp_path: Path) -> None:
    repo = pygit2.init_repository(str(tmp_path / "r.git"), bare=True)
    first = {"notes.md": b"a" * 100, "deep/er/log.md": b"b" * 50, "summary.md": b"s" * 10,
             "summary.conflicts.md": b"c" * 5}
    second = {**first, "notes.md": b"a" * 40, "deep/er/new.md": b"n" * 7,
              "summary.conflict-r1-20261126T010203Z.md": b"x" * 3, "summary.conflicts.md": b"c" * 9}
    del second["deep/er/log.md"]
    old, new = _tree(repo, first), _tree(repo, second)
    for before, after in ((None, old), (old, new), (new, old)):
        assert treediff.tally(repo, before, after) == treediff.counts(treediff.deltas(repo, before, after))
    files, added, removed, copies = treediff.tally(repo, old, new)
    assert (files, added, removed) == (5, 7 + 3 + 4, 60 + 50)
    assert copies == ["summary.conflict-r1-20261126T010203Z.md", "summary.conflicts.md"]
