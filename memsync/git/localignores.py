"""An agent's files are never hidden by ignore rules from the tree (BRIEF rule 7).

A `.gitignore` in the memory is a file like any other: the agent can write one, and any hub
writer can push one, and git would then leave out of every commit the files it names. For a run
(`memsync run`, the coding-agent hooks) memsync follows only the ignore rules that are the
operator's: `.git/info/exclude` (memsync's own exclusions and the hooks' are there) and the
user's global excludes file (core.excludesFile, else git's XDG `ignore`). A file that only a
`.gitignore` hides is committed like any other, through the same checks (secrets, size, protect).
A file the operator's rules keep out is reported, and the run exits 9 (EXIT_BLOCKED).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pathspec
import pygit2
from pygit2.enums import ConfigLevel

__all__ = ["LocalIgnores"]

_READ_AT_MOST = 1 << 20  # a bigger rules file is read that far


class LocalIgnores:
    """The operator's ignore rules of a repository, read once."""

    def __init__(self, repo: pygit2.Repository) -> None:
        lines: list[str] = []
        for path in _rule_files(repo):
            lines += _lines(path)
        self._spec = pathspec.GitIgnoreSpec.from_lines(lines)

    def hides(self, path: str) -> bool:
        """`path` relative to the work tree; a directory ends with `/`."""
        return bool(self._spec.match_file(path))

    def files_under(self, root: Path, folder: str, tracked: pygit2.Index) -> tuple[list[str], list[str]]:
        """(files to commit, paths the operator's rules hide) under `folder` ("dir/"), which
        only tree rules hid: git did not descend into it. Folders holding their own .git are
        left out (a nested repository), links to folders are files (committed as links)."""
        found: list[str] = []
        hidden: list[str] = []
        base = root / folder.rstrip("/")
        if (base / ".git").exists():
            return found, hidden
        for here, dirs, files in os.walk(base, followlinks=False):
            rel_here = Path(here).relative_to(root).as_posix()
            for name in list(dirs):
                rel = f"{rel_here}/{name}"
                full = Path(here) / name
                if full.is_symlink():
                    files.append(name)
                    dirs.remove(name)
                elif (full / ".git").exists() or self.hides(rel + "/"):
                    dirs.remove(name)
                    if not (full / ".git").exists():
                        hidden.append(rel + "/")
            for name in files:
                rel = f"{rel_here}/{name}"
                if rel in tracked:
                    continue
                (hidden if self.hides(rel) else found).append(rel)
        return sorted(found), sorted(hidden)


def _rule_files(repo: pygit2.Repository) -> list[str]:
    files = [os.path.join(repo.path, "info", "exclude")]
    configured = None
    with contextlib.suppress(KeyError, ValueError, pygit2.GitError):
        configured = repo.config["core.excludesFile"]
    if configured:
        files.append(os.path.expanduser(str(configured)))
    else:  # where libgit2 looks without core.excludesFile: "ignore" in its XDG folders
        for folder in (pygit2.settings.search_path[ConfigLevel.XDG] or "").split(os.pathsep):
            if folder:
                files.append(os.path.join(folder, "ignore"))
    return files


def _lines(path: str) -> list[str]:
    try:
        with open(path, "rb") as fh:
            data = fh.read(_READ_AT_MOST)
    except OSError:
        return []
    return data.decode("utf-8", "replace").splitlines()
