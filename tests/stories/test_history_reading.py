"""Reading history at a cost that follows what is shown, not the length of history (issue 14):
the per-version tree diff that `log` computes, and the streamed walk behind `log -n N`."""

from __future__ import annotations

import random
from pathlib import Path

import pygit2
import pytest
from pygit2.enums import FileMode, ObjectType

from memsync.git import filters, history, treediff
from memsync.git.repo import GitRepo
from tests.conftest import Cli, hub_tree, write


def _random_tree(repo: pygit2.Repository, rng: random.Random, depth: int = 1) -> pygit2.Oid:
    names = ["a", "a.md", "a-b", "b", "c", "é.md", "z"]
    tb = repo.TreeBuilder()
    for name in rng.sample(names, rng.randint(0, 5)):
        roll = rng.random()
        if roll < 0.3 and depth < 3:
            tb.insert(name, _random_tree(repo, rng, depth + 1), FileMode.TREE)
        elif roll < 0.45:
            tb.insert(name, repo.create_blob(rng.choice([b"x", b"y", b"target"])), FileMode.LINK)
        elif roll < 0.5:
            tb.insert(name, pygit2.Oid(hex=f"{rng.randint(1, 3):040x}"), FileMode.COMMIT)
        elif roll < 0.6:
            tb.insert(name, repo.create_blob(rng.choice([b"x", b"y"])), FileMode.BLOB_EXECUTABLE)
        else:
            tb.insert(name, repo.create_blob(rng.choice([b"x", b"y", b"zz"])), FileMode.BLOB)
    return tb.write()


def _libgit2(repo: pygit2.Repository, old: pygit2.Tree | None, new: pygit2.Tree) -> list[tuple[str, str, int, int]]:
    found = new.diff_to_tree(swap=True) if old is None else old.diff_to_tree(new)
    out: list[tuple[str, str, int, int]] = []
    for d in found.deltas:
        kind = history._kind(d.status)
        path = d.new_file.path if kind != "deleted" else d.old_file.path
        out.append((path, kind, treediff._size(repo, d.old_file.id) if kind != "added" else 0,
                    treediff._size(repo, d.new_file.id) if kind != "deleted" else 0))
    return out


@pytest.mark.slow
def test_tree_deltas_match_libgit2s_diff_on_random_trees(tmp_path: Path) -> None:
    """Files, executables, links, submodules and folders replacing one another, nested: the
    walk that skips unchanged subtrees reports exactly what libgit2's full diff reports."""
    repo = pygit2.init_repository(str(tmp_path / "r.git"), bare=True)
    rng = random.Random(14)
    for _ in range(1500):
        old = repo[_random_tree(repo, rng)].peel(pygit2.Tree)
        new = old if rng.random() < 0.2 else repo[_random_tree(repo, rng)].peel(pygit2.Tree)
        mine = [(d.path, d.kind, d.old_size, d.new_size) for d in history._tree_deltas(repo, old, new)]
        assert mine == _libgit2(repo, old, new)
        first = [(d.path, d.kind, d.old_size, d.new_size) for d in history._tree_deltas(repo, None, new)]
        assert first == _libgit2(repo, None, new)


def test_tree_deltas_of_odd_names_and_mode_spellings(tmp_path: Path) -> None:
    """A name that is not UTF-8 comes out as pygit2 spells it; a `100664` entry (old git) turned
    into `100644` is a change, as libgit2 reports it."""
    repo = pygit2.init_repository(str(tmp_path / "r.git"), bare=True)
    blob, other = repo.create_blob(b"x"), repo.create_blob(b"yy")
    old = repo.odb.write(ObjectType.TREE, b"100644 n\x00" + blob.raw + b"100664 \xff.md\x00" + blob.raw)
    new = repo.odb.write(ObjectType.TREE, b"100644 n\x00" + other.raw + b"100644 \xff.md\x00" + blob.raw)
    old_tree, new_tree = repo[old].peel(pygit2.Tree), repo[new].peel(pygit2.Tree)
    mine = [(d.path, d.kind, d.old_size, d.new_size) for d in history._tree_deltas(repo, old_tree, new_tree)]
    assert mine == _libgit2(repo, old_tree, new_tree) == [("n", "modified", 1, 2),
                                                             ("\udcff.md", "modified", 1, 1)]
    added = history._tree_deltas(repo, None, old_tree)
    assert [d.path for d in added] == [d[0] for d in _libgit2(repo, None, old_tree)] == ["n", "\udcff.md"]


