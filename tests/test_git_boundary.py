"""One git boundary: nothing outside memsync/git/ reaches a pygit2 object through a GitRepo, and
importing memsync changes no process-wide libgit2 setting."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "memsync"


def test_no_raw_repository_outside_git() -> None:
    """GitRepo keeps its pygit2 repository private (`_repo`); git/ offers what callers need."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.parent.name == "git" and path.parent.parent == PACKAGE:
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if re.search(r"\._repo\b|(?<!memsync)\.git\.repo\b", line):
                found.append(f"{path.relative_to(PACKAGE.parent)}:{n}: {line.strip()}")
    assert found == []


def test_importing_memsync_changes_no_libgit2_setting() -> None:
    """A program that uses pygit2 next to memsync keeps its own settings until memsync opens a
    repository: the mmap window size is libgit2's default after importing every memsync module."""
    probe = (
        "import pygit2, pkgutil, importlib\n"
        "from pygit2.enums import Option\n"
        "before = pygit2.option(Option.GET_MWINDOW_SIZE)\n"
        "import memsync\n"
        "skip = ('memsync.integrations.claude', 'memsync.integrations.mcp_server', 'memsync.cli.mcp')\n"
        "for m in pkgutil.walk_packages(memsync.__path__, 'memsync.'):\n"
        "    if m.name not in skip and m.name != 'memsync.__main__':\n"
        "        importlib.import_module(m.name)\n"
        "print(before, pygit2.option(Option.GET_MWINDOW_SIZE))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    before, after = out.stdout.split()
    assert before == after


def test_opening_a_repository_applies_memsync_s_settings(tmp_path: Path) -> None:
    probe = (
        "import pygit2, sys\n"
        "from pygit2.enums import Option\n"
        "from pathlib import Path\n"
        "from memsync.git.repo import GitRepo\n"
        "GitRepo.init(Path(sys.argv[1]), 'memory/x')\n"
        "print(pygit2.option(Option.GET_MWINDOW_SIZE))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe, str(tmp_path / "m")], capture_output=True, text=True,
                         timeout=60, check=True)
    assert int(out.stdout) == 4 * 1024 * 1024
