"""An agent's files are never hidden by ignore rules from the tree (BRIEF rule 7).

A `.gitignore` in the memory is a file like any other: the agent can write one, and any hub
writer can push one, and git would then leave out of every commit the files it names. For a run
(`memsync run`, the coding-agent hooks) memsync follows only the ignore rules that are the
operator's: `.git/info/exclude` (memsync's own exclusions and the hooks' are there) and the
user's global excludes file (core.excludesFile, else git's XDG `ignore`). A file that only a
`.gitignore` hides is committed like any other, through the same checks (secrets, size, protect).
A file the operator's rules keep out is reported, and the run exits 9 (EXIT_BLOCKED).

The operator's own commits (`push`, `watch`) and `status` follow the same rules, plus the
`.gitignore` files that are the operator's (own_rule_files): one not on the hub (a local edit), or
one whose content a commit memsync made here holds. A `.gitignore` that came from the hub (its
content is the hub's and no commit made here wrote it) decides nothing: a hub writer's `*` hides
no file of the operator's, and every file that such a file names is committed and named.
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

    def __init__(self, repo: pygit2.Repository, tree_rules: bool = False) -> None:
        """`tree_rules`: the operator's own `.gitignore` files count too (own_rule_files)."""
        lines: list[str] = []
        for path in _rule_files(repo):
            lines += _lines(path)
        self._spec = pathspec.GitIgnoreSpec.from_lines(lines)
        # (folder prefix, its rules), shallow to deep: a deeper file's verdict wins, as in git
        self._trees = [(prefix, pathspec.GitIgnoreSpec.from_lines(rules))
                       for prefix, rules in (own_rule_files(repo) if tree_rules else [])]

    def hides(self, path: str) -> bool:
        """`path` relative to the work tree; a directory ends with `/`."""
        verdict = bool(self._spec.match_file(path))
        for prefix, spec in self._trees:
            if path.startswith(prefix):
                said = spec.check_file(path[len(prefix):]).include
                if said is not None:
                    verdict = said
        return verdict

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


_LEDGER_READ = 2000  # the newest commits memsync made here that are looked at


def own_rule_files(repo: pygit2.Repository) -> list[tuple[str, list[str]]]:
    """(folder prefix, rules) of the `.gitignore` files that are the operator's, shallow first:
    tracked ones (and the root's) whose content the hub's tip does not hold, or that a commit
    memsync made here holds. One that came from the hub is left out: it decides nothing."""
    workdir = repo.workdir
    if not workdir:
        return []
    hub_tree = _hub_tree(repo)
    made = _made(repo) if hub_tree is not None else []
    found: list[tuple[str, list[str]]] = []
    for rel in sorted(_candidates(repo), key=lambda p: (p.count("/"), p)):
        full = os.path.join(workdir, rel)
        if os.path.islink(full) or not os.path.isfile(full):
            continue
        lines = _lines(full)
        if hub_tree is not None and not _own(repo, rel, full, hub_tree, made):
            continue
        found.append((rel[: -len(".gitignore")], lines))
    return found


def _candidates(repo: pygit2.Repository) -> set[str]:
    """The root's `.gitignore` and the tracked ones (the index file is searched for the name
    first: iterating a 100,000-entry index in Python costs more than a second)."""
    paths = {".gitignore"}
    try:
        with open(os.path.join(repo.path, "index"), "rb") as fh:
            if b".gitignore" not in fh.read():
                return paths
    except OSError:
        return paths
    with contextlib.suppress(pygit2.GitError, OSError):
        paths.update(e.path for e in repo.index if e.path.endswith("/.gitignore"))
    return paths


def _hub_tree(repo: pygit2.Repository) -> pygit2.Tree | None:
    """The tree of the hub's tip as last fetched (the memory's own hub), None: never fetched."""
    with contextlib.suppress(pygit2.GitError, KeyError, ValueError):
        if not repo.head_is_unborn and repo.head.shorthand:
            ref = repo.references.get(f"refs/remotes/origin/{repo.head.shorthand}")
            if ref is not None:
                return repo[ref.target].peel(pygit2.Commit).tree
    return None


def _made(repo: pygit2.Repository) -> list[str]:
    """The newest commits memsync made in this repository (its ledger, repo.py's MADE_LEDGER)."""
    with contextlib.suppress(OSError), open(os.path.join(repo.path, "memsync-made"), encoding="ascii",
                                            errors="replace") as fh:
        return [line.strip() for line in fh.read().splitlines()[-_LEDGER_READ:][::-1] if line.strip()]
    return []


def _own(repo: pygit2.Repository, rel: str, full: str, hub_tree: pygit2.Tree, made: list[str]) -> bool:
    try:
        here = str(pygit2.hashfile(full))
        hub = str(hub_tree[rel].id)
    except (KeyError, OSError, pygit2.GitError, ValueError):
        return True  # not on the hub: a local file, the operator's
    if here != hub:
        return True  # a local edit
    for oid in made:  # a commit made here that wrote this content (not one that only kept it)
        with contextlib.suppress(KeyError, ValueError, pygit2.GitError):
            commit = repo[oid].peel(pygit2.Commit)
            if str(commit.tree[rel].id) == here and not any(_holds(p.tree, rel, here) for p in commit.parents):
                return True
    return False


def _holds(tree: pygit2.Tree, rel: str, blob: str) -> bool:
    try:
        return str(tree[rel].id) == blob
    except KeyError:
        return False


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
