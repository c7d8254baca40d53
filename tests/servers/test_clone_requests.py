"""A clone asks a network hub for its refs once: the fetch of the memory's branch is the first
request, and its own advertisement says whether the hub has that branch (no listing on a
connection of its own before it). An artifact (no `memory/` branch of that name) costs a second
fetch, an unknown name a listing for the names it suggests.

In-process clones (sync/storage.clone) from a real smart-HTTP server, whose request log counts
the ref advertisements it served."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from memsync.errors import MemoryNotFound
from memsync.sync import storage
from tests.conftest import Cli, git
from tests.helpers.server_fixtures import HTTP_USER
from tests.helpers.servers import HttpGitServer, make_bare_hub

pytestmark = pytest.mark.server


@pytest.fixture(params=["streamed", "whole"])
def hub(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[HttpGitServer]:
    """A hub over HTTP holding memory/research and artifact/out-files (written with plain git),
    its answers passed on as the backend writes them (as nginx or Apache do) or whole (as a
    buffering proxy answers): memsync's client reads both."""
    root = tmp_path / "http-root"
    root.mkdir()
    server = HttpGitServer(root, user=HTTP_USER, token=secrets.token_hex(16), stream=request.param == "streamed")
    with server:
        yield _hub(server, tmp_path, monkeypatch)
    server.cleanup()


def _hub(http_server: HttpGitServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> HttpGitServer:
    bare = make_bare_hub(http_server.project_root / "hub.git")
    src = tmp_path / "src"
    src.mkdir()
    git("init", "-q", cwd=src)
    (src / "notes.md").write_text("first\n")
    git("add", "-A", cwd=src)
    git("-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "first", cwd=src)
    git("push", "-q", str(bare), "HEAD:refs/heads/memory/research", "HEAD:refs/heads/artifact/out-files", cwd=src)
    monkeypatch.setenv("MEMSYNC_REMOTE", http_server.url("hub.git"))
    monkeypatch.setenv("MEMSYNC_USER", http_server.user)
    monkeypatch.setenv("MEMSYNC_TOKEN", http_server.token)
    return http_server


def _advertisements(server: HttpGitServer, since: int) -> int:
    """Ref advertisements served after request `since`: the GET of info/refs that opens each
    smart-HTTP exchange, a fetch's or a listing's (answered: not the 401 that asks for the
    credential first)."""
    return sum(1 for r in server.requests[since:] if r.method == "GET" and "/info/refs" in r.path and r.status == 200)


def test_a_memory_clone_asks_for_the_hubs_refs_once(hub: HttpGitServer, tmp_path: Path) -> None:
    since = len(hub.requests)
    result = storage.clone("research", tmp_path / "research")
    assert result.version is not None
    assert (tmp_path / "research" / "notes.md").read_text() == "first\n"
    assert _advertisements(hub, since) == 1, [(r.method, r.path) for r in hub.requests[since:]]


def test_an_artifact_clone_fetches_its_branch_after_the_memory_branch_was_not_there(
        hub: HttpGitServer, tmp_path: Path) -> None:
    since = len(hub.requests)
    storage.clone("out-files", tmp_path / "copy")
    assert git("symbolic-ref", "HEAD", cwd=tmp_path / "copy").strip() == "refs/heads/artifact/out-files"
    assert git("branch", "--format=%(refname:short)", cwd=tmp_path / "copy").split() == ["artifact/out-files"]
    assert "type: artifact" in (tmp_path / "copy" / ".vm0" / "storage.yaml").read_text()
    assert _advertisements(hub, since) == 2


def test_an_unknown_name_names_those_the_hub_has_and_leaves_nothing(hub: HttpGitServer, tmp_path: Path) -> None:
    with pytest.raises(MemoryNotFound) as refused:
        storage.clone("nope-nope", tmp_path / "nope-nope")
    assert "research" in str(refused.value) + (refused.value.hint or "")
    assert not (tmp_path / "nope-nope").exists()
    assert not any(p.name.startswith(".memsync-clone-") for p in tmp_path.iterdir())


def test_a_run_that_clones_its_memory_fetches_once_and_saves_nothing_before_the_agent(
        hub: HttpGitServer, tmp_path: Path, cli: Cli) -> None:
    """`run --memory` in a fresh sandbox: the clone is the run's pull (no second fetch), and a
    work tree the clone just wrote has nothing to save before the command (no commit of its own)."""
    bare = hub.project_root / "hub.git"
    before = git("rev-parse", "memory/research", cwd=bare).strip()
    since = len(hub.requests)
    mount = tmp_path / "sandbox" / "research"
    r = cli("run", "--memory", f"research:{mount}", "--", "sh", "-c", f"echo second >> '{mount}/notes.md'")
    assert r.code == 0, r.err
    served = [(r.method, r.path, r.status) for r in hub.requests[since:]]
    opened = [path for method, path, status in served if method == "GET" and status == 200]
    assert len(opened) == 2, served  # one exchange to fetch (the clone's: no pull after it), one to push
    assert "service=git-upload-pack" in opened[0] and "service=git-receive-pack" in opened[1], served
    after = git("log", "--format=%P %s", "-1", "memory/research", cwd=bare)
    parent, subject = after.split(" ", 1)
    assert parent == before and subject.startswith("Run "), after  # the run's commit, right on the hub's tip
    assert (mount / "notes.md").read_text() == "first\nsecond\n"
