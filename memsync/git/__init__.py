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
