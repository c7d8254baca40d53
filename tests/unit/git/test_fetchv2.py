"""The v2 fetch's decisions on real repositories, no server: what it asks for (git/fetchv2.py) and
the pack check it streams through (packcheck.StreamCheck)."""

from __future__ import annotations

import threading
from pathlib import Path

import pygit2
import pytest

from memsync.git import fetchv2, hub, native, netlimits
from memsync.git.packcheck import DeltaTooLarge, StreamCheck, bound
from memsync.git.pktline import Reader, pkt
from tests.helpers.packbomb import write_bomb
from tests.helpers.servers import make_bare_hub


def _pkt_lines(data: bytes) -> list[bytes]:
    lines, at = [], 0
    while at < len(data):
        size = int(data[at:at + 4], 16)
        lines.append(data[at:at + 4] if size < 4 else data[at + 4:at + size])
        at += max(size, 4)
    return lines


def test_the_request_wants_the_tip_alone_and_says_done() -> None:
    tip, have, cut = "1" * 40, ["2" * 40, "3" * 40], ["4" * 40]
    assert _pkt_lines(fetchv2.request(tip, have, cut)) == [
        b"command=fetch\n", b"0001", b"ofs-delta\n", f"want {tip}\n".encode(), f"shallow {cut[0]}\n".encode(),
        f"have {have[0]}\n".encode(), f"have {have[1]}\n".encode(), b"done\n", b"0000"]


def test_haves_are_the_newest_commits_and_bounded(tmp_path: Path) -> None:
    repo = pygit2.init_repository(str(tmp_path / "work"))
    made: list[str] = []
    for i in range(fetchv2.HAVES + 6):
        tree = repo.TreeBuilder()
        tree.insert("n.md", repo.create_blob(f"{i}\n".encode()), pygit2.GIT_FILEMODE_BLOB)
        stamp = pygit2.Signature("a", "a@b", 1_700_000_000 + i, 0)
        made.append(str(repo.create_commit("refs/heads/main", stamp, stamp, f"c{i}", tree.write(),
                                           [pygit2.Oid(hex=made[-1])] if made else [])))
    repo.references.create("refs/remotes/origin/main", pygit2.Oid(hex=made[10]))
    offered = fetchv2.haves(repo)
    assert offered == made[::-1][:fetchv2.HAVES]  # newest first, the tracking ref's among them
    assert fetchv2.shallow(repo) == []
    (Path(repo.path) / "shallow").write_text(f"{made[0]}\nnot-an-id\n")
    assert fetchv2.shallow(repo) == [made[0]]


def test_the_stream_check_refuses_a_bomb_however_it_is_cut(tmp_path: Path) -> None:
    bare = make_bare_hub(tmp_path / "bomb.git")
    write_bomb(bare, "refs/heads/memory/bomb", copies=600)  # 37.5 MiB: over the 32 MiB floor
    (pack,) = (bare / "objects" / "pack").glob("*.pack")
    data = pack.read_bytes()
    for piece in (1, 7, 65515):
        check = StreamCheck(bound(), "the hub")
        with pytest.raises(DeltaTooLarge, match="39,321,600 bytes"):
            for at in range(0, len(data), piece):
                check.feed(data[at:at + piece])
    check = StreamCheck(bound(64 * 1024 * 1024), "the hub")  # a memory whose max_file_size allows it
    for at in range(0, len(data), 4096):
        check.feed(data[at:at + 4096])


def _pack_of(tmp_path: Path, files: int) -> tuple[bytes, str]:
    """A pack of a version of `files` files, and the version's id."""
    src = pygit2.init_repository(str(tmp_path / "src"))
    tree = src.TreeBuilder()
    for i in range(files):
        tree.insert(f"n{i}.md", src.create_blob(f"note {i}\n".encode() * 40), pygit2.GIT_FILEMODE_BLOB)
    stamp = pygit2.Signature("a", "a@b", 1_700_000_000, 0)
    tip = src.create_commit("refs/heads/main", stamp, stamp, "v", tree.write(), [])
    builder = pygit2.PackBuilder(src)
    builder.add_recur(tip)
    (tmp_path / "packed").mkdir()
    builder.write(str(tmp_path / "packed"))
    (pack,) = (tmp_path / "packed").glob("*.pack")
    return pack.read_bytes(), str(tip)


