"""Deterministic synthetic memories: nested folders of markdown-ish text files.

Sizes follow a log-normal law (median ~700 B, mean ~1.2 KB, clipped to 200 B .. 64 KB), so a
100,000-file memory weighs ~115 MB, and folders nest 1-4 levels deep with ~25 files each. The same
(count, seed) always gives byte-identical trees. Content is words drawn from a fixed vocabulary
(text compresses like text), with a per-file header so no two files are identical.
"""

from __future__ import annotations

import math
import os
import random
from collections.abc import Iterator
from pathlib import Path

_SYLLABLES = ("ka", "lo", "mi", "ne", "ru", "ta", "shi", "po", "ver", "an", "is", "tor", "el", "qu",
              "mem", "sync", "note", "run", "git", "agent", "crdt", "graph", "vec", "log")
_TOPICS = ("notes", "research", "runs", "people", "projects", "papers", "tasks", "journal",
           "code", "reference")


def _vocabulary(rng: random.Random, size: int = 4000) -> list[str]:
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(1, 4))))
    return sorted(words)


def file_size(rng: random.Random, scale: int = 1) -> int:
    return scale * max(200, min(64 * 1024, int(rng.lognormvariate(math.log(700), 1.0))))


def layout(count: int, seed: int = 8, scale: int = 1) -> list[tuple[str, int]]:
    """(relative path, size) of every file, in a stable order; `scale` multiplies every size (the
    same tree, `scale` times heavier)."""
    rng = random.Random(seed)
    dirs: list[str] = []
    files: list[tuple[str, int]] = []
    per_dir = 25
    for i in range(count):
        if i % per_dir == 0:
            depth = rng.randint(1, 4)
            parts = [rng.choice(_TOPICS)] + [f"{rng.choice(_SYLLABLES)}{rng.randint(0, 99):02d}"
                                              for _ in range(depth - 1)]
            base = "/".join(parts)
            while base in dirs:
                base += f"-{len(dirs)}"
            dirs.append(base)
        files.append((f"{dirs[-1]}/note-{i:06d}.md", file_size(rng, scale)))
    return files


def contents(count: int, seed: int = 8, scale: int = 1) -> Iterator[tuple[str, bytes]]:
    """(relative path, bytes) of every file of the memory, in layout order."""
    rng = random.Random(seed * 7919 + count)
    vocab = _vocabulary(random.Random(seed))
    # One big pool of words; each file takes a window of it at a random offset (fast and realistic).
    pool_words = rng.choices(vocab, k=400_000)
    lines = []
    for start in range(0, len(pool_words), 12):
        lines.append(" ".join(pool_words[start:start + 12]))
    pool = "\n".join(lines) + "\n"
    for path, size in layout(count, seed, scale):
        header = f"# {path}\n\n"
        body_len = max(0, size - len(header))
        offset = rng.randrange(0, len(pool) - body_len - 1)
        yield path, (header + pool[offset:offset + body_len]).encode()


def generate(root: Path, count: int, seed: int = 8, scale: int = 1) -> int:
    """Write the memory under `root`; returns its size in bytes."""
    total = 0
    made: set[str] = set()
    for path, data in contents(count, seed, scale):
        full = root / path
        parent = os.path.dirname(path)
        if parent not in made:
            full.parent.mkdir(parents=True, exist_ok=True)
            made.add(parent)
        with open(full, "wb") as fh:
            fh.write(data)
        total += len(data)
    return total


def changed_paths(count: int, round_no: int, how_many: int = 10, seed: int = 8) -> list[str]:
    """The files a round edits: spread over the tree, different every round."""
    paths = [p for p, _ in layout(count, seed)]
    rng = random.Random(f"{count}-{round_no}-{seed}")
    return sorted(rng.sample(paths, how_many))


def edit_line(path: str, tag: str) -> str:
    return f"- update {tag}: the agent learned something new about {path}\n"


def edit(root: Path, paths: list[str], tag: str) -> None:
    """Append one line to each file (what an agent's note-taking does)."""
    for path in paths:
        with open(root / path, "a", encoding="utf-8") as fh:
            fh.write(edit_line(path, tag))


