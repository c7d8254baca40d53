"""Index extensions git can write and libgit2 cannot read, refused with the git command that
undoes them (instead of "unexpected GitError ... this is a bug" on every command).

A user's git may have turned them on for every repository (`core.splitIndex`, `index.sparse`,
`feature.manyFiles`), memory directories included: libgit2 then refuses to read the index at
all. memsync does not rewrite a user's index behind their back; it names the feature and the
commands that turn it off for that repository.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from memsync.errors import RepoError

__all__ = ["refusal"]

_UNSUPPORTED = re.compile(r"unsupported mandatory extension: '([^']*)'")
_UNDO = {
    "link": ("a split index (core.splitIndex, `git update-index --split-index`)",
             "git -C {root} config core.splitIndex false && git -C {root} update-index --no-split-index"),
    "sdir": ("a sparse index (index.sparse, `git sparse-checkout --sparse-index`)",
             "git -C {root} config index.sparse false && git -C {root} sparse-checkout disable"),
}


def refusal(exc: BaseException, root: Path) -> RepoError | None:
    """The error to show for `exc` when it is libgit2 refusing an index extension, else None."""
    found = _UNSUPPORTED.search(str(exc))
    if found is None:
        return None
    ext = found.group(1)
    what, undo = _UNDO.get(ext, (f"the index extension {ext!r}",
                                 "git -C {root} config core.splitIndex false && git -C {root} "
                                 "config index.sparse false && git -C {root} update-index --no-split-index"))
    quoted = shlex.quote(str(root))
    return RepoError(f"the git index in {root} uses {what}, which memsync (libgit2) cannot read",
                     f"turn it off for this repository (nothing in it is lost): {undo.format(root=quoted)}")
