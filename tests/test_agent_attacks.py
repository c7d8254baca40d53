"""What an agent can do with files to a memory, and what memsync does about it: read-only mounts,
protect policies, and restore where the agent left symlinks. Each test is an attack that worked
on earlier versions; `figures` counts them for the reliability report."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import git, hub_path, write
from tests.stress_report import Figures, figures

__all__ = ["figures"]


def _attack(figures: Figures, stopped: bool) -> None:
    figures.add("agent attacks")
    if stopped:
        figures.add("agent attacks stopped")


def _rev(ref: str = "memory/research") -> str:
    return git("rev-parse", ref, cwd=hub_path()).strip()


# -- restore ---------------------------------------------------------------------------------------

def test_restore_never_writes_through_a_symlinked_folder(memory: Path, tmp_path: Path, cli,  # type: ignore[no-untyped-def]
                                                         figures: Figures) -> None:
    write(memory, "notes/a.md", "a\n")
    write(memory, "notes/sub/b.md", "b\n")
    assert cli("push", cwd=memory).code == 0
    rev = _rev()[:8]
    outside = tmp_path / "outside"
    outside.mkdir()
    for f in (memory / "notes" / "sub" / "b.md", memory / "notes" / "a.md"):
        f.unlink()
    (memory / "notes" / "sub").rmdir()
    (memory / "notes").rmdir()
    (memory / "notes").symlink_to(outside)  # what an agent left behind, pushed by its run
    assert cli("push", cwd=memory).code == 0
    for target in ("notes/sub/b.md", "notes/a.md", "notes"):
        result = cli("restore", target, "--at", rev, cwd=memory)
        stopped = result.code == 7 and not any(outside.iterdir())
        _attack(figures, stopped)
        assert list(outside.iterdir()) == [], result.err  # nothing created outside, not even a folder
        assert result.code == 7, result.err
        assert "error: refusing to write notes/" in result.err and "notes is a symlink" in result.err
        assert "hint: remove the symlink notes" in result.err
    assert (memory / "notes").is_symlink()
