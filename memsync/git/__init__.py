"""The git engine: the only package that imports pygit2.

Everything above it deals in paths, hex ids and dataclasses; pygit2 errors are translated into
memsync errors where they enter.
"""

from __future__ import annotations

import pygit2
from pygit2.enums import Option

# Sandboxes mount memories owned by another uid; git's ownership check would refuse them.
pygit2.option(Option.SET_OWNER_VALIDATION, 0)
