"""The protocol-v2 ref listing on a git:// hub (git/lsrefs.py): a pull, status or run whose hub
has nothing new asks for the memory's branch alone and fetches nothing; a hub with something new
is fetched as before; a server older than v2 is read through libgit2 as before."""

from __future__ import annotations

from pathlib import Path

import pytest

from memsync.git import hub as hubs
from memsync.git import lsrefs
from tests.conftest import Cli, git, write
from tests.helpers.gitproto import git_server, v0_upload_pack
from tests.helpers.servers import GitDaemon, make_bare_hub

pytestmark = pytest.mark.server


def _memory(cli: Cli, tmp_path: Path, url: str, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("MEMSYNC_REMOTE", url)
    root = tmp_path / "research"
    root.mkdir()
    assert cli("init", cwd=root).code == 0
    write(root, "a.md", "a\n")
    done = cli("push", cwd=root)
    assert done.code == 0, done.err
    return root


def _another_writer(cli: Cli, tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    assert cli("clone", "research", str(copy)).code == 0
    write(copy, "b.md", "b\n")
    assert cli("push", cwd=copy).code == 0


def test_nothing_new_is_not_fetched(git_daemon: GitDaemon, cli: Cli, tmp_path: Path,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    make_bare_hub(git_daemon.base_path / "hub.git")
    root = _memory(cli, tmp_path, git_daemon.url("hub.git"), monkeypatch)
    fetch_head = root / ".git" / "FETCH_HEAD"  # written by every libgit2 fetch
    fetch_head.unlink(missing_ok=True)
    for verb in ("pull", "status"):
        done = cli(verb, cwd=root)
        assert done.code == 0, done.err
    assert not fetch_head.exists()
    _another_writer(cli, tmp_path)
    done = cli("pull", cwd=root)
    assert done.code == 0, done.err
    assert (root / "b.md").read_text() == "b\n" and fetch_head.exists()
    fetch_head.unlink()
    monkeypatch.setenv("MEMSYNC_V2_LISTING", "0")  # the switch: libgit2's fetch every time
    assert cli("pull", cwd=root).code == 0
    assert fetch_head.exists()


def test_a_v0_server_is_read_through_libgit2(cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    base = tmp_path / "served"
    make_bare_hub(base / "hub.git")
    with git_server(v0_upload_pack(base)) as port:
        url = f"git://127.0.0.1:{port}/hub.git"
        assert lsrefs.tips(hubs.parse(url), ["refs/heads/memory/research"]) is None
        root = _memory(cli, tmp_path, url, monkeypatch)
        _another_writer(cli, tmp_path)
        done = cli("status", cwd=root)
        assert done.code == 0, done.err
        theirs = git("rev-parse", "refs/heads/memory/research", cwd=base / "hub.git").strip()
        assert theirs[:8] in done.out
        assert cli("pull", cwd=root).code == 0
    assert (root / "b.md").read_text() == "b\n"
