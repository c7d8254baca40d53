"""Losing versions gathered in one file per path (checks/gathered.py, git/merge.py): however
many runs conflict on a path, at most one `*.conflicts.md` beside it; every loser recoverable byte
for byte; two gathered files merge by a union of entries; deleting one (folded) wins over a side
that changed nothing, and an entry added meanwhile survives."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pygit2
import pytest
from pygit2.enums import FileMode

from memsync.checks import gathered
from memsync.git.merge import merge_keep_both
from memsync.util.names import gathered_name, is_conflict_file, is_gathered
from tests.helpers.trees import tree_files

WHEN = datetime(2026, 11, 26, 1, 2, 3, tzinfo=timezone.utc)


class Repo:
    def __init__(self, path: Path) -> None:
        self.repo = pygit2.init_repository(str(path), bare=True)
        self.clock = 1_700_000_000

    def commit(self, files: dict[str, bytes], parents: list[str]) -> str:
        index = pygit2.Index()
        for path, data in files.items():
            index.add(pygit2.IndexEntry(path, self.repo.create_blob(data), FileMode.BLOB))
        tree = index.write_tree(self.repo)
        self.clock += 60
        sig = pygit2.Signature("t", "t@example.invalid", self.clock, 0)
        return str(self.repo.create_commit(None, sig, sig, "v", tree, [pygit2.Oid(hex=p) for p in parents]))

    def merge(self, ours: str, theirs: str, tag: str = "run-x") -> tuple[str, dict[str, bytes]]:
        result = merge_keep_both(self.repo, ours, theirs, tag, now=WHEN)
        sig = pygit2.Signature("t", "t@example.invalid", self.clock, 0)
        oid = self.repo.create_commit(None, sig, sig, "m", pygit2.Oid(hex=result.tree),
                                      [pygit2.Oid(hex=ours), pygit2.Oid(hex=theirs)])
        return str(oid), self.files(str(oid))

    def files(self, commit: str) -> dict[str, bytes]:
        return tree_files(self.repo, commit)


@pytest.fixture
def r(tmp_path: Path) -> Repo:
    return Repo(tmp_path / "r.git")


def _entries(data: bytes) -> dict[str, gathered.Entry]:
    return gathered.parse(data).entries


def _recovered(data: bytes) -> list[bytes]:
    return [e.inline() or b"<none>" for e in sorted(_entries(data).values(), key=lambda e: (e.time, e.id))]


@pytest.mark.parametrize(("path", "name"), [
    ("notes/summary.md", "notes/summary.conflicts.md"),
    ("data.json", "data.json.conflicts.md"),
    ("Makefile", "Makefile.conflicts.md"),
    (".env", ".env.conflicts.md"),
    ("a.b/c.txt", "a.b/c.txt.conflicts.md"),
])
def test_the_naming_rule(path: str, name: str) -> None:
    assert gathered_name(path) == name
    assert is_gathered(name) and not is_gathered(path)
    assert is_conflict_file(name)
    assert is_conflict_file("notes/summary.conflict-run-1-20261126T010203Z.md")  # old copies still count


def test_one_conflict_is_gathered_with_its_run_version_blob_and_bytes(r: Repo) -> None:
    base = r.commit({"notes/summary.md": b"base\n"}, [])
    ours = r.commit({"notes/summary.md": b"ours\n"}, [base])
    theirs = r.commit({"notes/summary.md": b"theirs\n"}, [base])
    result = merge_keep_both(r.repo, ours, theirs, "run-7", now=WHEN)
    tree = r.repo[result.tree].peel(pygit2.Tree)
    assert sorted(str(e.name) for e in tree["notes"].peel(pygit2.Tree)) == ["summary.conflicts.md", "summary.md"]
    data = tree["notes/summary.conflicts.md"].peel(pygit2.Blob).data
    (entry,) = _entries(data).values()
    blob = str(r.repo.create_blob(b"theirs\n"))
    assert entry.id == f"{theirs[:8]}-{blob[:8]}"
    assert entry.field("run") == "run-7" and entry.field("version") == theirs and entry.blob == blob
    assert entry.path == "notes/summary.md" and entry.size == 7 and entry.inline() == b"theirs\n"
    assert f"memsync restore notes/summary.md --conflict {entry.id}" in data.decode()
    assert data.startswith(b"# Versions of notes/summary.md that lost a concurrent edit\n")
    assert [(c.path, c.copy) for c in result.conflicts] == [("notes/summary.md", "notes/summary.conflicts.md")]


def test_many_conflicts_one_file_every_loser_kept(r: Repo) -> None:
    """A chain of runs each losing to the next: the tree never holds more than one conflict file."""
    head = r.commit({"summary.md": b"v0\n"}, [])
    for n in range(1, 8):
        mine = r.commit({**r.files(head), "summary.md": f"mine {n}\n".encode()}, [head])
        other = r.commit({**r.files(head), "summary.md": f"other {n}\n".encode()}, [head])
        head, files = r.merge(mine, other, f"run-{n}")
        assert sorted(files) == ["summary.conflicts.md", "summary.md"]
        assert files["summary.md"] == f"mine {n}\n".encode()
    assert _recovered(files["summary.conflicts.md"]) == [f"other {n}\n".encode() for n in range(1, 8)]


@pytest.mark.parametrize("content", [
    b"```\ncode\n```\n",
    b"no newline at the end",
    b"",
    b"\n",
    b"````` five\r\n``` three\r\n",
    b"<!-- memsync-conflict 00000000-00000000 20261126T010203Z -->\nquoted marker\n",
])
def test_tricky_text_is_recovered_byte_for_byte(r: Repo, content: bytes) -> None:
    base = r.commit({"s.md": b"base\n"}, [])
    ours = r.commit({"s.md": b"ours\n"}, [base])
    theirs = r.commit({"s.md": content}, [base])
    _, files = r.merge(ours, theirs)
    (entry,) = _entries(files["s.conflicts.md"]).values()
    assert entry.inline() == content
    assert entry.blob == str(pygit2.hash(content))


def test_binary_is_recorded_by_blob_not_inlined(r: Repo) -> None:
    blob = b"\x89PNG\x00\xff\xfe" * 10
    base = r.commit({"img.bin": b"a\x00"}, [])
    ours = r.commit({"img.bin": b"b\x00"}, [base])
    theirs = r.commit({"img.bin": blob}, [base])
    _, files = r.merge(ours, theirs)
    (entry,) = _entries(files["img.bin.conflicts.md"]).values()
    assert entry.inline() is None and entry.blob == str(pygit2.hash(blob)) and entry.size == len(blob)
    assert f"git cat-file blob {entry.blob}" in entry.text


def _gathered_with(r: Repo, parent: str, files: dict[str, bytes], n: int) -> str:
    """A version of `parent` where summary.md lost run-`n`'s rewrite (a merge that gathered it)."""
    mine = r.commit({**files, "summary.md": f"kept {n}\n".encode()}, [parent])
    other = r.commit({**files, "summary.md": f"lost {n}\n".encode()}, [parent])
    head, _ = r.merge(mine, other, f"run-{n}")
    return head


