"""The page's gate over plain HTTP: the token, the Host header, the Origin and CSRF token of a
change, the security headers; and a revert posted through the page leaves the version the CLI
would."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest

from tests.conftest import Cli
from tests.ui.conftest import RUN2, Served, World, git_out

pytestmark = [pytest.mark.server]


def _tip(hub: Path) -> str:
    return git_out(hub, "rev-parse", "memory/research").strip()


@pytest.mark.attack
def test_a_request_without_the_token_is_refused(served: Served, world: World) -> None:
    status, _, body = served.request("GET", "/m/research")
    assert status == 403 and "token" in body and "research" not in body.replace("/m/research", "")
    status, _, _ = served.request("GET", "/?token=" + "x" * 43)
    assert status == 403
    status, _, _ = served.request("GET", "/", {"Cookie": f"memsync_ui_{served.port}=wrong"})
    assert status == 403


def test_the_token_becomes_a_strict_httponly_cookie(served: Served, world: World) -> None:
    status, headers, _ = served.request("GET", f"/m/research?page=0&token={served.token}")
    assert status == 303 and headers["location"] == "/m/research?page=0", "the URL loses the token"
    cookie = headers["set-cookie"]
    assert cookie.startswith(served.cookie + ";") and "HttpOnly" in cookie and "SameSite=Strict" in cookie
    status, body = served.get("/m/research")
    assert status == 200 and body.count('<tr class="') == len(world.versions)


@pytest.mark.attack
def test_a_foreign_host_is_refused_even_with_the_cookie(served: Served, world: World) -> None:
    """DNS rebinding: a page of evil.example that resolves to 127.0.0.1 sends its own name."""
    for host in (f"evil.example:{served.port}", "127.0.0.1", f"127.0.0.1:{served.port + 1}"):
        status, _, body = served.request("GET", "/", {"Host": host, "Cookie": served.cookie})
        assert status == 421, host
        assert "research" not in body


def test_every_answer_forbids_scripts_and_foreign_resources(served: Served, world: World) -> None:
    status, headers, body = served.request("GET", "/m/research", {"Cookie": served.cookie})
    assert status == 200
    csp = headers["content-security-policy"]
    assert "default-src 'none'" in csp and "script-src" not in csp and "style-src 'self'" in csp
    assert headers["x-frame-options"] == "DENY" and headers["referrer-policy"] == "same-origin"
    assert "<script" not in body
    assert "http://" not in body.replace('xmlns="http://www.w3.org/2000/svg"', ""), "no link to another host"
    assert re.findall(r'(?:src|href)="(https?:)?//', body) == [], "no asset from another host"


def _revert_form(served: Served, rev: str, csrf: str | None, origin: str | None) -> tuple[int, str]:
    headers = {"Cookie": served.cookie}
    if origin is not None:
        headers["Origin"] = origin
    fields = {"rev": rev} | ({"csrf": csrf} if csrf is not None else {})
    status, _, body = served.request("POST", "/m/research/do/revert", headers, urlencode(fields))
    return status, body


@pytest.mark.attack
def test_a_cross_origin_or_tokenless_post_changes_nothing(served: Served, world: World) -> None:
    status, page = served.get(f"/m/research/do/revert?rev={world.versions[0]}")
    assert status == 200 and "memsync revert" in page
    csrf = re.search(r'name="csrf" value="([0-9a-f]{64})"', page)
    assert csrf is not None
    before = _tip(world.hub)
    assert _revert_form(served, world.versions[0], csrf.group(1), "http://evil.example")[0] == 403
    assert _revert_form(served, world.versions[0], csrf.group(1), None)[0] == 403
    assert _revert_form(served, world.versions[0], "0" * 64, served.origin)[0] == 403
    assert _revert_form(served, world.versions[0], None, served.origin)[0] == 403
    assert _tip(world.hub) == before


def test_read_only_offers_no_action_and_takes_none(world: World) -> None:
    served = Served(read_only=True)
    try:
        status, body = served.get("/m/research")
        assert status == 200 and "/do/" not in body and "read-only" in body
        status, _ = served.get(f"/m/research/do/revert?rev={world.versions[0]}")
        assert status in (404, 405)
        status, _, _ = served.request("POST", "/m/research/do/revert", {"Cookie": served.cookie,
                                                                        "Origin": served.origin}, "rev=x")
        assert status in (404, 405)
    finally:
        served.stop()


@pytest.mark.slow
def test_reverting_a_run_through_the_page_leaves_the_clis_version(tmp_path: Path, served: Served, world: World,
                                                                  cli: Cli) -> None:
    twin = tmp_path / "twin.git"
    shutil.copytree(world.hub, twin, symlinks=True)
    status, page = served.get(f"/m/research/do/revert?rev=run:{RUN2}")
    assert status == 200
    csrf = re.search(r'name="csrf" value="([0-9a-f]{64})"', page)
    assert csrf is not None
    status, body = _revert_form(served, f"run:{RUN2}", csrf.group(1), served.origin)
    assert status == 200 and "New version" in body, body
    assert cli("clone", "research", str(tmp_path / "mine"), "--remote", str(twin)).code == 0
    r = cli("revert", f"run:{RUN2}", cwd=tmp_path / "mine")
    assert r.code == 0, r.err
    page_made, cli_made = _tip(world.hub), _tip(twin)
    assert page_made not in world.versions and cli_made not in world.versions  # (equal when made in one second)
    tree = "{}^{{tree}}"
    assert git_out(world.hub, "rev-parse", tree.format(page_made)) == git_out(twin, "rev-parse", tree.format(cli_made))
    assert _record(world.hub, page_made) == _record(twin, cli_made)
    assert git_out(world.hub, "rev-parse", f"{page_made}^") == git_out(twin, "rev-parse", f"{cli_made}^")


def _record(hub: Path, oid: str) -> tuple[str, str]:
    """A version's message with its trailers, and its author's name and email."""
    return git_out(hub, "log", "-1", "--format=%B", oid), git_out(hub, "log", "-1", "--format=%an <%ae>", oid)


def test_an_unknown_memory_version_or_file_is_a_404_page(served: Served, world: World) -> None:
    for path in ("/m/nope", "/m/research/v/ffffffff", "/m/research/v/HEAD~1", "/m/research/f/missing.md",
                 "/m/research/run/no-such-run", "/m/research/f/a//b.md", "/m/research/f/x/%2e%2e/crdts.md",
                 "/m/research?file=../crdts.md", "/m/research/do/restore-conflict?path=crdts.md&id=abc"):
        status, body = served.get(path)
        assert status == 404, path
        assert 'id="error"' in body and "Traceback" not in body


@pytest.mark.slow
def test_a_network_hub_is_shown_and_restored_through(tmp_path: Path, world: World, git_daemon: Any) -> None:
    """--remote git://: the page reads a fetched cache and its restore pushes over the daemon."""
    hub = git_daemon.base_path / "hub.git"
    shutil.copytree(world.hub, hub, symlinks=True)
    git_out(hub, "config", "daemon.receivepack", "true")
    served = Served(remote=git_daemon.url("hub.git"))
    try:
        status, body = served.get("/m/research")
        assert status == 200 and body.count('<tr class="') == len(world.versions)
        status, page = served.get(f"/m/research/do/restore?path=crdts.md&at={world.versions[-1]}")
        csrf = re.search(r'name="csrf" value="([0-9a-f]{64})"', page)
        assert status == 200 and csrf is not None
        form = urlencode({"csrf": csrf.group(1), "path": "crdts.md", "at": world.versions[-1]})
        status, _, body = served.request("POST", "/m/research/do/restore",
                                         {"Cookie": served.cookie, "Origin": served.origin}, form)
        assert status == 200 and "pushed" in body, body
        assert len(git_out(hub, "show", "memory/research:crdts.md")) == 7285
        status, body = served.get("/m/research")
        assert body.count('<tr class="') == len(world.versions) + 1, "the page shows the version it made"
        status, body = served.get("/")
        assert 'href="/m/research/proposals">1</a>' in body, "the hub's open proposal, counted over git://"
        status, body = served.get("/m/research/proposals")
        assert status == 200 and body.count("/m/research/proposals/2026") == 1
    finally:
        served.stop()


