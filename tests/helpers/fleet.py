"""A hub crowded with memories, built fast: one `git fast-import` for every memory's commit and
one packed-refs file written directly (update-ref would write each ref as a loose file first).
Shared by the tests of a crowded hub and bench/fleet.py."""

from __future__ import annotations

import subprocess
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