def test_two_runs_adding_at_once_merge_by_union_never_a_second_file(r: Repo) -> None:
    start = r.commit({"summary.md": b"v0\n"}, [])
    first = _gathered_with(r, start, {}, 1)
    one = _gathered_with(r, first, r.files(first), 2)
    ours = _gathered_with(r, one, r.files(one), 3)
    theirs = _gathered_with(r, one, r.files(one), 4)
    _, files = r.merge(ours, theirs)
    assert sorted(files) == ["summary.conflicts.md", "summary.md"]
    got = _recovered(files["summary.conflicts.md"])
    for n in (1, 2, 3, 4):
        assert f"lost {n}\n".encode() in got
    assert f"kept {4}\n".encode() in got  # theirs' summary.md lost this merge: gathered too
    assert len(got) == len(set(got)) == 5
    _, files2 = r.merge(theirs, ours)  # from the other side: the same lost entries, in the same order
    order = [v for v in _recovered(files2["summary.conflicts.md"]) if v.startswith(b"lost")]
    assert order == [v for v in got if v.startswith(b"lost")]
    written = list(_entries(files["summary.conflicts.md"]).values())
    assert written == sorted(written, key=lambda e: (e.time, e.id))


def test_deleting_the_gathered_file_wins_over_a_side_that_changed_nothing(r: Repo) -> None:
    start = r.commit({"summary.md": b"v0\n", "a.md": b"a\n"}, [])
    one = _gathered_with(r, start, r.files(start), 1)
    files = r.files(one)
    folded = r.commit({k: v for k, v in files.items() if k != "summary.conflicts.md"} | {"summary.md": b"all\n"},
                      [one])
    other = r.commit({**files, "a.md": b"a2\n"}, [one])
    for ours, theirs in ((folded, other), (other, folded)):
        _, merged = r.merge(ours, theirs)
        assert "summary.conflicts.md" not in merged and merged["a.md"] == b"a2\n"


