"""A received pack's objects, checked before libgit2 resolves a single delta (docs/SECURITY.md).

A delta states the size of the object it makes in its first bytes. A hub writer can make a
66 KB pack whose blob is a delta copying a 64 KiB base 16,000 times: libgit2's indexer, which
resolves every delta of a fetched pack to hash its result, then holds a 1,000 MiB buffer (and
`list`, which fetches the tips it sizes, likewise), although memsync never checks such a blob
out. So while a pack arrives, once its last object is in (libgit2 writes what it receives into a
temporary file of the repository's pack folder, and resolves deltas only after), the file is read
here object by object: each object's header, and the first bytes of each delta. A delta that
would make an object larger than the bound, or a tree or commit stated larger, stops the fetch
(DeltaTooLarge, exit 4) before any of it is resolved.

The bound follows the memory's max_file_size (a larger blob is never checked out anyway) and
is at least TREE_BYTES, room for the largest tree memsync walks.
"""

from __future__ import annotations

import os
import struct
import threading
import zlib
from pathlib import Path
from typing import Any, BinaryIO

from memsync.errors import RemoteError
from memsync.util.threads import helper_body

TREE_BYTES = 32 * 1024 * 1024  # one tree of ~400,000 entries; memsync walks 1,000,000 per version in all
DEFAULT_MAX_FILE_SIZE = 10 * 1024 * 1024  # storage.yaml's default (core/config.py)
_OFS_DELTA, _REF_DELTA = 6, 7
_KINDS = {1: "commit", 2: "tree", 3: "blob", 4: "tag", 6: "delta", 7: "delta"}
_CHUNK = 64 * 1024  # inflated bytes at a time, dropped
_WINDOW = 1024 * 1024  # pack bytes read at a time
_STEP = 1024 * 1024  # pack bytes that arrive between two readings


class DeltaTooLarge(RemoteError):
    """A fetched pack states an object larger than memsync resolves."""


def bound(max_file_size: int = DEFAULT_MAX_FILE_SIZE) -> int:
    return max(max_file_size, TREE_BYTES)


class PackWatch:
    """The temporary file libgit2 writes a fetched pack into (found among the files of the pack
    folder that were not there before the fetch), read as it grows: each object's header as soon
    as it is there (a plain object stated over the bound is refused before its bytes come), each
    delta's stated result as soon as its first bytes are.

    The reading runs in a thread of its own (`_Follower`) while libgit2 receives and indexes in the
    fetching thread (the two ran one after the other, a share of a clone: docs/PERFORMANCE.md). The
    rule stays the callback's: a refusal the thread found is raised by the next progress callback,
    and the callback that reports the last object in waits until the thread has read every object,
    so libgit2 resolves no delta before the whole pack was read."""

    def __init__(self, pack_dir: Path, limit: int, hub: str) -> None:
        self.pack_dir = pack_dir
        self.limit = limit
        self.hub = hub
        self._file: BinaryIO | None = None
        self._reader: _Reader | None = None
        self._follower: _Follower | None = None
        self.done = False
        self._read_at = 0  # bytes received when the file was last read
        try:
            self._before = set(os.listdir(pack_dir))
        except OSError:
            self._before = set()

    def progress(self, received: int, total: int, received_bytes: int) -> None:
        """Read on when the last object is in (waiting for the reading thread), or let the
        thread read on when another _STEP bytes are in (a header over the bound is then caught
        within _STEP bytes of its arrival, or as soon as the thread reaches it)."""
        if self.done:
            return  # every object read; libgit2 now indexes (a callback per object)
        if self._reader is None:
            found = self._received()
            if found is None:
                return
            try:
                self._file = open(found, "rb")  # noqa: SIM115 (kept open across callbacks, closed by close())
            except OSError:
                return
            self._reader = _Reader(self._file, self.limit, self.hub)
            self._follower = _Follower(self._reader)
        if received < total and received_bytes - self._read_at < _STEP:
            self._raise_found()
            return
        self._read_at = received_bytes
        if received < total and self._follower is not None:
            self._follower.nudge()
            self._raise_found()
            return
        self._stop_following()  # the last object is in: every read from here on is this thread's
        self._reader.advance()
        self.done = self._reader.count is not None and self._reader.number >= self._reader.count

    def close(self) -> None:
        self._stop_following(raising=False)
        if self._file is not None:
            self._file.close()
            self._file = None

    def _raise_found(self) -> None:
        if self._follower is not None and self._follower.refusal is not None:
            self._stop_following()

    def _stop_following(self, raising: bool = True) -> None:
        follower, self._follower = self._follower, None
        if follower is None:
            return
        follower.stop()
        if raising and follower.refusal is not None:
            raise follower.refusal

    def _received(self) -> Path | None:
        try:
            names = os.listdir(self.pack_dir)
        except OSError:
            return None
        new = [n for n in names if n not in self._before and not n.endswith((".idx", ".rev", ".keep"))]
        return self.pack_dir / new[0] if len(new) == 1 else None


