"""The protocol-v2 fetch (git/fetchv2.py) over a real `git daemon` and smart HTTP(S): `pull`, `run`,
`clone` (the tip alone) and `clone --full-history` end where libgit2's fetch (MEMSYNC_V2_FETCH=0)
ends, in shallow and full memories alike; the v2 fetch writes no FETCH_HEAD (libgit2's does),
which tells the two apart."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import Cli, git, write
from tests.helpers.servers import GitDaemon, make_bare_hub
from tests.stories.test_reliability_checkout import fill, small_disk
from tests.stories.test_v2_listing import _hub, _memory

pytestmark = pytest.mark.server


def _state(root: Path, head: bool = True) -> tuple[str, str, dict[str, str]]:
    """(HEAD, the tracking refs, the notes): a run's own commit differs by its run id, so `head` False
    leaves HEAD out."""
    files = {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*.md")) if ".git" not in p.parts}
    tracking = git("for-each-ref", "refs/remotes", "--format=%(refname) %(objectname)", cwd=root)
    return git("rev-parse", "HEAD", cwd=root).strip() if head else "", tracking, files


def _each(cli: Cli, monkeypatch: pytest.MonkeyPatch, roots: dict[str, Path], *args: str) -> None:
    """`memsync ARGS` in each copy with its switch; the v2 one writes no FETCH_HEAD. A pull leaves
    both at one commit; a run at its own commit over the same hub tip and notes."""
    for switch, root in roots.items():
        (root / ".git" / "FETCH_HEAD").unlink(missing_ok=True)
        monkeypatch.setenv("MEMSYNC_V2_FETCH", switch)
        done = cli(*args, cwd=root)
        assert done.code == 0, (switch, args, done.err)
        assert (root / ".git" / "FETCH_HEAD").exists() == (switch == "0"), (switch, args)
    first, second = (_state(root, head=args[0] != "run") for root in roots.values())
    assert first == second and first[1]


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["git", "http", "https"])
def test_pull_run_and_clone_agree_with_the_switch_on_and_off(kind: str, cli: Cli, tmp_path: Path,
                                                             request: pytest.FixtureRequest,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    url, server = _hub(kind, request, monkeypatch)
    writer = _memory(cli, tmp_path, url, monkeypatch)
    shallow = {s: tmp_path / f"shallow-{s}" for s in ("1", "0")}
    for switch, root in shallow.items():  # a clone fetches the tip alone (`deepen 1`; libgit2's depth 1)
        monkeypatch.setenv("MEMSYNC_V2_FETCH", switch)
        assert cli("clone", "research", str(root)).code == 0
        assert (root / ".git" / "FETCH_HEAD").exists() == (switch == "0")
    assert _state(shallow["1"]) == _state(shallow["0"])
    tip = git("rev-parse", "HEAD", cwd=writer).strip()
    assert {(root / ".git" / "shallow").read_text() for root in shallow.values()} == {tip + "\n"}
    assert git("rev-list", "--count", "HEAD", cwd=shallow["1"]).strip() == "1"
    monkeypatch.delenv("MEMSYNC_V2_FETCH")
    write(writer, "a.md", "a, second version\n")
    write(writer, "notes/b.md", "b\n")
    assert cli("push", cwd=writer).code == 0
    _each(cli, monkeypatch, shallow, "pull")
    assert (shallow["1"] / "notes" / "b.md").read_text() == "b\n"
    assert (shallow["1"] / ".git" / "shallow").exists()  # as shallow as it was

    full = {s: tmp_path / f"full-{s}" for s in ("1", "0")}
    for switch, root in full.items():
        monkeypatch.setenv("MEMSYNC_V2_FETCH", switch)
        assert cli("clone", "research", str(root), "--full-history").code == 0
        assert not (root / ".git" / "FETCH_HEAD").exists() or switch == "0"
    assert _state(full["1"]) == _state(full["0"])
    assert git("rev-list", "--count", "HEAD", cwd=full["1"]) == git("rev-list", "--count", "HEAD", cwd=writer)

    monkeypatch.delenv("MEMSYNC_V2_FETCH")
    write(writer, "a.md", "a, third version\n")
    assert cli("push", cwd=writer).code == 0
    _each(cli, monkeypatch, full, "run", "--no-push", "--", "true")
    assert (full["1"] / "a.md").read_text() == "a, third version\n"
    _each(cli, monkeypatch, shallow, "run", "--no-push", "--", "true")
    if server is not None:  # the listing and the fetch: POSTs in protocol v2
        posts = [r for r in server.requests if r.method == "POST" and r.path.endswith("/git-upload-pack")]
        v2 = [r for r in posts if r.header("Git-Protocol") == "version=2"]
        assert len(v2) >= 8, posts  # a listing and a fetch for each of the v2 copies' pulls and runs
        assert len(v2) < len(posts)  # and libgit2's own for the others


@pytest.mark.slow
def test_a_v2_fetch_into_a_full_disk_is_the_disk_full_error(git_daemon: GitDaemon, cli: Cli, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The indexer's write failing for want of space is the ordinary disk-full error, naming the
    memory's disk, not a refused pack; once there is room the same pull brings the version."""
    url = git_daemon.url("hub.git")
    make_bare_hub(git_daemon.base_path / "hub.git")
    disk = tmp_path / "disk"
    with small_disk(disk, 16):
        root = disk / "research"
        root.mkdir()
        assert cli("init", "--remote", url, cwd=root).code == 0
        assert cli("push", cwd=root).code == 0
        assert cli("clone", "research", str(tmp_path / "other"), "--remote", url).code == 0
        write(tmp_path / "other", "big.bin", os.urandom(6_000_000))
        assert cli("push", cwd=tmp_path / "other").code == 0
        filler = fill(disk, 500_000)
        done = cli("pull", cwd=root)
        assert done.code != 0 and done.err.startswith(f"error: the disk is full: cannot write in {root / '.git'}"), \
            done.err
        assert not list((root / ".git" / "objects" / "pack").glob("pack_*"))  # no temporary pack left
        filler.unlink()
        (root / ".git" / "FETCH_HEAD").unlink(missing_ok=True)
        assert cli("pull", cwd=root).code == 0
        assert (root / "big.bin").stat().st_size == 6_000_000
        assert not (root / ".git" / "FETCH_HEAD").exists()  # fetched over v2
