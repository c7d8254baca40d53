"""MEMSYNC_HOME or a hub on this machine inside a memory directory is never committed
(core/ownfolders.py): before, each push committed the embedded hub's newest pack and its lock."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import Cli, git, write


def _committed(root: Path) -> list[str]:
    return git("ls-tree", "-r", "--name-only", "HEAD", cwd=root).split()


def test_a_memsync_home_inside_the_memory_is_left_out(tmp_path: Path, cli: Cli,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "workspace"
    root.mkdir()
    monkeypatch.setenv("MEMSYNC_HOME", str(root / "state" / "memsync"))
    assert cli("init", "--name", "research", cwd=root).code == 0
    write(root, "notes.md", "one\n")
    assert cli("push", cwd=root).code == 0
    write(root, "notes.md", "one\ntwo\n")
    assert cli("push", cwd=root).code == 0
    assert (root / "state" / "memsync" / "hub.git").is_dir()  # the hub is there, beside the notes
    assert _committed(root) == ["notes.md"]
    status = cli("status", cwd=root)
    assert status.code == 0 and "Ignored" not in status.out and "state/memsync/hub.git/" not in status.out
    exclude = (root / ".git" / "info" / "exclude").read_text()
    assert "/state/memsync" in exclude.splitlines()
    # a run there: tests/stories/test_run.py


def test_a_hub_path_inside_the_memory_is_left_out(tmp_path: Path, cli: Cli) -> None:
    root = tmp_path / "workspace"
    root.mkdir()
    hub = root / "hubs" / "team.git"
    git("init", "-q", "--bare", str(hub), cwd=tmp_path)
    assert cli("init", "--name", "research", "--remote", str(hub), cwd=root).code == 0
    write(root, "notes.md", "one\n")
    assert cli("push", cwd=root).code == 0
    write(root, "more.md", "two\n")
    assert cli("push", cwd=root).code == 0
    assert _committed(root) == ["more.md", "notes.md"]
    assert git("ls-tree", "-r", "--name-only", "memory/research", cwd=hub).split() == ["more.md", "notes.md"]


def test_a_memory_inside_memsync_home_excludes_nothing(tmp_path: Path, cli: Cli,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("MEMSYNC_HOME", str(home))
    root = home / "mine"
    root.mkdir(parents=True)
    assert cli("init", "--name", "research", cwd=root).code == 0
    write(root, "notes.md", "one\n")
    assert cli("push", cwd=root).code == 0
    assert _committed(root) == ["notes.md"]
    assert "MEMSYNC_HOME" not in (root / ".git" / "info" / "exclude").read_text()