class _TreeIds:
    """git's tree ids of a memory as files change, computed as git does (so a generated commit
    can carry the `Memsync-Changes` trailer memsync writes, which names its trees)."""

    def __init__(self) -> None:
        self.dirs: dict[str, dict[str, tuple[bytes, bytes]]] = {"": {}}  # folder -> name -> (mode, raw id)
        self.ids: dict[str, bytes] = {}
        self.dirty: set[str] = {""}
        self.subdirs: dict[str, set[str]] = {"": set()}

    def put(self, path: str, data: bytes) -> None:
        import hashlib

        folder, _, name = path.rpartition("/")
        self._folder(folder)[name] = (b"100644", hashlib.sha1(b"blob %d\0" % len(data) + data).digest())
        while True:
            self.dirty.add(folder)
            if not folder:
                break
            folder = folder.rpartition("/")[0]

    def _folder(self, folder: str) -> dict[str, tuple[bytes, bytes]]:
        if folder not in self.dirs:
            self.dirs[folder], self.subdirs[folder] = {}, set()
            parent = folder.rpartition("/")[0]
            self._folder(parent)
            self.subdirs[parent].add(folder)
        return self.dirs[folder]

    def root(self) -> str:
        import hashlib

        for folder in sorted(self.dirty, key=lambda f: -f.count("/") - (1 if f else 0)):
            entries = dict(self.dirs[folder])
            prefix = f"{folder}/" if folder else ""
            for sub in self.subdirs[folder]:
                entries[sub[len(prefix):]] = (b"40000", self.ids[sub])
            body = b"".join(mode + b" " + name.encode() + b"\0" + raw for name, (mode, raw) in
                            sorted(entries.items(), key=lambda kv: kv[0].encode() + (b"/" if kv[1][0] == b"40000"
                                                                                      else b"")))
            self.ids[folder] = hashlib.sha1(b"tree %d\0" % len(body) + body).digest()
        self.dirty = set()
        return self.ids[""].hex()


def history_stream(count: int, versions: int, per_version: int = 3, seed: int = 8) -> Iterator[bytes]:
    """A `git fast-import` stream of `versions` commits on refs/heads/main: the first holds the
    whole memory (`count` files), every later one appends a line to `per_version` files, as
    gen.edit does. Fixed dates and names, run-style messages with memsync's trailers (what each
    version changed included, as memsync records it): the same arguments always give the same
    commits."""
    files = dict(contents(count, seed))
    paths = sorted(files)
    rng = random.Random(f"history-{count}-{versions}-{seed}")
    when = 1_767_225_600  # 2026-01-01T00:00:00Z
    trees = _TreeIds()
    parent_tree = ["-"]

    def commit(number: int, changed: list[str], added: int) -> Iterator[bytes]:
        run_id = f"20260101T000000Z-{number:05d}"
        for path in changed:
            trees.put(path, files[path])
        tree = trees.root()
        msg = (f"Run {run_id}\n\nMemsync-Actor: run\nMemsync-Run-Id: {run_id}\nMemsync-Exit-Code: 0\n"
               f"Memsync-Changes: files={len(changed)} added={added} removed=0 tree={tree} "
               f"parent-tree={parent_tree[0]}\n").encode()
        parent_tree[0] = tree
        yield (f"commit refs/heads/main\ncommitter Bench Agent <agent@example.invalid> "
               f"{when + 60 * number} +0000\ndata {len(msg)}\n").encode() + msg + b"\n"
        for path in changed:
            data = files[path]
            yield f"M 100644 inline {path}\ndata {len(data)}\n".encode() + data + b"\n"

    yield from commit(0, paths, sum(len(d) for d in files.values()))
    for number in range(1, versions):
        changed = sorted(rng.sample(paths, per_version))
        grown = 0
        for path in changed:
            line = edit_line(path, f"version {number}").encode()
            files[path] += line
            grown += len(line)
        yield from commit(number, changed, grown)
    yield b"done\n"
