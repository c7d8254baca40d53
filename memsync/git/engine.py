"""libgit2's process-wide settings, applied when memsync first needs them, never at import.

Importing memsync (its API included) changes nothing in the process. The first time memsync opens
or creates a repository, `engage()` sets, for the whole process (a Python caller that also uses
pygit2 shares them from then on):

- owner validation on: git's refusal of a repository owned by another user (CVE-2022-24765)
  stays in force, whatever the embedding program set;
- pack mmap windows of 4 MiB, at most 8 MiB mapped at once (libgit2's defaults are 1 GiB and 8 GiB,
  which keep every page a command touched resident).

The first time memsync reaches a hub (transport.py), it also sets libgit2's connect and I/O
timeouts from MEMSYNC_CONNECT_TIMEOUT / MEMSYNC_IO_TIMEOUT and makes pygit2's remote callbacks fail
closed and verify SSH host keys (interrupts.py, hostkeys.py).
"""

from __future__ import annotations

from pathlib import Path

import pygit2
from pygit2.enums import ConfigLevel, Option

_engaged = False


def engage() -> None:
    """Apply memsync's repository settings (idempotent)."""
    global _engaged
    if _engaged:
        return
    pygit2.option(Option.SET_OWNER_VALIDATION, 1)
    pygit2.option(Option.SET_MWINDOW_SIZE, 4 * 1024 * 1024)
    pygit2.option(Option.SET_MWINDOW_MAPPED_LIMIT, 8 * 1024 * 1024)
    _engaged = True


def repository(path: Path | str) -> pygit2.Repository:
    """Open a repository (a `.git` directory, a work tree or a bare repository)."""
    engage()
    return pygit2.Repository(str(path))


def create(path: Path | str, *, bare: bool, initial_head: str | None = None) -> pygit2.Repository:
    """Create a repository (pygit2's init_repository)."""
    engage()
    if initial_head is None:
        return pygit2.init_repository(str(path), bare=bare)
    return pygit2.init_repository(str(path), bare=bare, initial_head=initial_head)


def find_configuration_again() -> None:
    """Forget where the global, XDG and system git configuration files were found: the next
    repository opened looks for them from this process's HOME / XDG_CONFIG_HOME (a `memsync serve`
    worker takes on its caller's environment)."""
    for level in (ConfigLevel.GLOBAL, ConfigLevel.XDG, ConfigLevel.SYSTEM, ConfigLevel.PROGRAMDATA):
        pygit2.settings.search_path[level] = None  # type: ignore[assignment]
