"""Index entries whose flags make git (and libgit2) look away from the work tree's file.

`git update-index --assume-unchanged PATH` (CE_VALID) and `--skip-worktree PATH` make a status
or a diff report PATH unchanged whatever the file holds: an agent could hide its own edit from
its run's record that way, and the edit would surface later as someone else's. libgit2 does not
expose an entry's flags, so they are read here from the index file (format: git's
Documentation/gitformat-index.txt, versions 2 to 4), cheaply (docs/PERFORMANCE.md).
"""

from __future__ import annotations

import struct

from memsync.util.records import recordclass

__all__ = ["Hiding", "hiding"]

_VALID = 0x8000  # assume-unchanged
_EXTENDED = 0x4000  # an extended flags word follows (version 3 and later)
_SKIP_WORKTREE = 0x4000  # in the extended flags
_NAME_MASK = 0x0FFF
_FIXED = 62  # stat data (40 bytes), a SHA-1 (20), the flags (2)


@recordclass(frozen=True)
class Hiding:
    path: str
    assume_unchanged: bool
    skip_worktree: bool

    @property
    def what(self) -> str:
        return " and ".join(n for n, on in (("assume-unchanged", self.assume_unchanged),
                                            ("skip-worktree", self.skip_worktree)) if on)


def hiding(data: bytes) -> list[Hiding]:
    """The entries of the index file `data` flagged assume-unchanged or skip-worktree (empty for
    anything that is not a SHA-1 index of versions 2 to 4: libgit2 refuses those itself)."""
    if len(data) < 12 or data[:4] != b"DIRC":
        return []
    version, count = struct.unpack_from(">II", data, 4)
    if version not in (2, 3, 4):
        return []
    try:
        return _walk(data, version, count)
    except (struct.error, IndexError, ValueError):
        return []


def _walk(data: bytes, version: int, count: int) -> list[Hiding]:
    found: list[Hiding] = []
    unpack = struct.unpack_from
    offset, previous = 12, b""
    for _ in range(count):
        (flags,) = unpack(">H", data, offset + 60)
        name_at = offset + _FIXED
        extended = 0
        if flags & _EXTENDED and version >= 3:
            (extended,) = unpack(">H", data, name_at)
            name_at += 2
        if version == 4:  # the name is the previous one less N bytes, plus a suffix
            strip, name_at = _varint(data, name_at)
            end = data.index(b"\0", name_at)
            name = previous[:len(previous) - strip] + data[name_at:end]
            previous, offset = name, end + 1
        else:  # the name is sliced only for a flagged entry: most are not
            length = flags & _NAME_MASK
            if length == _NAME_MASK:
                length = data.index(b"\0", name_at) - name_at
            name = data[name_at:name_at + length] if flags & _VALID or extended & _SKIP_WORKTREE else b""
            offset += (name_at - offset + length + 8) // 8 * 8
        if flags & _VALID or extended & _SKIP_WORKTREE:
            found.append(Hiding(name.decode("utf-8", "surrogateescape"), bool(flags & _VALID),
                                bool(extended & _SKIP_WORKTREE)))
    return found


def _varint(data: bytes, at: int) -> tuple[int, int]:
    byte = data[at]
    at += 1
    value = byte & 0x7F
    while byte & 0x80:
        byte = data[at]
        at += 1
        value = ((value + 1) << 7) | (byte & 0x7F)
    return value, at