@pytest.mark.parametrize("beside", ["1", "0"])
def test_the_indexer_beside_takes_every_piece_then_commits(beside: str, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """In its thread (MEMSYNC_PACK_INDEX_THREAD=1) or not, the indexer has taken every piece
    appended once `finish` returns: the pack commits whole, and its objects read."""
    monkeypatch.setenv("MEMSYNC_PACK_INDEX_THREAD", beside)
    data, tip = _pack_of(tmp_path, 300)
    repo = pygit2.init_repository(str(tmp_path / "into"))
    indexer = native.PackIndexer(repo)
    try:
        with fetchv2.IndexBeside(indexer) as beside_it:
            for at in range(0, len(data), 1000):
                beside_it.append(data[at:at + 1000])
            beside_it.finish()
            assert beside_it.stats.received_objects == beside_it.stats.total_objects == 302
        indexer.commit()
    finally:
        indexer.close()
    assert len(repo[tip].peel(pygit2.Commit).tree) == 300


@pytest.mark.parametrize("beside", ["1", "0"])
def test_the_indexers_failure_reaches_the_reading_thread(beside: str, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A stream libgit2 refuses (not a pack) is raised in the caller's thread by `append` or by
    `finish`, never lost in the indexer's; what it wrote goes with the indexer."""
    monkeypatch.setenv("MEMSYNC_PACK_INDEX_THREAD", beside)
    repo = pygit2.init_repository(str(tmp_path / "into"))
    indexer = native.PackIndexer(repo)
    try:
        with pytest.raises(native.IndexerError), fetchv2.IndexBeside(indexer) as beside_it:
            for _ in range(5 * fetchv2.QUEUED):
                beside_it.append(b"NOT A PACK, " * 100)
            beside_it.finish()
    finally:
        indexer.close()
    assert list((Path(repo.path) / "objects" / "pack").iterdir()) == []


class _Recording(native.PackIndexer):
    """libgit2's indexer, noting the bytes it is handed."""

    handed = 0

    def append(self, data: bytes) -> None:
        self.handed += len(data)
        super().append(data)


@pytest.mark.parametrize("beside", ["1", "0"])
def test_a_refused_piece_never_reaches_the_indexer(beside: str, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """_stream checks each piece of side-band 1 before the indexer is handed it: with a bomb cut
    in pieces, the indexer is never handed the refused piece or one after it, in its thread or
    not, and a stream that goes on after the bomb is not read further."""
    monkeypatch.setenv("MEMSYNC_PACK_INDEX_THREAD", beside)
    bare = make_bare_hub(tmp_path / "bomb.git")
    write_bomb(bare, "refs/heads/memory/bomb", copies=600)
    (pack,) = (bare / "objects" / "pack").glob("*.pack")
    data = pack.read_bytes() + b"\0" * 40_000  # and more after it
    pieces = [data[at:at + 4096] for at in range(0, len(data), 4096)]
    stream = [pkt(b"\x01" + piece) for piece in pieces] + [b"0000"]
    sent = iter(stream)
    reader = Reader(lambda: next(sent, b""), netlimits.limits(), "the hub")
    watch = netlimits.Watch(None, netlimits.limits(), "the hub", "fetch")
    repo = pygit2.init_repository(str(tmp_path / "into"))
    indexer = _Recording(repo)
    try:
        with pytest.raises(DeltaTooLarge), fetchv2.IndexBeside(indexer) as beside_it:
            fetchv2._stream(reader, hub.parse("git://127.0.0.1/bomb.git"), watch, 0,
                            StreamCheck(bound(), "the hub"), beside_it, None)
    finally:
        indexer.close()
    refused = next(n for n in range(len(pieces)) if sum(map(len, pieces[:n + 1])) > 65536)
    before = sum(map(len, pieces[:refused]))
    # in the reading thread: every piece before the refused one; in its own: those it had taken
    # when the refusal came (what was still queued is dropped); never one after
    assert indexer.handed == before if beside == "0" else indexer.handed <= before
    assert next(sent, None) is not None  # the rest of the stream was never read


def test_a_reader_that_stops_ends_the_indexers_thread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A failure in the reading thread (a refusal, Ctrl-C) with pieces still queued: the
    indexer's thread drops them and ends before the block is left, so the caller frees an
    indexer no thread is using."""
    monkeypatch.setenv("MEMSYNC_PACK_INDEX_THREAD", "1")
    data, _tip = _pack_of(tmp_path, 1500)
    repo = pygit2.init_repository(str(tmp_path / "into"))
    indexer = native.PackIndexer(repo)
    try:
        with pytest.raises(KeyboardInterrupt), fetchv2.IndexBeside(indexer) as beside_it:
            for at in range(0, len(data), 512):
                beside_it.append(data[at:at + 512])
            raise KeyboardInterrupt
        assert beside_it._thread is None
        assert not any(t.name == "memsync-indexer" for t in threading.enumerate())
    finally:
        indexer.close()
    assert list((Path(repo.path) / "objects" / "pack").iterdir()) == []
