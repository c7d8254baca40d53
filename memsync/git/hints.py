"""Which paths of a work tree may have changed: a change tracker's hint that narrows the scan.

libgit2's index-to-work-tree diff lstat()s every file (at 10,000 files, as long as git's whole
`fetch && status`: docs/PERFORMANCE.md). A tracker that watches the work tree (the resident
server's, see memsync/serve/tracker.py) can say which paths were touched since an earlier scan; the
scan then asks libgit2 about those paths only, with the same flags, so it reports exactly what a
full diff would.

A scan hands its result back as the next baseline: (token, the index's tree, what differed).
Whatever differs from the index later is one of
- a path that differed at the baseline (rechecked every time),
- a path the tracker saw touched since the token (the token is taken before the scan starts, so
  a change made while it ran is seen next time), or
- a path whose index entry changed since (the tree of the index is compared with the baseline's).
Anything else that can change a diff without touching a watched path (a .gitignore or
.gitattributes among the candidates, git config and exclude files, another repository in the
same place) makes the scan a full one. So does any doubt: no tracker, no answer, no baseline.

This module is only an interface: `source` is None in a plain process, and the server sets it in
its workers (memsync/serve/server.py). Nothing here imports the server.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Protocol

from memsync.util.records import recordclass

__all__ = ["MAX_DIFFS", "MAX_PATHS", "RULE_FILES", "Since", "Source", "fingerprint", "narrowing", "source"]

MAX_PATHS = 4096  # more candidates than this: a full scan costs about the same
MAX_DIFFS = 64  # paths a narrowed scan diffs one by one (a folder costs more; docs/PERFORMANCE.md)
RULE_FILES = frozenset({".gitignore", ".gitattributes"})  # they change other paths' status


@recordclass(frozen=True)
class Since:
    """The tracker's answer for one work tree. `paths` is None when there is no usable baseline
    (the first scan, or the tracker started over): the scan is a full one, and its result becomes
    the baseline for `token`."""

    token: int
    tree: str | None = None
    fingerprint: str | None = None
    paths: frozenset[str] | None = None


class Source(Protocol):
    def since(self, root: str) -> Since | None: ...

    def hand_back(self, root: str, token: int, tree: str, fingerprint: str, paths: list[str], full: bool) -> None: ...


source: Source | None = None


def narrowing(since: Since | None, tree: str | None, stamp: str) -> frozenset[str] | None:
    """The baseline's paths when they may stand in for a full scan of an index whose tree is
    `tree` (the caller adds the paths whose index entries changed since `since.tree`)."""
    if since is None or since.paths is None or tree is None or since.tree is None:
        return None
    if since.fingerprint != stamp or len(since.paths) > MAX_PATHS:
        return None
    if any(p.rstrip("/").rsplit("/", 1)[-1] in RULE_FILES for p in since.paths):
        return None
    return since.paths


def fingerprint(git_dir: Path, flags: int, extra: tuple[str | None, ...] = ()) -> str:
    """What a diff depends on besides the work tree and the index: the flags, the repository's
    own directory, git's config and ignore/attribute files (the repository's, the user's, the
    system's, and any core.excludesFile / core.attributesFile named in `extra`)."""
    home = os.environ.get("HOME", "")
    xdg = os.environ.get("XDG_CONFIG_HOME") or (os.path.join(home, ".config") if home else "")
    try:  # the repository itself: the same one, not one made in its place (its mtime moves with every index write)
        st = os.stat(git_dir)
        parts = [f"{st.st_dev}:{st.st_ino}"]
    except OSError:
        parts = ["-"]
    files = [str(git_dir / "config"), str(git_dir / "info" / "exclude"),
             str(git_dir / "info" / "attributes"), "/etc/gitconfig"]
    if home:
        files.append(os.path.join(home, ".gitconfig"))
    if xdg:
        files += [os.path.join(xdg, "git", name) for name in ("config", "ignore", "attributes")]
    files += [os.path.expanduser(p) for p in extra if p]
    parts += [str(flags), home, xdg, os.environ.get("GIT_CONFIG_NOSYSTEM", "")]
    for name in files:
        try:
            st = os.stat(name)
            parts.append(f"{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}")
        except OSError:
            parts.append("-")
    return "|".join(parts)
