"""The git engine: the only package that imports pygit2.

Everything above it deals in paths, hex ids and dataclasses; pygit2 errors are translated into
memsync errors where they enter.
"""

from __future__ import annotations

import pygit2
from pygit2.enums import Option

# git's refusal of a repository owned by another user (CVE-2022-24765) stays on: such a
# repository's .git/config is someone else's. `safe.directory` in the global config lifts it.
pygit2.option(Option.SET_OWNER_VALIDATION, 1)

# Packs are read through mmap windows, and libgit2's defaults (1 GiB windows, 8 GiB mapped at
# once) keep every page a command touched resident: a 100,000-file clone held its whole 55 MB
# pack in RSS on top of the rest. Small windows, recycled beyond 8 MiB, bound that share.
pygit2.option(Option.SET_MWINDOW_SIZE, 4 * 1024 * 1024)
pygit2.option(Option.SET_MWINDOW_MAPPED_LIMIT, 8 * 1024 * 1024)
