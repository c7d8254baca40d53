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


def test_a_write_in_a_folders_descriptor_stays_in_that_folder(tmp_path: Path) -> None:
    """dir_fd: the folder opened is the one written, even once a symlink to elsewhere stands at
    its path; the mode asked for, a symlink written as one, no temp file left."""
    folder, elsewhere = tmp_path / "memory", tmp_path / "elsewhere"
    folder.mkdir()
    elsewhere.mkdir()
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        folder.rename(tmp_path / "moved")
        folder.symlink_to(elsewhere, target_is_directory=True)
        atomic_write("notes.md", b"kept\n", dir_fd=fd, mode=0o640)
        atomic_write("link", b"notes.md", dir_fd=fd, link=True)
    finally:
        os.close(fd)
    moved = tmp_path / "moved"
    assert (moved / "notes.md").read_bytes() == b"kept\n" and list(elsewhere.iterdir()) == []
    assert stat.S_IMODE((moved / "notes.md").stat().st_mode) == 0o640
    assert os.readlink(moved / "link") == "notes.md"
    assert sorted(p.name for p in moved.iterdir()) == ["link", "notes.md"]


def test_a_checkout_mode_follows_the_umask_and_a_named_temp_is_cleared(tmp_path: Path) -> None:
    """create_mode is git's checkout mode as the umask leaves it; `temp` (a caller's own name for
    its temp file) replaces a leftover of an earlier, killed write of the same name."""
    folder = tmp_path / "tree"
    folder.mkdir()
    leftover = folder / ".memsync-1-run.sh"
    leftover.write_bytes(b"half writ")
    old = os.umask(0o077)
    try:
        atomic_write(folder / "run.sh", b"#!/bin/sh\n", create_mode=0o755, durable=False, temp=leftover.name)
    finally:
        os.umask(old)
    assert stat.S_IMODE((folder / "run.sh").stat().st_mode) == 0o700
    assert sorted(p.name for p in folder.iterdir()) == ["run.sh"]


def test_a_name_of_the_longest_length_gets_a_temp_name_that_fits(tmp_path: Path) -> None:
    name = "é" * 127  # 254 bytes
    folder = tmp_path / "tree"
    folder.mkdir()
    atomic_write(folder / name, b"x")
    assert [p.name for p in folder.iterdir()] == [name]


def test_ensure_layout_replaces_a_planted_exclude_link_and_keeps_the_users_lines(tmp_path: Path) -> None:
    from memsync.git.repo import EXCLUDES, GitRepo

    git = GitRepo.init(tmp_path / "memory", "memory/notes")
    exclude = git.git_dir / "info" / "exclude"
    victim = tmp_path / "victim"
    victim.write_text("*.log")  # the user's own rule, no final newline
    exclude.unlink(missing_ok=True)
    exclude.symlink_to(victim)
    git.ensure_layout("memory/notes", None)
    assert victim.read_text() == "*.log" and not exclude.is_symlink()
    assert exclude.read_text() == "*.log\n" + EXCLUDES
    git.ensure_layout("memory/notes", None)  # once only
    assert exclude.read_text() == "*.log\n" + EXCLUDES
    assert sorted(p.name for p in exclude.parent.iterdir()) == ["exclude"]