def test_an_entry_added_while_the_file_was_deleted_survives(r: Repo) -> None:
    start = r.commit({"summary.md": b"v0\n"}, [])
    one = _gathered_with(r, start, {}, 1)
    files = r.files(one)
    folded = r.commit({"summary.md": b"folded 1\n"}, [one])
    added = _gathered_with(r, one, files, 2)
    for ours, theirs in ((folded, added), (added, folded)):
        _, merged = r.merge(ours, theirs)
        assert sorted(merged) == ["summary.conflicts.md", "summary.md"]
        got = _recovered(merged["summary.conflicts.md"])
        assert b"lost 1\n" not in got  # folded by the deleter
        assert b"lost 2\n" in got  # added meanwhile: kept


def test_a_partial_fold_removes_only_that_entry(r: Repo) -> None:
    start = r.commit({"summary.md": b"v0\n"}, [])
    first = _gathered_with(r, start, {}, 1)
    two = _gathered_with(r, first, r.files(first), 2)
    files = r.files(two)
    doc = gathered.parse(files["summary.conflicts.md"])
    oldest = min(doc.entries.values(), key=lambda e: (e.time, e.id))
    rest = gathered.Gathered(doc.preamble, {k: v for k, v in doc.entries.items() if k != oldest.id})
    trimmed = r.commit({**files, "summary.conflicts.md": gathered.render(rest)}, [two])
    more = _gathered_with(r, two, files, 3)
    _, merged = r.merge(trimmed, more)
    got = _recovered(merged["summary.conflicts.md"])
    assert b"lost 1\n" not in got and b"lost 2\n" in got and b"lost 3\n" in got


def test_merge3_cases() -> None:
    one = gathered.Loser("s.md", b"one\n", "a" * 40, "r1", "1" * 40, WHEN)
    two = gathered.Loser("s.md", b"two\n", "b" * 40, "r2", "2" * 40, WHEN)
    base = gathered.add(None, [one])
    both = gathered.add(base, [two])
    assert gathered.merge3(base, None, base) is None  # deleted vs unchanged: deleted
    assert gathered.merge3(base, None, None) is None
    kept = gathered.merge3(base, None, both)
    assert kept is not None and list(_entries(kept)) == [two.id]
    assert gathered.merge3(None, base, base) == base  # both added the same entry
    assert gathered.add(both, [one, two]) == both  # never twice


def test_a_path_an_entry_cannot_name_keeps_the_old_sibling_copy(r: Repo) -> None:
    base = r.commit({"we`ird.md": b"base\n"}, [])
    ours = r.commit({"we`ird.md": b"ours\n"}, [base])
    theirs = r.commit({"we`ird.md": b"theirs\n"}, [base])
    _, files = r.merge(ours, theirs, "run-9")
    assert files["we`ird.md"] == b"ours\n"
    assert files["we`ird.conflict-run-9-20261126T010203Z.md"] == b"theirs\n"
    assert not [p for p in files if is_gathered(p)]
