"""A first checkout without libgit2's content filters, when no filter could apply.

For every file it writes, libgit2 loads the file's filter list (CRLF conversion, ident, filter
drivers): it looks up the text/eol/crlf/ident/filter attributes of the path, resolving it with
realpath() on the way (~13 readlink calls a file: 129,000 for a 10,000-file checkout), about 45%
of a first checkout. When core.autocrlf is off, core.eol unset, and no attribute source that
could apply (every .gitattributes of the version, the repository's info/attributes, the user's
and the system's attributes files) names one of those attributes, no filter applies to any
file, and a checkout with filters disabled writes the same bytes.
"""

from __future__ import annotations

import contextlib
import os
import re

import pygit2
from pygit2.callbacks import git_checkout_options
from pygit2.enums import CheckoutStrategy, ConfigLevel, FileMode

from memsync.git import native

__all__ = ["checkout", "unneeded"]

# Any mention, set or unset, in a rule or a macro: reading it as "may apply" only ever keeps filters.
_FILTER_ATTRIBUTES = re.compile(rb"text|eol|crlf|ident|filter|encoding")
_READ_AT_MOST = 1 << 20  # an attributes file bigger than this keeps the filters
_BLOB = int(FileMode.BLOB)


def unneeded(repo: pygit2.Repository, attributes: list[tuple[str, int]]) -> bool:
    """Whether no content filter can apply to a checkout of a version whose .gitattributes
    files are `attributes` ((id, mode) each, every one of the version's)."""
    config = repo.config
    if "core.eol" in config:
        return False
    if "core.autocrlf" in config and str(config["core.autocrlf"]).strip().lower() not in ("false", "no", "off", "0"):
        return False
    for oid, mode in attributes:
        if mode != _BLOB:
            return False  # a link or a folder named .gitattributes: not worth reading the rules
        try:
            data = repo[oid].peel(pygit2.Blob).data
        except (KeyError, ValueError, pygit2.GitError):
            return False
        if len(data) > _READ_AT_MOST or _FILTER_ATTRIBUTES.search(data):
            return False
    return not any(_mentions(path) for path in _attribute_files(repo))


def _attribute_files(repo: pygit2.Repository) -> list[str]:
    files = [os.path.join(repo.path, "info", "attributes")]
    configured = None
    with contextlib.suppress(KeyError, ValueError, pygit2.GitError):
        configured = repo.config["core.attributesFile"]
    # where libgit2 looks (attr.c): core.attributesFile, else "attributes" in its XDG folders; and
    # "gitattributes" in its system folders
    places = [(ConfigLevel.SYSTEM, "gitattributes")] + ([] if configured else [(ConfigLevel.XDG, "attributes")])
    if configured:
        files.append(os.path.expanduser(configured))
    for level, name in places:
        for folder in (pygit2.settings.search_path[level] or "").split(os.pathsep):
            if folder:
                files.append(os.path.join(folder, name))
    return files


def _mentions(path: str) -> bool:
    try:
        with open(path, "rb") as fh:
            data = fh.read(_READ_AT_MOST + 1)
    except FileNotFoundError:
        return False
    except OSError:
        return True  # there and unreadable: libgit2 may read it
    return len(data) > _READ_AT_MOST or bool(_FILTER_ATTRIBUTES.search(data))


def checkout(repo: pygit2.Repository, tree: pygit2.Tree, strategy: CheckoutStrategy,
             paths: list[str] | None = None, *, filters: bool = True) -> None:
    """repo.checkout_tree(tree, strategy=, paths=), with libgit2's filters off unless `filters`.
    A path at which (or on whose way) a FIFO, socket or device stands is left out and named:
    libgit2 would open it to see whether it changed, and wait for ever on a FIFO (an agent's, in
    a tree it can write); its index entry takes the version's, so no later commit reverts it."""
    if paths and repo.workdir:
        from memsync.util.dirfd import specials_on_the_way

        special = specials_on_the_way(repo.workdir, paths)
        if special:
            paths = [p for p in paths if p not in special]
            _index_follows(repo, tree, list(special))
            from memsync.util import notices

            for path, kind in sorted(special.items()):
                notices.warn(f"not checked out: {path} ({kind} stands there: never opened, left as it is)")
            if not paths:
                return
    with git_checkout_options(strategy=strategy, paths=paths) as payload:
        payload.checkout_options.disable_filters = 0 if filters else 1
        native.checkout_tree(repo, tree, payload)


def _index_follows(repo: pygit2.Repository, tree: pygit2.Tree, paths: list[str]) -> None:
    """The index entries of `paths` become `tree`'s (or go), as a checkout would have left them."""
    index = repo.index
    index.read(force=False)
    for path in paths:
        try:
            entry = tree[path]
        except KeyError:
            with contextlib.suppress(KeyError, OSError, pygit2.GitError):
                index.remove(path)
            continue
        if entry.filemode not in (FileMode.TREE, FileMode.COMMIT):
            index.add(pygit2.IndexEntry(path, entry.id, entry.filemode))
    index.write()
