"""git/workdiff: the walk's deltas kept as paths (`Walked`) say what pygit2's list of deltas says."""

from __future__ import annotations

import os
from pathlib import Path

import pygit2
from pygit2.enums import DeltaStatus

from memsync.git.workdiff import diff_to_workdir, scan_flags
from tests.conftest import git, write


def test_walked_holds_every_path_the_deltas_name(tmp_path: Path) -> None:
    root = tmp_path / "r"
    for rel in ("kept.md", "edited.md", "gone.md", "typed.md", "deep/er/old.md"):
        write(root, rel, rel)
    git("init", "-q", cwd=root)
    git("add", "-A", cwd=root)
    git("-c", "user.name=a", "-c", "user.email=b@c", "commit", "-qm", "i", cwd=root)
    write(root, ".git/info/exclude", "*.log\nbuild/\n")
    write(root, "edited.md", "changed")
    (root / "gone.md").unlink()
    (root / "typed.md").unlink()
    os.symlink("kept.md", root / "typed.md")
    write(root, "new/deep/a.md", "a")
    write(root, "new.md", "n")
    write(root, "trace.log", "hidden")
    write(root, "build/out.bin", "hidden too")
    repo = pygit2.Repository(str(root))
    flags = scan_flags()

    deltas = list(repo.index.diff_to_workdir(flags=flags).deltas)  # pygit2's own list, for comparison
    walked = diff_to_workdir(repo, repo.index, flags)

    assert walked.ignored == [d.new_file.path for d in deltas if d.status == DeltaStatus.IGNORED]
    assert walked.changed == {p for d in deltas if d.status != DeltaStatus.IGNORED
                              for p in (d.old_file.path, d.new_file.path)}
    assert walked.changed == {"edited.md", "gone.md", "typed.md", "new/deep/a.md", "new.md"}
    assert sorted(walked.ignored) == ["build/out.bin", "trace.log"]
    assert walked.paths() == walked.changed | {"build/out.bin", "trace.log"}
    # narrowed to top-level entries: exactly what the full walk says of them
    assert diff_to_workdir(repo, repo.index, flags, ["new", "edited.md"]).changed == {"new/deep/a.md", "edited.md"}