class _Follower:
    """A thread that reads the growing pack each time it is nudged, until stopped or refused.
    zlib releases the GIL while it inflates, and libgit2 while it receives and indexes."""

    def __init__(self, reader: _Reader) -> None:
        self.reader = reader
        self.refusal: Exception | None = None  # DeltaTooLarge, or what reading raised (as the callback would)
        self._wake = threading.Event()
        self._stopping = False
        self._thread = threading.Thread(target=helper_body(self._run), name="memsync-pack-check", daemon=True)
        self._thread.start()

    def nudge(self) -> None:
        self._wake.set()

    def stop(self) -> None:
        """Let the reading in course finish and end the thread (the reader is the caller's after)."""
        self._stopping = True
        self._wake.set()
        self._thread.join()

    def _run(self) -> None:
        while True:
            self._wake.wait()
            self._wake.clear()
            if self._stopping:
                return
            try:
                self.reader.advance()
            except Exception as exc:  # raised in the fetching thread by its next callback
                self.refusal = exc
                return


class _Reader:
    """Where the reading of a growing pack file stands: the next object, or the zlib stream of
    the current one (its output dropped as it comes, a chunk at a time). The file is read a
    window at a time, and each object's stream is inflated from a view of it no longer than the
    object can take, so the cost follows the pack's size (one more inflate of it)."""

    def __init__(self, fh: BinaryIO, limit: int, hub: str) -> None:
        self.fh, self.limit, self.hub = fh, limit, hub
        self.count: int | None = None
        self.number = 0  # objects fully read
        self.pos = 12  # the file offset read up to
        self.stream: Any = None  # the current object's stream, when it spans windows
        self.kind = 0
        self.size = 0
        self.base = ""
        self.first = b""

    def advance(self) -> None:
        if self.count is None:
            self.fh.seek(0)
            head = self.fh.read(12)
            if len(head) < 12 or head[:4] != b"PACK":
                return
            self.count = struct.unpack(">I", head[8:12])[0]
        while self.number < self.count:
            self.fh.seek(self.pos)
            window = self.fh.read(_WINDOW)
            used = self._consume(memoryview(window)) if window else 0
            if used == 0:
                return  # the rest has not arrived yet
            self.pos += used

    def _consume(self, data: memoryview) -> int:
        """Read the objects in `data` (from self.pos); the bytes used."""
        assert self.count is not None
        off = 0
        while off < len(data) and self.number < self.count:
            if self.stream is None:
                parsed = _parse_header(bytes(data[off:off + 64]))
                if parsed is None:
                    return off  # a header cut by the window's end: read again from it
                self.kind, stated, length, self.base, self.size = parsed
                if stated > self.limit:
                    self._refuse(stated)
                off += length
                self.stream, self.first = zlib.decompressobj(), b""
            # deflate grows no stream by more than 5 bytes a 16 KiB block (plus its frame)
            fed = data[off:off + self.size + (self.size >> 10) + 64]
            self._feed(fed)
            if self.stream.eof:
                off += len(fed) - len(self.stream.unused_data)
                self.stream = None
                self.number += 1
            else:
                off += len(fed)
        return off

    def _feed(self, data: memoryview) -> None:
        delta = self.kind in (_OFS_DELTA, _REF_DELTA)
        chunk: bytes | memoryview = data
        while chunk and not self.stream.eof:
            out = self.stream.decompress(chunk, _CHUNK)
            if delta and len(self.first) < 32:
                self.first += out[:32]
                stated = _result_size(self.first)
                if stated is not None and stated > self.limit:
                    self._refuse(stated)
            chunk = self.stream.unconsumed_tail

    def _refuse(self, stated: int) -> None:
        what = f"a delta (against {self.base})" if self.kind in (_OFS_DELTA, _REF_DELTA) else f"a {_KINDS[self.kind]}"
        raise DeltaTooLarge(
            f"refused a pack from {self.hub}: its object {self.number + 1} of {self.count}, {what}, would make "
            f"{stated:,} bytes, more than memsync takes in ({self.limit:,}: the memory's max_file_size, at "
            "least 32 MiB); nothing was written",
            "the hub holds a version memsync will not read (a delta bomb?); ask its owner to remove it, or "
            "raise max_file_size in .vm0/storage.yaml for a trusted hub")


