"""core/snapshot: a file staged as soon as it is stored (`stage_at_once`, the default) ends in the
same version and the same index as one staged after the walk; the 2-second rule holds both ways."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from memsync.core import snapshot
from memsync.core.attribution import operator
from memsync.core.memory import open_memory
from tests.conftest import fresh_for_a_minute, git, write


def _take(root: Path, at_once: bool) -> snapshot.Snapshot:
    mem = open_memory(root)
    with mem.locked():
        return snapshot.take(mem, operator("changes"), stage_at_once=at_once)


def _index_sizes(root: Path) -> dict[str, str]:
    """path -> the size git's index records for it ("0": no stat data, the next scan hashes it)."""
    out = git("ls-files", "--debug", cwd=root).splitlines()
    sizes, path = {}, ""
    for line in out:
        if not line.startswith(" "):
            path = line
        elif line.strip().startswith("size:"):
            sizes[path] = line.split()[1]
    return sizes


@pytest.mark.slow
@pytest.mark.parametrize("protect", [False, True])
def test_staged_at_once_or_after_the_walk_commit_the_same(memory: Path, tmp_path: Path, protect: bool) -> None:
    if protect:
        with open(memory / ".vm0" / "storage.yaml", "a") as fh:
            fh.write("protect:\n  - {path: 'runs/**', mode: append-only}\n")
    write(memory, "notes/deep/a.md", "a\n")
    write(memory, "b.md", "b\n")
    os.symlink("b.md", memory / "link.md")
    fresh_for_a_minute(write(memory, "fresh.md", "still being written\n"))
    (memory / "summary.md").unlink()  # a file replaced by a folder, and a folder by a file
    write(memory, "summary.md/inside.md", "inside\n")
    shutil.rmtree(memory / "runs")
    write(memory, "runs", "a file now\n")
    twin = tmp_path / "twin"
    shutil.copytree(memory, twin, symlinks=True)
    time.sleep(2.2)  # the copies' ctime (not settable) past the 2-second rule: their stat data is kept

    at_once, after = _take(memory, True), _take(twin, False)

    assert at_once.commit is not None and after.commit is not None
    assert git("rev-parse", "HEAD^{tree}", cwd=memory) == git("rev-parse", "HEAD^{tree}", cwd=twin)
    assert at_once.changes == after.changes
    assert {c.path for c in at_once.changes} >= {"b.md", "fresh.md", "link.md", "notes/deep/a.md",
                                                 "summary.md", "summary.md/inside.md"}
    files = git("ls-files", cwd=memory).split()
    assert "summary.md/inside.md" in files and "summary.md" not in files
    # append-only runs/**: the folder's file is put back (its replacement kept as a copy)
    assert ("runs/first.md" in files) is protect and ("runs" in files) is not protect
    sizes = _index_sizes(memory)
    assert sizes == _index_sizes(twin)
    assert sizes["fresh.md"] == "0"  # fresh: its stat data cannot vouch for the bytes read
    assert sizes["b.md"] == "2" and sizes["notes/deep/a.md"] == "2"


@pytest.mark.parametrize("above", [2, snapshot.FOLD_ABOVE])
def test_changes_folded_meanwhile_come_back_the_same(above: int) -> None:
    """A push's exchange runs with the per-file list folded into one string (past `above` files),
    and finds it as it was afterwards, kinds and order and odd names included."""
    from memsync.git.repo import WorkChange

    changes = [WorkChange("notes/a.md", "added"), WorkChange("b c/é.md", "modified"),
               WorkChange("x\ty/z.md", "deleted"), WorkChange("0", "added")]
    snap = snapshot.Snapshot(commit="c0ffee", changes=list(changes))
    with snap.folded(above):
        assert snap.changes == ([] if len(changes) > above else changes)
    assert snap.changes == changes
    with pytest.raises(RuntimeError), snap.folded(above):  # an exchange that fails gives it back too
        raise RuntimeError("hub down")
    assert snap.changes == changes
