"""What `memsync run` is asked to do: its options as one record, their defaults declared here and
nowhere else (the command line's spellings and help are in cli/options.py)."""

from __future__ import annotations

from memsync.util.records import recordclass

__all__ = ["DEFAULT_CHECKPOINT", "RunOptions"]

DEFAULT_CHECKPOINT = 30.0


@recordclass(frozen=True)
class RunOptions:
    """How a run goes about its memories and the command (the memories and the command themselves
    are `execute`'s arguments)."""

    run_id: str | None = None  # None: memsync makes one (UTC time + random)
    offline: bool = False  # no pull first: run on the local copies
    no_push: bool = False  # commit locally only
    checkpoint: float = DEFAULT_CHECKPOINT  # seconds between checkpoints while the command runs; 0: off
    remote: str | None = None  # the hub of memories this run clones
    keep_ssh_agent: bool = False  # leave SSH_AUTH_SOCK in the command's environment
    as_user: str | None = None  # run the command as this user (memsync runs as root)
    max_push_rate: str | None = None  # e.g. 6/min; None: MEMSYNC_MAX_PUSH_RATE, then storage.yaml
    create: bool = False  # start a memory the hub does not have
    propose: bool = False  # the writable memories' changes become a proposal (sync/proposing.py)
