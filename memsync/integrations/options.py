"""When a served session (`memsync mcp`, the memory-tool backend) pushes what it wrote: the
defaults, declared here and nowhere else. A light module: the command line imports it."""

from __future__ import annotations

from memsync.run.options import DEFAULT_CHECKPOINT

__all__ = ["DEFAULT_CHECKPOINT_SECONDS", "DEFAULT_CHECKPOINT_WRITES"]

DEFAULT_CHECKPOINT_WRITES = 20  # writes before a push; 0: off
DEFAULT_CHECKPOINT_SECONDS = DEFAULT_CHECKPOINT  # seconds after the first unpushed write, as `run`'s
