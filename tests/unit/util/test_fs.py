"""util.fs.atomic_write, the one way memsync replaces a file of its own: all or nothing, never
through a symlink, the mode asked for, nothing left behind when the write fails."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from memsync.util.fs import atomic_write


def test_replaces_the_content_whole(tmp_path: Path) -> None:
    folder = tmp_path / "state"
    folder.mkdir()
    target = folder / "f.json"
    target.write_bytes(b"old content that is longer\n")
    atomic_write(target, b"new\n")
    assert target.read_bytes() == b"new\n"
    assert sorted(p.name for p in folder.iterdir()) == ["f.json"]


def test_a_symlink_is_replaced_never_written_through(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious\n")
    target = tmp_path / "cache"
    target.symlink_to(victim)
    atomic_write(target, b"mine\n")
    assert victim.read_bytes() == b"precious\n"
    assert not target.is_symlink() and target.read_bytes() == b"mine\n"


def test_modes(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        fresh = tmp_path / "fresh"
        atomic_write(fresh, b"x")
        assert stat.S_IMODE(fresh.stat().st_mode) == 0o600  # private, whatever the umask
        exe = tmp_path / "exe"
        exe.write_bytes(b"#!/bin/sh\n")
        exe.chmod(0o751)
        atomic_write(exe, b"#!/bin/sh\ntrue\n", keep_mode=True)
        assert stat.S_IMODE(exe.stat().st_mode) == 0o751
        chosen = tmp_path / "chosen"
        atomic_write(chosen, b"x", mode=0o644)
        assert stat.S_IMODE(chosen.stat().st_mode) == 0o644
    finally:
        os.umask(old)


def test_memsyncs_other_writers_go_through_it(tmp_path: Path) -> None:
    """The hub's HEAD (its mode kept), the merge attributes and the checkout journal: replaced
    whole, a planted symlink replaced and never written through, nothing left beside them."""
    import pygit2

    from memsync.git import mergeattrs
    from memsync.git.localhub import point_head

    hub = tmp_path / "hub.git"
    pygit2.init_repository(str(hub), bare=True, initial_head="main")
    (hub / "HEAD").chmod(0o644)
    assert point_head(hub, "refs/heads/memory/notes")
    assert (hub / "HEAD").read_text() == "ref: refs/heads/memory/notes\n"
    assert stat.S_IMODE((hub / "HEAD").stat().st_mode) == 0o644
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious\n")
    attributes = hub / "info" / "attributes"
    attributes.parent.mkdir(exist_ok=True)
    attributes.symlink_to(victim)
    mergeattrs.neutralize(pygit2.Repository(str(hub)))
    assert victim.read_bytes() == b"precious\n" and not attributes.is_symlink()
    assert attributes.read_text().endswith(mergeattrs.BLOCK)
    assert not [p for p in attributes.parent.iterdir() if p.name.startswith(".")]
    assert sorted(p.name for p in hub.iterdir() if p.name.startswith((".HEAD", "HEAD"))) == ["HEAD"]
