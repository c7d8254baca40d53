"""What a killed `run --as-user` left: the user's processes, and a work tree still lent to them.

memsync killed during such a run (kill -9, an OOM kill) cannot end the command's processes nor
take its tree back. Any later command that takes the memory's lock as root does both first
(`reclaim`), before it reads or writes a file there: a process left running could otherwise swap
a folder for a symlink while root checks the hub's files out (libgit2 writes by path), and root
would write through it. Without root nothing can be ended: the next command then finds the
processes alive through the run's mark and refuses (core/memory.live_run).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from memsync.core import lending
from memsync.util import notices, processes
from memsync.util.fs import write_private

__all__ = ["reclaim"]


def reclaim(root: Path, mark_file: Path, name: str, data: dict[str, Any]) -> None:
    """End the processes and take back the tree `root` of the dead --as-user run whose mark
    `data` (in `mark_file`) is (caller holds the memory's lock and checked that the run's memsync
    is gone; root only). The mark stays, without its --as-user record: what the run left is still
    that run's (core/unverified.vet)."""
    user = data.get("as_user")
    if not isinstance(user, dict) or os.geteuid() != 0:
        return
    try:
        uid = int(user["uid"])
    except (KeyError, TypeError, ValueError):
        return
    if uid == 0:
        return
    import pwd

    try:
        gid = pwd.getpwuid(uid).pw_gid
    except KeyError:
        gid = uid
    left = processes.end_user(uid, gid)
    if left:
        notices.warn(f"memory {name!r}: {len(left)} processes of the user run {data['run_id']} ran as "
                     f"(uid {uid}) did not end (pids {', '.join(map(str, left[:5]))})")
        return  # the tree stays lent; the next command tries again
    lent = lending.lent_from(user.get("lent"))
    if lent is not None:
        lending.hand_back(root, lent, uid)
    notices.warn(f"memory {name!r}: run {data['run_id']} (as uid {uid}) was killed; its command's processes "
                 "were ended and its work tree taken back before anything else")
    rest = {k: v for k, v in data.items() if k != "as_user"}
    write_private(mark_file, json.dumps(rest).encode())
