"""The forgetting report on real versions: lines moved elsewhere are kept, white space aside;
binary files are judged whole and named."""

from __future__ import annotations

from pathlib import Path

from memsync.git.repo import GitRepo
from memsync.history.forgetting import report
from tests.conftest import Cli, git, write


def test_moved_reindented_and_lost_lines(cli: Cli, tmp_path: Path) -> None:
    root = tmp_path / "forgets"
    root.mkdir()
    assert cli("init", cwd=root).code == 0
    write(root, "a.md", "# A\n\nkeep me\nlose me\n---\n\n")
    write(root, "b.md", "moved line\n")
    write(root, "img.bin", b"\x00\x01binary")
    write(root, "same.bin", b"\x00same")
    assert cli("push", cwd=root).code == 0
    before = git("rev-parse", "HEAD", cwd=root).strip()
    write(root, "a.md", "# A\n\n   keep me   \n")
    (root / "b.md").unlink()
    write(root, "c/all.md", "- x\nmoved line\n")
    write(root, "img.bin", b"\x00\x02changed")
    (root / "same.bin").rename(root / "renamed.bin")
    assert cli("push", cwd=root).code == 0
    after = git("rev-parse", "HEAD", cwd=root).strip()
    found = report(GitRepo.open(root), before, after)
    by_path = {f.path: f for f in found.files}
    assert set(by_path) == {"a.md", "img.bin"}  # b.md's line moved; same.bin's bytes moved
    assert (by_path["a.md"].count, by_path["a.md"].total, by_path["a.md"].lines) == (1, 3, ["lose me"])
    assert not by_path["img.bin"].exact and found.inexact == ["img.bin", "same.bin"] and not found.exact
    assert found.lines == 1 and found.kept_files == 1  # b.md
