"""libgit2's process-wide settings, applied when memsync first needs them, never at import.

Importing memsync (its API included) changes nothing in the process. The first time memsync opens
or creates a repository, `engage()` sets, for the whole process (a Python caller that also uses
pygit2 shares them from then on):

- owner validation on: git's refusal of a repository owned by another user (CVE-2022-24765)
  stays in force, whatever the embedding program set;
- pack mmap windows of 4 MiB, at most 8 MiB mapped at once (libgit2's defaults are 1 GiB and 8 GiB,
  which keep every page a command touched resident).

A pack is built (a push, a repack) through a second handle on the repository, `for_packing`,
whose configuration also reads `packing.gitconfig` (beside this file), in memory only and at the
lowest priority (the operator's own git configuration overrides it): the pack builder keeps no
delta cache. libgit2's default caches every delta it finds, up to 256 MiB, until the pack is
written: that cache grows with the memory (+25 MB at 20,000 files, most of a repack's peak) and
saves nothing here, as recomputing a delta when writing costs less than caching it (a
20,000-file repack: 24 s without, 60-79 s with). A push through such a handle runs `uncached()`:
libgit2's object cache off, so the handle does not keep a second copy of the trees the memory's
own handle already cached (+13 MB for `run -- true` at 100,000 files).

The first time memsync reaches a hub (transport.py), it also sets libgit2's connect and I/O
timeouts from MEMSYNC_CONNECT_TIMEOUT / MEMSYNC_IO_TIMEOUT and makes pygit2's remote callbacks fail
closed and verify SSH host keys (interrupts.py, hostkeys.py).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pygit2
from pygit2.enums import ConfigLevel, Option

_engaged = False
PACKING_CONFIG = Path(__file__).with_name("packing.gitconfig")


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


def for_packing(path: Path | str) -> pygit2.Repository:
    """A handle on a repository for building packs only (a push, a repack): its configuration
    also holds packing.gitconfig. Never write configuration through it: libgit2 writes a setting
    into the configuration file added last, here memsync's own, whatever its level. pygit2
    refuses `add_file` on a repository's configuration; libgit2 allows it. At the lowest level
    (ProgramData's, used on Windows only), so that every configuration file outranks it. If the
    file is missing (a broken install) or the level is taken, the handle keeps libgit2's
    defaults, which are only larger. The C heap's free pages go back to the system first
    (native.release_free_heap): a pack build comes after the walk of a whole memory."""
    from memsync.git import native

    native.release_free_heap()
    repo = repository(path)
    if not PACKING_CONFIG.is_file():
        return repo
    native.add_config_file(repo, bytes(PACKING_CONFIG), ConfigLevel.PROGRAMDATA)
    return repo


@contextlib.contextmanager
def uncached() -> Iterator[None]:
    """libgit2's object cache off meanwhile (a process-wide setting): objects read are freed once
    used instead of kept. For a walk of a whole tree whose objects another handle holds already."""
    pygit2.option(Option.ENABLE_CACHING, 0)
    try:
        yield
    finally:
        pygit2.option(Option.ENABLE_CACHING, 1)


def find_configuration_again() -> None:
    """Forget where the global, XDG and system git configuration files were found: the next
    repository opened looks for them from this process's HOME / XDG_CONFIG_HOME (a `memsync serve`
    worker takes on its caller's environment)."""
    for level in (ConfigLevel.GLOBAL, ConfigLevel.XDG, ConfigLevel.SYSTEM, ConfigLevel.PROGRAMDATA):
        pygit2.settings.search_path[level] = None  # type: ignore[assignment]
