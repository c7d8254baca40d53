"""Maintenance: repacking a memory and its hub loses nothing, survives a crash midway, runs by
itself past a threshold, and never collides with a push into the hub."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pygit2
import pytest

from memsync.git import pack
from tests.conftest import Cli, git, hub_path, memsync_cmd, write


def _all_objects(git_dir: Path) -> set[str]:
    out = git("cat-file", "--batch-all-objects", "--batch-check=%(objectname)", cwd=git_dir)
    return set(out.split())


def _fsck(git_dir: Path) -> None:
    subprocess.run(["git", "fsck", "--strict", "--no-dangling"], cwd=git_dir, check=True, capture_output=True)


def _push_versions(memory: Path, cli: Cli, n: int) -> None:
    for i in range(n):
        write(memory, f"notes/{i}.md", f"note {i}\n")
        assert cli("push", cwd=memory).code == 0


def test_gc_repacks_memory_and_hub_into_one_pack_each(memory: Path, cli: Cli) -> None:
    _push_versions(memory, cli, 6)
    hub = hub_path()
    before_hub, before_mem = _all_objects(hub), _all_objects(memory / ".git")
    assert pack.counts(hub).packs >= 6 and pack.counts(memory / ".git", exact=True).loose > 10
    r = cli("gc", "--json", cwd=memory)
    assert r.code == 0, r.err
    report = json.loads(r.out)
    assert [item["what"].split()[0] for item in report["repacked"]] == ["memory", "hub"]
    assert pack.counts(hub) == pack.ObjectCounts(loose=0, packs=1)
    assert pack.counts(memory / ".git", exact=True) == pack.ObjectCounts(loose=0, packs=1)
    assert _all_objects(hub) == before_hub and _all_objects(memory / ".git") == before_mem
    _fsck(hub)
    _fsck(memory / ".git")
    # and everything still works on the repacked repositories
    write(memory, "after.md", "after gc\n")
    assert cli("push", cwd=memory).code == 0
    assert "Repacked memory 'research'" in cli("gc", cwd=memory).out


def test_a_repack_killed_midway_is_tidied_by_the_next(memory: Path, cli: Cli) -> None:
    """The state a kill -9 can leave: the new pack written, old packs and loose objects still
    there. Every object is readable, and the next repack ends with one pack."""
    _push_versions(memory, cli, 3)
    hub = hub_path()
    before, packs = _all_objects(hub), pack.counts(hub).packs
    repo = pygit2.Repository(str(hub))
    ids = list(repo.odb)
    def first_half(builder: pygit2.PackBuilder) -> None:
        for oid in ids[: len(ids) // 2]:
            builder.add(oid)

    repo.pack(pack_delegate=first_half)
    assert pack.counts(hub).packs == packs + 1
    _fsck(hub)
    result = pack.repack(hub)
    assert result.objects == len(before) and pack.counts(hub).packs == 1
    assert _all_objects(hub) == before
    _fsck(hub)


@pytest.mark.slow
def test_maintenance_runs_by_itself_past_the_thresholds(memory: Path, cli: Cli,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMSYNC_GC_PACKS", "4")
    monkeypatch.setenv("MEMSYNC_GC_LOOSE", "40")
    _push_versions(memory, cli, 12)
    assert pack.counts(hub_path()).packs <= 5  # repacked whenever it passed 4
    assert pack.counts(memory / ".git", exact=True).loose <= 40
    _fsck(hub_path())
    _fsck(memory / ".git")


def test_no_automatic_maintenance_when_turned_off(memory: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMSYNC_GC_PACKS", "0")
    monkeypatch.setenv("MEMSYNC_GC_LOOSE", "0")
    _push_versions(memory, cli, 6)
    assert pack.counts(hub_path()).packs >= 6


@pytest.mark.slow
def test_hub_maintenance_never_collides_with_pushes(memory: Path, tmp_path: Path, cli: Cli) -> None:
    """Eight clones push at once while each push repacks the hub (threshold 1 pack): every
    version arrives, both repositories stay sound, and the next push leaves the hub compact."""
    clones = []
    for i in range(8):
        dest = tmp_path / f"clone{i}"
        assert cli("clone", "research", str(dest), cwd=tmp_path).code == 0
        clones.append(dest)
    env_extra = {"MEMSYNC_GC_PACKS": "1"}

    def writer(dest: Path) -> int:
        for j in range(3):
            write(dest, f"runs/{dest.name}-{j}.md", f"{dest.name} {j}\n")
            proc = memsync_cmd("push", cwd=dest, env=dict(os.environ, **env_extra))
            if proc.returncode != 0:
                sys.stderr.write(proc.stderr)
                return proc.returncode
        return 0

    with ThreadPoolExecutor(8) as pool:
        codes = list(pool.map(writer, clones))
    assert codes == [0] * 8
    names = set(git("ls-tree", "-r", "--name-only", "memory/research", cwd=hub_path()).split())
    assert {f"runs/clone{i}-{j}.md" for i in range(8) for j in range(3)} <= names
    _fsck(hub_path())
    # a repack that found another one running left its packs to the next push (it never waits:
    # maintenance.auto_beside), which folds them
    write(clones[0], "runs/after.md", "after\n")
    assert memsync_cmd("push", cwd=clones[0], env=dict(os.environ, **env_extra)).returncode == 0
    assert pack.counts(hub_path()).packs <= 2
    _fsck(hub_path())


def _loose(git_dir: Path) -> set[str]:
    objects = git_dir / "objects"
    return {fan.name + f.name for fan in objects.glob("[0-9a-f][0-9a-f]") for f in fan.iterdir()}


def _hub_commit(ref: str, files: dict[str, bytes]) -> str:
    """A commit written straight into the hub (loose objects), as another machine's push of
    plain git leaves it."""
    repo = pygit2.Repository(str(hub_path()))
    parent = repo.references.get(ref)
    index = pygit2.Index()
    if parent is not None:
        index.read_tree(parent.peel(pygit2.Commit).tree)
    for path, data in files.items():
        index.add(pygit2.IndexEntry(path, repo.create_blob(data), pygit2.enums.FileMode.BLOB))
    sig = pygit2.Signature("Elsewhere", "elsewhere@example.invalid")
    parents = [parent.peel(pygit2.Commit).id] if parent is not None else []
    return str(repo.create_commit(ref, sig, sig, "Elsewhere\n", index.write_tree(repo), parents))


def test_fetch_links_only_the_hub_objects_a_memory_lacks(memory: Path, cli: Cli,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A hub shared by many memories holds all their loose objects. A status that finds the
    memory's tip unchanged links none of them; a pull links only objects the memory does not
    already hold (packed), so a repack is not undone by the next fetch (that cycle made status
    on a hub of 100 memories take seconds)."""
    monkeypatch.setenv("MEMSYNC_GC_LOOSE", "0")  # counts below, not automatic repacks
    pack.repack(memory / ".git")
    _hub_commit("refs/heads/memory/other", {f"o/{i}.md": f"other {i}\n".encode() for i in range(30)})
    assert len(_loose(hub_path())) == 33  # 30 blobs, 2 trees, 1 commit
    assert cli("status", cwd=memory).code == 0
    assert _loose(memory / ".git") == set()  # the tip did not move: nothing linked
    first = _hub_commit("refs/heads/memory/research", {"elsewhere.md": b"one\n"})
    assert cli("pull", cwd=memory).code == 0
    assert (memory / "elsewhere.md").read_bytes() == b"one\n"
    assert first in _loose(memory / ".git")
    pack.repack(memory / ".git")  # the memory only: the hub keeps its loose objects
    assert _loose(memory / ".git") == set()
    second = _hub_commit("refs/heads/memory/research", {"elsewhere.md": b"two\n"})
    assert cli("pull", cwd=memory).code == 0
    assert (memory / "elsewhere.md").read_bytes() == b"two\n"
    assert second in _loose(memory / ".git")
    assert len(_loose(memory / ".git")) <= 4  # commit, tree, blob (+ a merge's): not the other memory's 33
    _fsck(memory / ".git")


