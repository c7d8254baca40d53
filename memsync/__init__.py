"""memsync: a memory that survives throwaway sandboxes, stored in git.

The Python API lives in `memsync.api` (imported on demand so `memsync --version` stays fast).
"""

__version__ = "0.1.0"
