"""What keeps a snapshot's and a push's memory to the largest file, not the whole memory (issue 24).

The figures are bench/rss.py's; these tests guard the mechanisms: a snapshot stores each checked
file before it reads the next (so it never holds every file's bytes), and a pack is built through
a repository handle whose pack builder keeps no delta cache.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from memsync.git import engine
from memsync.git.repo import GitRepo
from memsync.util.dirfd import Tree
from tests.conftest import Cli, git, hub_path, hub_tree, write

TOKEN = "ghp_" + "a1B2c3D4e5" * 3 + "f6G7h8"  # well-formed, fake, built at run time


def _record(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """The order in which files' bytes are read from the work tree (through its folder
    descriptors, util/dirfd.Tree) and written as blobs (GitRepo.store_blob): the real methods run."""
    events: list[tuple[str, str]] = []
    read, store = Tree.read, GitRepo.store_blob

    def reading(self: Tree, rel: str, limit: int) -> object:
        events.append(("read", rel))
        return read(self, rel, limit)

    def storing(self: GitRepo, path: str, data: bytes) -> str:
        events.append(("store", path))
        return store(self, path, data)

    monkeypatch.setattr(Tree, "read", reading)
    monkeypatch.setattr(GitRepo, "store_blob", storing)
    return events


def test_a_first_push_stores_each_file_before_reading_the_next(tmp_path: Path, cli: Cli,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "many"
    root.mkdir()
    assert cli("init", cwd=root).code == 0
    files = {f"notes/{d}/note-{i}.md": f"# note {d}{i}\n\n" + f"line {i}\n" * (i + 1) for d in "abc" for i in range(8)}
    for rel, text in files.items():
        write(root, rel, text)
    events = _record(monkeypatch)
    r = cli("push", cwd=root)
    assert r.code == 0, r.err
    assert [e for e in events if e[0] == "read"] and len(events) == 2 * len(files)
    # read a, store a, read b, store b, ...: never two files' bytes held at once
    assert events == [(kind, path) for path in sorted(files) for kind in ("read", "store")]
    assert hub_tree("memory/many") == {rel: text.encode() for rel, text in files.items()}


def test_what_a_rule_or_the_secret_scan_holds_back_is_not_stored_early(tmp_path: Path, cli: Cli,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A file a protect rule names keeps its bytes until the policies ran (they may put the old
    version back); a blocked secret never reaches the object database at all."""
    root = tmp_path / "strict"
    root.mkdir()
    assert cli("init", cwd=root).code == 0
    write(root, ".vm0/storage.yaml", "name: strict\ntype: memory\nsecrets: block\n"
                                     "protect:\n  - {path: \"logs/**\", mode: append-only}\n")
    write(root, "logs/first.md", "first run\n")
    write(root, "notes.md", "plain notes\n")
    write(root, "leak.md", f"token {TOKEN}\n")
    events = _record(monkeypatch)
    r = cli("push", cwd=root)
    assert r.code != 0 or "leak.md" in r.err  # blocked, said
    read_order = [p for kind, p in events if kind == "read"]
    assert read_order == ["leak.md", "logs/first.md", "notes.md"]
    # notes.md is stored as soon as it is read; logs/first.md only once every file was read
    assert events.index(("store", "notes.md")) == events.index(("read", "notes.md")) + 1
    assert events.index(("store", "logs/first.md")) > events.index(("read", "notes.md"))
    assert ("store", "leak.md") not in events
    leaked = subprocess.run(["git", "hash-object", "--stdin"], input=f"token {TOKEN}\n".encode(),
                            capture_output=True, check=True).stdout.decode().strip()
    missing = subprocess.run(["git", "cat-file", "-e", leaked], cwd=root, capture_output=True)
    assert missing.returncode != 0
    assert set(hub_tree("memory/strict")) == {"notes.md", "logs/first.md"}
    assert (root / "leak.md").read_text() == f"token {TOKEN}\n"  # kept on disk, never lost


def test_a_pack_is_built_without_a_delta_cache_and_nothing_writes_that_setting(tmp_path: Path, cli: Cli) -> None:
    root = tmp_path / "packing"
    root.mkdir()
    assert cli("init", cwd=root).code == 0
    shipped = engine.PACKING_CONFIG.read_bytes()
    packing = engine.for_packing(root)
    assert packing.config.get_int("pack.deltaCacheSize") == 1
    assert "pack.deltaCacheSize" not in engine.repository(root).config  # only the packing handle
    # the operator's own setting wins over memsync's
    git("config", "pack.deltaCacheSize", "7", cwd=root)
    assert engine.for_packing(root).config.get_int("pack.deltaCacheSize") == 7
    # configuration written by memsync (init, a push, a hub's protection) goes where it always did
    write(root, "a.md", "a\n")
    assert cli("push", cwd=root).code == 0
    assert engine.PACKING_CONFIG.read_bytes() == shipped
    assert "managed" in git("config", "memsync.origin", cwd=root)
    assert hub_tree("memory/packing", hub_path()) == {"a.md": b"a\n"}
