"""memsync's Python API, for harnesses that start sandboxes from Python.

    from memsync import api

    api.init(Path("notes"), name="research")                # make a directory a memory
    api.push(Path("notes"))                                  # commit as the operator and push
    api.push(Path("notes"), api.PushOptions(message="x"))    # a verb's options come as one record
    api.clone("research", Path("/mnt/memory"))               # fetch a memory
    api.pull(Path("/mnt/memory"))                            # merge the hub's version in
    report = api.status(Path("/mnt/memory"))                 # StatusReport dataclass
    hub, memories = api.list_memories()                      # [MemoryInfo, ...]
    run = api.run(["python", "agent.py"], [api.Mount("research", Path("/mnt/memory"))])
    run.status                                               # the exit code memsync would use

Every function returns a dataclass and raises a `memsync.errors.MemsyncError` subclass (with
`.message`, `.hint` and `.exit_code`) on failure; none of them prints. push, status and run take
their verb's options as one record (`PushOptions`, `StatusOptions`, `RunOptions`: the command
line's options, with the same defaults). Remotes are resolved as on the command line: the
`remote` option or argument, storage.yaml, MEMSYNC_REMOTE, then the embedded hub.
"""

from __future__ import annotations

from memsync.errors import MemsyncError
from memsync.run.execute import execute as run
from memsync.run.mounts import Mount
from memsync.run.options import RunOptions
from memsync.run.outcome import RunReport
from memsync.sync.listing import MemoryInfo, list_memories
from memsync.sync.options import PushOptions, StatusOptions
from memsync.sync.storage import InitResult, PullResult, PushResult, StatusReport, clone, init, pull, push, status

__all__ = [
    "InitResult",
    "MemoryInfo",
    "MemsyncError",
    "Mount",
    "PullResult",
    "PushOptions",
    "PushResult",
    "RunOptions",
    "RunReport",
    "StatusOptions",
    "StatusReport",
    "clone",
    "init",
    "list_memories",
    "pull",
    "push",
    "run",
    "status",
]
