"""A hub crowded with memories, built fast: one `git fast-import` for every memory's commit and
one packed-refs file written directly (update-ref would write each ref as a loose file first).
And the other layout, one standalone repository per memory (`add_repo_fleet`), written directly
(a process per repository would take minutes at 100,000). Shared by the tests of a crowded hub
and bench/fleet.py."""

from __future__ import annotations

import hashlib
import subprocess
import zlib
from pathlib import Path


def add_fleet(hub: Path, count: int, prefix: str = "fleet") -> None:
    """Add `count` memories `memory/<prefix>-NNNNNN` to the bare repository `hub`, each one commit
    of its own (distinct trees); the hub must have no other packed refs."""
    chunks: list[bytes] = []
    for i in range(count):
        body = f"notes of {prefix} memory {i}\n".encode()
        msg = f"{prefix} {i}\n".encode()
        chunks.append(b"reset refs/fleet/build\ncommit refs/fleet/build\nmark :%d\n"
                      b"committer fleet <fleet@example.com> %d +0000\ndata %d\n%s"
                      b"M 100644 inline notes.md\ndata %d\n%s\n"
                      % (i + 1, 1_700_000_000 + i, len(msg), msg, len(body), body))
    marks = hub / "fleet-marks"
    subprocess.run(["git", "-C", str(hub), "fast-import", "--quiet", f"--export-marks={marks}"],
                   input=b"".join(chunks), check=True)
    oids = {}
    for line in marks.read_text().splitlines():
        mark, oid = line.split()
        oids[int(mark[1:])] = oid
    marks.unlink()
    subprocess.run(["git", "-C", str(hub), "update-ref", "-d", "refs/fleet/build"], check=True)
    refs = sorted((f"refs/heads/memory/{prefix}-{i:06d}", oids[i + 1]) for i in range(count))
    packed = hub / "packed-refs"
    if packed.exists() and packed.read_text().strip("\n").count("\n") > 0:
        raise ValueError(f"{hub} has packed refs already")
    with open(packed, "w", encoding="ascii") as fh:
        fh.write("# pack-refs with: peeled fully-peeled sorted \n")
        fh.writelines(f"{oid} {ref}\n" for ref, oid in refs)


def _loose(objects: Path, kind: bytes, body: bytes) -> bytes:
    """Write one loose object into `objects`; its binary id."""
    raw = b"%s %d\0%s" % (kind, len(body), body)
    oid = hashlib.sha1(raw).digest()
    hexid = oid.hex()
    folder = objects / hexid[:2]
    folder.mkdir(exist_ok=True)
    (folder / hexid[2:]).write_bytes(zlib.compress(raw, 1))
    return oid


def add_repo_fleet(folder: Path, count: int, prefix: str = "fleet") -> list[Path]:
    """`count` standalone bare repositories `<prefix>-NNNNNN.git` in `folder`, one memory each (the
    branch `memory/<prefix>-NNNNNN`, one commit of its own, its three objects loose in the
    repository itself: no alternates, nothing shared). The repositories, in order."""
    folder.mkdir(parents=True, exist_ok=True)
    made = []
    for i in range(count):
        name = f"{prefix}-{i:06d}"
        repo = folder / f"{name}.git"
        objects = repo / "objects"
        for sub in ("objects/info", "objects/pack", "refs/heads", "refs/tags"):
            (repo / sub).mkdir(parents=True)
        blob = _loose(objects, b"blob", f"notes of {prefix} memory {i}\n".encode())
        tree = _loose(objects, b"tree", b"100644 notes.md\0" + blob)
        stamp = 1_700_000_000 + i
        commit = _loose(objects, b"commit", b"tree %s\nauthor fleet <fleet@example.com> %d +0000\n"
                        b"committer fleet <fleet@example.com> %d +0000\n\n%s %d\n"
                        % (tree.hex().encode(), stamp, stamp, prefix.encode(), i))
        (repo / "HEAD").write_text(f"ref: refs/heads/memory/{name}\n")
        (repo / "config").write_text("[core]\n\trepositoryformatversion = 0\n\tbare = true\n")
        (repo / "packed-refs").write_text("# pack-refs with: peeled fully-peeled sorted \n"
                                          f"{commit.hex()} refs/heads/memory/{name}\n")
        made.append(repo)
    return made
