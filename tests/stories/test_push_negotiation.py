"""A push to a hub of many memories negotiates with the tips the memory holds, not with every
advertised one (issue 37): libgit2 hides each advertised head from the pack's walk, and each head
the memory lacks costs a re-read of its pack folder. What must hold on every transport: the hub
receives only the objects it lacks, and the negotiation really was narrowed (or, with
MEMSYNC_NARROW_PUSH=0, left as libgit2 makes it, as correct).
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pygit2
import pytest

from memsync.git import hub as hubs
from memsync.git import transport
from tests.conftest import Cli, git, write
from tests.helpers.fleet import add_fleet
from tests.helpers.servers import GitDaemon, HttpGitServer, make_bare_hub

FLEET = 2000
BRANCH = "refs/heads/memory/research"
WHO = ("-c", "user.name=t", "-c", "user.email=t@example.com")


def _daemon(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, str]:
    daemon: GitDaemon = request.getfixturevalue("git_daemon")
    return make_bare_hub(daemon.base_path / "fleet.git"), daemon.url("fleet.git")


def _http(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, str]:
    server: HttpGitServer = request.getfixturevalue("http_server")
    monkeypatch.setenv("MEMSYNC_USER", server.user)
    monkeypatch.setenv("MEMSYNC_TOKEN", server.token)
    return make_bare_hub(server.project_root / "fleet.git"), server.url("fleet.git")


def _ssh(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, str]:
    server = request.getfixturevalue("ssh_server")
    tmp_path: Path = request.getfixturevalue("tmp_path")
    monkeypatch.setenv("MEMSYNC_KNOWN_HOSTS", str(server.write_known_hosts(tmp_path / "known_hosts")))
    monkeypatch.setenv("MEMSYNC_SSH_KEY", str(server.client_key))
    hub = make_bare_hub(tmp_path / "fleet.git")
    return hub, server.url(hub)


SERVERS: dict[str, Callable[[pytest.FixtureRequest, pytest.MonkeyPatch], tuple[Path, str]]] = {
    "git": _daemon, "http": _http, "ssh": _ssh}


def _packs(hub: Path) -> set[Path]:
    return set((hub / "objects" / "pack").glob("*.pack"))


def _kinds(hub: Path, pack: Path) -> list[str]:
    listed = git("verify-pack", "-v", str(pack.with_suffix(".idx")), cwd=hub)
    return sorted(line.split()[1] for line in listed.splitlines()
                  if len(line.split()) > 2 and len(line.split()[0]) == 40)


@pytest.mark.server
@pytest.mark.parametrize(("kind", "narrow"), [("git", True), ("git", False), ("http", True),
                                              pytest.param("ssh", True, marks=pytest.mark.slow)])
def test_a_push_to_a_crowded_hub_sends_only_what_it_lacks(kind: str, narrow: bool, cli: Cli, tmp_path: Path,
                                                         request: pytest.FixtureRequest,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    hub, url = SERVERS[kind](request, monkeypatch)
    add_fleet(hub, FLEET)
    git("config", "receive.unpackLimit", "1", cwd=hub)  # every push kept as the pack it sent
    monkeypatch.setenv("MEMSYNC_REMOTE", url)
    if not narrow:
        monkeypatch.setenv("MEMSYNC_NARROW_PUSH", "0")
    root = tmp_path / "research"
    root.mkdir()
    assert cli("init", cwd=root).code == 0
    for i in range(20):
        write(root, f"a/b/c/file-{i}.md", f"{i}\n")
    first = cli("push", cwd=root)
    assert first.code == 0, first.err
    before = _packs(hub)
    write(root, "a/b/c/file-3.md", "changed\n")
    done = cli("push", cwd=root)
    assert done.code == 0, done.err
    new = _packs(hub) - before
    assert len(new) == 1, new
    # the commit, the root tree and a/, a/b/, a/b/c/, the one blob: not the 19 others
    assert _kinds(hub, next(iter(new))) == ["blob", "commit", "tree", "tree", "tree", "tree"]
    assert git("rev-parse", BRANCH, cwd=hub).strip() == git("rev-parse", "HEAD", cwd=root).strip()
    fsck = subprocess.run(["git", "fsck", "--no-dangling"], cwd=hub, capture_output=True, text=True)
    assert fsck.returncode == 0, fsck.stderr


def _narrowed_push(root: Path, url: str, refspec: str) -> tuple[int, int] | None:
    """A push of `refspec` from `root` to `url` as transport.push makes it; the negotiation's
    (heads advertised, heads kept), None if it was not narrowed."""
    hub = hubs.parse(url)
    cb = transport.Callbacks(hub)
    transport.send(pygit2.Repository(str(root)), hub, refspec, cb)
    assert not cb.rejected, cb.rejected
    return cb.narrowed


@pytest.mark.server
def test_the_negotiation_keeps_the_memorys_own_tips(git_daemon: GitDaemon, cli: Cli, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    hub = make_bare_hub(git_daemon.base_path / "fleet.git")
    add_fleet(hub, FLEET)
    url = git_daemon.url("fleet.git")
    monkeypatch.setenv("MEMSYNC_REMOTE", url)
    root = tmp_path / "research"
    root.mkdir()
    assert cli("init", cwd=root).code == 0
    write(root, "a.md", "a\n")
    assert cli("push", cwd=root).code == 0
    git(*WHO, "commit", "-q", "--allow-empty", "-m", "next", cwd=root)
    # the memory's branch is the one head the memory holds among FLEET + 1 advertised
    assert _narrowed_push(root, url, f"HEAD:{BRANCH}") == (FLEET + 1, 1)
    # a new ref (a proposal's branch) is negotiated with the memory's branch: only its commit goes
    proposal = git(*WHO, "commit-tree", "HEAD^{tree}", "-p", "HEAD", "-m", "proposal", cwd=root).strip()
    git("update-ref", "refs/memsync/proposal", proposal, cwd=root)
    git("config", "receive.unpackLimit", "1", cwd=hub)
    before = _packs(hub)
    assert _narrowed_push(root, url, "refs/memsync/proposal:refs/heads/proposals/research/p1") == (FLEET + 1, 1)
    assert _kinds(hub, next(iter(_packs(hub) - before))) == ["commit"]
    monkeypatch.setenv("MEMSYNC_NARROW_PUSH", "0")
    git(*WHO, "commit", "-q", "--allow-empty", "-m", "third", cwd=root)
    assert _narrowed_push(root, url, f"HEAD:{BRANCH}") is None


@pytest.mark.server
def test_a_ref_is_found_in_any_advertisement_order(git_daemon: GitDaemon, tmp_path: Path) -> None:
    """An exact lookup bisects git's sorted advertisement, and reads every head when that finds
    nothing: peeled tags (`v1^{}` sorts after `v1.0`) and a missing ref still answer right."""
    from memsync.git import native

    hub = make_bare_hub(git_daemon.base_path / "tags.git")
    add_fleet(hub, 50)
    tip = git("rev-parse", "refs/heads/memory/fleet-000007", cwd=hub).strip()
    for tag in ("v1", "v1.0", "v1-rc"):
        git(*WHO, "tag", "-a", "-m", tag, tag, tip, cwd=hub)
    listed = dict(line.split("\t")[::-1] for line in git("ls-remote", git_daemon.url("tags.git"), cwd=tmp_path)
                  .splitlines())
    remote = pygit2.Repository(str(hub)).remotes.create_anonymous(git_daemon.url("tags.git"))
    remote.connect()
    for name, oid in listed.items():
        assert native.remote_heads(remote, exact=name.encode()) == (len(listed), {name: oid}), name
    assert native.remote_heads(remote, exact=b"refs/heads/memory/absent") == (len(listed), {})
