"""The v2 fetch's decisions on real repositories, no server: what it asks for (git/fetchv2.py) and
the pack check it streams through (packcheck.StreamCheck)."""

from __future__ import annotations

from pathlib import Path

import pygit2
import pytest

from memsync.git import fetchv2
from memsync.git.packcheck import QUEUED, CheckBeside, DeltaTooLarge, StreamCheck, bound
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


@pytest.mark.parametrize("beside", ["1", "0"])
def test_the_check_beside_the_indexer_refuses_before_its_end(beside: str, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """In its thread (MEMSYNC_PACK_CHECK_THREAD=1) the refusal reaches the caller by `finish` at
    the latest, which the caller passes before the indexer's commit; a stream that goes on long
    after the bomb is refused by `feed` within QUEUED + 2 pieces. In the caller's thread (0): at once."""
    monkeypatch.setenv("MEMSYNC_PACK_CHECK_THREAD", beside)
    bare = make_bare_hub(tmp_path / "bomb.git")
    write_bomb(bare, "refs/heads/memory/bomb", copies=600)
    (pack,) = (bare / "objects" / "pack").glob("*.pack")
    data = pack.read_bytes()
    with CheckBeside(StreamCheck(bound(), "the hub")) as check, pytest.raises(DeltaTooLarge, match="39,321,600"):
        for at in range(0, len(data), 4096):
            check.feed(data[at:at + 4096])
        check.finish()
    fed = 0
    with CheckBeside(StreamCheck(bound(), "the hub")) as check, pytest.raises(DeltaTooLarge):
        check.feed(data)
        while fed < 10 * QUEUED:  # bytes after the pack's end: never read once it was refused
            fed += 1
            check.feed(b"\0" * 4096)
    assert (fed <= QUEUED + 2) if beside == "1" else (fed == 0), fed
    with CheckBeside(StreamCheck(bound(64 * 1024 * 1024), "the hub")) as check:  # allowed: no refusal
        for at in range(0, len(data), 4096):
            check.feed(data[at:at + 4096])
        check.finish()