def test_loose_objects_go_into_bounded_packs_beside_the_packs_there(memory: Path, cli: Cli,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Past the loose threshold alone, maintenance packs the loose objects, `batch` at a time, as
    `git gc --auto` does (`repack -d`): the packs already there stay, nothing is lost."""
    monkeypatch.setenv("MEMSYNC_GC_LOOSE", "0")  # the steps below by hand
    git_dir = memory / ".git"
    _push_versions(memory, cli, 2)
    pack.repack(git_dir)
    kept = {p.name for p in (git_dir / "objects" / "pack").glob("*.pack")}
    _push_versions(memory, cli, 5)
    before, loose = _all_objects(git_dir), len(_loose(git_dir))
    assert loose >= 10
    result = pack.pack_loose(git_dir, batch=4)
    assert result.loose_before == loose and result.objects == loose
    packs = {p.name for p in (git_dir / "objects" / "pack").glob("*.pack")}
    assert kept <= packs and len(packs - kept) == -(-loose // 4)  # one pack a batch
    assert _loose(git_dir) == set() and _all_objects(git_dir) == before
    _fsck(git_dir)
    monkeypatch.setenv("MEMSYNC_GC_LOOSE", "3")  # and by itself: loose objects packed, packs kept
    monkeypatch.setenv("MEMSYNC_GC_PACKS", "50")
    for i in range(3):
        write(memory, f"notes/more-{i}.md", f"more {i}\n")
        assert cli("push", cwd=memory).code == 0
    after = {p.name for p in (git_dir / "objects" / "pack").glob("*.pack")}
    assert _loose(git_dir) == set() and packs < after, (packs, after)


def test_loose_objects_packed_before_a_kill_are_removed_by_the_next_step(memory: Path, cli: Cli,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The state a kill -9 can leave: a pack holding the loose objects, which are still there."""
    monkeypatch.setenv("MEMSYNC_GC_LOOSE", "0")
    git_dir = memory / ".git"
    _push_versions(memory, cli, 3)
    before = _all_objects(git_dir)
    names = sorted(_loose(git_dir))
    repo = pygit2.Repository(str(git_dir))

    def all_loose(builder: pygit2.PackBuilder) -> None:
        for name in names:
            builder.add(pygit2.Oid(hex=name))

    repo.pack(pack_delegate=all_loose)
    assert _loose(git_dir) == set(names)
    pack.pack_loose(git_dir)
    assert _loose(git_dir) == set() and _all_objects(git_dir) == before
    _fsck(git_dir)
