"""Questions about a project's own git repository (not a memory) that the hooks installer asks:
is a file tracked there, and keep a personal file out of it (.git/info/exclude)."""

from __future__ import annotations

from pathlib import Path

import pygit2

__all__ = ["exclude", "is_tracked"]


def _open(start: Path) -> pygit2.Repository | None:
    found = pygit2.discover_repository(str(start))
    return None if found is None else pygit2.Repository(found)


def is_tracked(start: Path, path: Path) -> bool:
    """Whether the repository holding `start` tracks `path` (in its index or its HEAD)."""
    repo = _open(start)
    if repo is None or not repo.workdir:
        return False
    try:
        rel = path.resolve().relative_to(Path(repo.workdir).resolve()).as_posix()
    except ValueError:
        return False
    if rel in repo.index:
        return True
    if repo.head_is_unborn:
        return False
    try:
        repo.head.peel(pygit2.Commit).tree[rel]
    except KeyError:
        return False
    return True


def exclude(start: Path, path: Path, why: str = "a personal file (memsync hooks install --scope local)") -> Path | None:
    """Add `path` (a file or folder of the worktree holding `start`) to the repository's
    info/exclude, once, after a comment saying `why`; the exclude file written, or None outside
    a repository."""
    repo = _open(start)
    if repo is None or not repo.workdir:
        return None
    rel = path.resolve().relative_to(Path(repo.workdir).resolve()).as_posix()
    git_dir = Path(repo.path)
    commondir = git_dir / "commondir"  # a linked worktree's info/ is its main repository's
    if commondir.is_file():
        git_dir = (git_dir / commondir.read_text(encoding="utf-8").strip()).resolve()
    target = git_dir / "info" / "exclude"
    line = f"/{rel}"
    current = target.read_text(encoding="utf-8") if target.exists() else ""
    if line in current.splitlines():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    sep = "" if not current or current.endswith("\n") else "\n"
    with open(target, "a", encoding="utf-8") as fh:
        fh.write(f"{sep}# {why}\n{line}\n")
    return target