def check_pack(path: Path, limit: int, hub: str = "the hub") -> None:
    """Read a whole pack file as PackWatch reads one that grows (DeltaTooLarge past `limit`)."""
    with open(path, "rb") as fh:
        _Reader(fh, limit, hub).advance()


def _parse_header(raw: bytes) -> tuple[int, int, int, str, int] | None:
    """(type, stated size, header length, the base a delta is of, the size of its data) of an
    object's header; None if `raw` does not hold all of it."""
    if not raw:
        return None
    kind, size, at, shift = (raw[0] >> 4) & 7, raw[0] & 0x0F, 1, 4
    while raw[at - 1] & 0x80:
        if at >= len(raw):
            return None
        size |= (raw[at] & 0x7F) << shift
        shift, at = shift + 7, at + 1
    if kind not in _KINDS:
        raise DeltaTooLarge("refused a pack: an object of an unknown type", "ask the hub's owner")
    base = ""
    if kind == _OFS_DELTA:
        if at >= len(raw):
            return None
        distance = raw[at] & 0x7F
        while raw[at] & 0x80:
            at += 1
            if at >= len(raw):
                return None
            distance = ((distance + 1) << 7) | (raw[at] & 0x7F)
        at += 1
        base = f"the object {distance:,} bytes before it"
    elif kind == _REF_DELTA:
        if at + 20 > len(raw):
            return None
        base = raw[at:at + 20].hex()
        at += 20
    # a delta's own size is its instructions'; what it makes is stated inside (checked as it inflates)
    return kind, 0 if kind in (_OFS_DELTA, _REF_DELTA) else size, at, base, size


def _result_size(delta: bytes) -> int | None:
    """The second varint of a delta's header (the first is its base's size); None: not all here."""
    at = 0
    value = 0
    for _ in range(2):
        value = shift = 0
        while True:
            if at >= len(delta):
                return None
            byte = delta[at]
            value |= (byte & 0x7F) << shift
            shift, at = shift + 7, at + 1
            if not byte & 0x80:
                break
    return value


class StreamCheck:
    """A pack read as it streams in (git/fetchv2.py), before a byte of it reaches the indexer:
    `feed` each piece as it comes (DeltaTooLarge past the limit, as PackWatch). Only the bytes
    not read yet are kept (an object's header cut by a piece's end)."""

    def __init__(self, limit: int, hub: str) -> None:
        self._tail = _Tail()
        self._reader = _Reader(self._tail, limit, hub)  # type: ignore[arg-type]

    def feed(self, data: bytes) -> None:
        self._tail.append(data)
        self._reader.advance()
        if self._reader.count is not None:
            self._tail.drop_before(self._reader.pos)


class _Tail:
    """The file-like end of a stream that _Reader reads (seek/read), from `base` on."""

    def __init__(self) -> None:
        self.data = bytearray()
        self.base = 0  # the stream offset of data[0]
        self.at = 0

    def append(self, data: bytes) -> None:
        self.data += data

    def drop_before(self, offset: int) -> None:
        if offset - self.base > 65536:
            del self.data[:offset - self.base]
            self.base = offset

    def seek(self, offset: int) -> None:
        self.at = offset

    def read(self, n: int) -> bytes:
        start = self.at - self.base
        return bytes(self.data[start:start + n])


__all__ = ["TREE_BYTES", "DeltaTooLarge", "PackWatch", "StreamCheck", "bound", "check_pack"]