def test_streamed_messages_read_only_what_is_asked(tmp_path: Path) -> None:
    """`log -n N` reads N versions: the streamed walk yields the newest first without reading
    the rest (a missing old commit is never touched), in the order git log shows."""
    repo = pygit2.init_repository(str(tmp_path / "r.git"), bare=True)
    sig = pygit2.Signature("t", "t@example.invalid", 1_700_000_000, 0)
    tree = repo.TreeBuilder().write()
    parents: list[pygit2.Oid] = []
    made = []
    for n in range(30):
        when = pygit2.Signature("t", "t@example.invalid", 1_700_000_000 + n, 0)
        oid = repo.create_commit(None, sig if n == 0 else when, when, f"v{n}\n", tree, parents)
        parents = [oid]
        made.append(str(oid))
    engine = GitRepo(repo, Path(repo.path))
    streamed = [oid for oid, _, _ in history.messages(engine, made[-1], stream=True)]
    sorted_ = [oid for oid, _, _ in history.messages(engine, made[-1])]
    assert streamed == sorted_ == made[::-1]
    # the oldest version gone from the object store: the first 20 still come, the full walk cannot
    loose = Path(repo.path) / "objects" / made[0][:2] / made[0][2:]
    loose.unlink()
    walk = history.messages(engine, made[-1], stream=True)
    assert [next(walk)[0] for _ in range(20)] == made[::-1][:20]


def test_first_checkout_in_parts_writes_exactly_the_version(memory: Path, tmp_path: Path, cli: Cli,  # type: ignore[no-untyped-def]
                                                            monkeypatch) -> None:
    """A clone checks out in parts of MEMSYNC_CHECKOUT_PART_FILES files by top-level entry: names that share a
    prefix (`a`, `a.md`, `a-b`, `ab`), a root .gitattributes, nested folders and an executable
    all arrive, the index matches the work tree (nothing to commit), and a top-level name that
    is not plain makes it one checkout."""
    files = {"a": "file a\n", "a.md": "a md\n", "a-b/x.md": "x\n", "ab/y/z.md": "z\n", "b.md": "b\n",
             ".gitattributes": "*.md text\n", "c/d/e/f.md": "deep\n", "tool.sh": "#!/bin/sh\n"}
    for rel, text in files.items():
        write(memory, rel, text)
    (memory / "tool.sh").chmod(0o755)
    assert cli("push", cwd=memory).code == 0
    calls: list[object] = []  # the paths of each libgit2 checkout call (None: all of them)
    real = filters.checkout

    def checkout(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(args[3])
        return real(*args, **kwargs)

    monkeypatch.setenv("MEMSYNC_CHECKOUT_PART_FILES", "2")
    monkeypatch.setattr(filters, "checkout", checkout)
    dest = tmp_path / "copy"
    assert cli("clone", "research", str(dest), cwd=tmp_path).code == 0
    assert len(calls) > 3 and None not in calls
    on_hub = hub_tree()
    on_disk = {p.relative_to(dest).as_posix(): p.read_bytes() for p in dest.rglob("*")
               if p.is_file() and not p.relative_to(dest).as_posix().startswith((".git/", ".vm0/"))}
    assert on_disk == on_hub
    assert (dest / "tool.sh").stat().st_mode & 0o111
    repo = pygit2.Repository(str(dest))
    assert repo.status() == {}
    assert sorted(e.path for e in repo.index) == sorted(on_hub)

    write(memory, "odd name.md", "spaces\n")
    assert cli("push", cwd=memory).code == 0
    calls.clear()
    dest2 = tmp_path / "copy2"
    assert cli("clone", "research", str(dest2), cwd=tmp_path).code == 0
    assert calls == [None]
    assert pygit2.Repository(str(dest2)).status() == {}
