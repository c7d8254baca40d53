"""The page's proposals over plain HTTP: the list and a review show the right rows, accepting
through the page leaves the version `memsync accept` leaves on a twin hub, rejecting closes it,
and the new forms hold the gate's refusals (Origin, CSRF token, read-only)."""

from __future__ import annotations

import html
import re
import shutil
import subprocess
from pathlib import Path
from urllib.parse import quote, urlencode

import pytest

from tests.conftest import Cli
from tests.ui.conftest import HOSTILE_NAME, PROPOSAL, Served, World, git_out

pytestmark = [pytest.mark.server]
BRANCH = f"proposals/research/{PROPOSAL}"
CLOSED = f"refs/memsync/proposals/research/{PROPOSAL}"


def _rev(hub: Path, ref: str) -> str:
    return subprocess.run(["git", "rev-parse", "--verify", "-q", ref], cwd=hub, capture_output=True,
                          text=True).stdout.strip()


def _csrf(page: str) -> str:
    found = re.search(r'name="csrf" value="([0-9a-f]{64})"', page)
    assert found is not None, page
    return found.group(1)


def _post(served: Served, path: str, fields: dict[str, str], origin: str | None) -> tuple[int, str]:
    headers = {"Cookie": served.cookie} | ({"Origin": origin} if origin is not None else {})
    status, _, body = served.request("POST", path, headers, urlencode(fields))
    return status, body


def test_the_list_and_the_review_show_the_proposal(served: Served, world: World) -> None:
    status, body = served.get("/")
    assert status == 200 and 'href="/m/research/proposals">1</a>' in body, "one open proposal counted"
    status, body = served.get("/m/research/proposals")
    assert status == 200
    rows = re.findall(r"<tr class=\"[^\"]*\">(.*?)</tr>", body, re.S)
    assert len(rows) == 1 and PROPOSAL in rows[0] and world.versions[0][:8] in rows[0]
    cells = [html.unescape(re.sub(r"<[^>]+>", "", c)).strip() for c in re.findall(r"<td>(.*?)</td>", rows[0], re.S)]
    assert cells[1] == "open" and cells[5] == "2" and cells[6] == "+2 -1" and cells[8] == "no", cells
    assert served.get("/m/research/proposals?all=1")[1].count(PROPOSAL) >= 1
    status, body = served.get(f"/m/research/proposals/{PROPOSAL}")
    assert status == 200, body
    assert body.index('id="flags"') < body.index('class="patch"'), "flags first, then the diff"
    assert html.escape(HOSTILE_NAME) in body and "&lt;script&gt;alert(7)&lt;/script&gt;" in body
    assert "<script" not in body and "<img" not in body
    patches = re.findall(r'<section class="patch">.*?</section>', body, re.S)
    assert len(patches) == 2 and "summary.md" in patches[1] and "+rewritten" in patches[1]
    forgotten = body[body.index('id="forgotten"'):]
    assert "summary.md" in forgotten and "- first line" in forgotten
    assert f"/m/research/proposals/{PROPOSAL}/accept" in body
    assert served.get("/m/research/proposals/no-such-run")[0] == 404
    assert served.get("/m/research/proposals/a..b")[0] == 404


@pytest.mark.attack
def test_the_proposal_forms_refuse_a_foreign_origin_a_bad_token_and_read_only(served: Served, world: World) -> None:
    status, page = served.get(f"/m/research/proposals/{PROPOSAL}/reject")
    assert status == 200 and f"memsync reject {PROPOSAL}" in page
    csrf = _csrf(page)
    tip = _rev(world.hub, BRANCH)
    for kind in ("accept", "reject"):
        path = f"/m/research/proposals/{PROPOSAL}/{kind}"
        assert _post(served, path, {"csrf": csrf}, "http://evil.example")[0] == 403
        assert _post(served, path, {"csrf": csrf}, None)[0] == 403
        assert _post(served, path, {"csrf": "0" * 64}, served.origin)[0] == 403
        assert _post(served, path, {}, served.origin)[0] == 403
    assert _rev(world.hub, BRANCH) == tip and not _rev(world.hub, CLOSED)
    assert _rev(world.hub, "memory/research") == world.versions[0]
    ro = Served(read_only=True)
    try:
        status, body = ro.get(f"/m/research/proposals/{PROPOSAL}")
        assert status == 200 and "/accept" not in body and "/reject" not in body
        assert ro.get(f"/m/research/proposals/{PROPOSAL}/accept")[0] in (404, 405)
        assert _post(ro, f"/m/research/proposals/{PROPOSAL}/accept", {"csrf": csrf}, ro.origin)[0] in (404, 405)
    finally:
        ro.stop()
    assert _rev(world.hub, BRANCH) == tip


@pytest.mark.slow
def test_accepting_through_the_page_leaves_the_clis_version(tmp_path: Path, served: Served, world: World,
                                                            cli: Cli) -> None:
    twin = tmp_path / "twin.git"
    shutil.copytree(world.hub, twin, symlinks=True)
    status, page = served.get(f"/m/research/proposals/{PROPOSAL}/accept")
    assert status == 200 and f"memsync accept {PROPOSAL}" in page
    status, body = _post(served, f"/m/research/proposals/{PROPOSAL}/accept", {"csrf": _csrf(page)}, served.origin)
    assert status == 200 and "New version" in body, body
    assert cli("clone", "research", str(tmp_path / "mine"), "--remote", str(twin)).code == 0
    r = cli("accept", PROPOSAL, cwd=tmp_path / "mine")
    assert r.code == 0, r.err
    page_made, cli_made = _rev(world.hub, "memory/research"), _rev(twin, "memory/research")
    assert page_made not in world.versions and cli_made not in world.versions
    for what in ("%T", "%P", "%an <%ae>", "%B"):
        assert git_out(world.hub, "log", "-1", f"--format={what}", page_made) == \
            git_out(twin, "log", "-1", f"--format={what}", cli_made), what
    trailers = git_out(world.hub, "log", "-1", "--format=%(trailers)", page_made)
    assert f"Memsync-Accepted-Proposal: {PROPOSAL}" in trailers and f"Memsync-Run-Id: {PROPOSAL}" in trailers
    assert git_out(world.hub, "show", f"{page_made}:summary.md") == "# Summary\n\nrewritten\n"
    assert _rev(world.hub, CLOSED) and not _rev(world.hub, BRANCH), "closed on the hub, as the CLI closes it"
    status, body = served.get("/m/research/proposals")
    assert status == 200 and PROPOSAL not in body and "No open proposals" in body
    assert "accepted" in served.get("/m/research/proposals?all=1")[1]


def test_rejecting_through_the_page_closes_it_with_its_reason(served: Served, world: World) -> None:
    status, page = served.get(f"/m/research/proposals/{quote(PROPOSAL)}/reject")
    reason = "<script>alert(5)</script> not now"
    status, body = _post(served, f"/m/research/proposals/{PROPOSAL}/reject", {"csrf": _csrf(page), "reason": reason},
                         served.origin)
    assert status == 200 and "Rejected proposal" in body and "<script>alert(5)" not in body, body
    assert _rev(world.hub, CLOSED) and not _rev(world.hub, BRANCH)
    assert _rev(world.hub, "memory/research") == world.versions[0], "the memory did not move"
    assert "rejected" in git_out(world.hub, "log", "-1", "--format=%B", CLOSED)
    status, body = served.get(f"/m/research/proposals/{PROPOSAL}")
    assert status == 200 and "&lt;script&gt;alert(5)&lt;/script&gt; not now" in body and "accept after all" in body