@pytest.mark.slow
def test_a_gathered_conflict_is_listed_and_restored_as_the_cli_would(tmp_path: Path, world: World,
                                                                     cli: Cli) -> None:
    """The conflicts view lists a gathered file's losing version; restoring it through the page
    leaves the version `memsync restore PATH --conflict ID` leaves on a twin hub."""
    from datetime import datetime, timezone

    from memsync.checks import gathered
    from memsync.history.conflicts import blob_id

    lost = b"# Summary\n\nthe other writer's line\n"
    loser = gathered.Loser("summary.md", lost, blob_id(lost), "r-other", None,
                           datetime(2026, 11, 27, 12, 0, tzinfo=timezone.utc))
    mine = tmp_path / "mine"
    assert cli("clone", "research", str(mine)).code == 0
    (mine / "summary.conflicts.md").write_bytes(gathered.add(None, [loser]))
    assert cli("push", cwd=mine).code == 0
    twin = tmp_path / "twin.git"
    shutil.copytree(world.hub, twin, symlinks=True)
    served = Served()
    try:
        status, body = served.get("/m/research/conflicts")
        assert status == 200 and "summary.conflicts.md" in body and loser.id in body
        status, page = served.get(f"/m/research/do/restore-conflict?path=summary.md&id={loser.id}")
        csrf = re.search(r'name="csrf" value="([0-9a-f]{64})"', page)
        assert status == 200 and csrf is not None and f"--conflict {loser.id}" in page
        form = urlencode({"csrf": csrf.group(1), "path": "summary.md", "id": loser.id})
        status, _, body = served.request("POST", "/m/research/do/restore-conflict",
                                         {"Cookie": served.cookie, "Origin": served.origin}, form)
        assert status == 200 and "New version" in body, body
    finally:
        served.stop()
    assert cli("clone", "research", str(tmp_path / "other"), "--remote", str(twin)).code == 0
    assert cli("restore", "summary.md", "--conflict", loser.id, cwd=tmp_path / "other").code == 0
    page_made, cli_made = _tip(world.hub), _tip(twin)
    assert git_out(world.hub, "show", f"{page_made}:summary.md").encode() == lost
    tree = "{}^{{tree}}"
    assert git_out(world.hub, "rev-parse", tree.format(page_made)) == git_out(twin, "rev-parse", tree.format(cli_made))
    assert _record(world.hub, page_made) == _record(twin, cli_made)
