"""The page in a real browser (Debian's chromium, headless, driven by Playwright): the timeline's
rows, a version's diff, a restore through the forms that leaves the CLI's version, hostile
names, messages and markdown that run nothing, and a hostile proposal reviewed and rejected
through the page. UI_SCREENSHOTS=DIR saves the main views."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from tests.conftest import Cli
from tests.ui.conftest import HOSTILE_NAME, HOSTILE_SUBJECT, PROPOSAL, RUN1, RUN2, Served, World, git_out

pytestmark = [pytest.mark.slow, pytest.mark.server]

# Installed before any page script could run: counts DOM changes after load, and what reaches
# the console (a script that ran, or a CSP refusal of one the page tried to load).
WATCH = """
window.__mutations = 0;
document.addEventListener('DOMContentLoaded', () => {
  new MutationObserver((m) => { window.__mutations += m.length; })
    .observe(document, {subtree: true, childList: true, attributes: true, characterData: true});
});
"""


@pytest.fixture
def tab(browser: Any, served: Served) -> Iterator[Any]:
    page = browser.new_page()
    page.add_init_script(WATCH)
    page.goto(served.page.url)  # the token, once: then the cookie
    yield page
    page.close()


def _shot(page: Any, name: str) -> None:
    where = os.environ.get("UI_SCREENSHOTS")
    if where:
        page.screenshot(path=str(Path(where) / f"ui-{name}.png"), full_page=False)


def test_the_timeline_shows_one_row_per_version(tab: Any, served: Served, world: World) -> None:
    assert tab.url == served.origin + "/"
    assert tab.locator("#memories tbody tr").count() == 1
    assert RUN2 in tab.locator("#memories").inner_text()
    _shot(tab, "memories")
    tab.click("text=research")
    rows = tab.locator("#timeline tbody tr")
    rows.first.wait_for(timeout=60_000)  # a click does not wait for the next page's rows
    assert rows.count() == len(world.versions) == 3
    newest, middle, oldest = (rows.nth(i).inner_text() for i in range(3))
    assert f"run {RUN2}" in newest and "shrink crdts.md 7285->1509" in newest and world.versions[0][:8] in newest
    assert f"run {RUN1}" in middle and "shrink" not in middle
    assert "operator" in oldest and HOSTILE_SUBJECT in oldest
    assert tab.locator("svg.chart circle.shrink").count() == 1, "the flagged shrink is marked on the chart"
    tab.fill("input[name=file]", "crdts.md")
    tab.click("text=draw")
    line = tab.locator("svg.chart polyline.fsize")
    line.first.wait_for(timeout=60_000)  # the drawn page, not the one the click left
    assert line.count() == 1
    _shot(tab, "timeline")


def test_a_versions_page_shows_its_diff_and_record(tab: Any, served: Served, world: World) -> None:
    tab.goto(f"{served.origin}/m/research")
    tab.click(f"#timeline a:text('{world.versions[0][:8]}')")
    tab.wait_for_url(f"**/m/research/v/{world.versions[0]}", timeout=60_000)
    tab.locator("#record").wait_for(timeout=60_000)
    record = tab.locator("#record").inner_text()
    assert RUN2 in record and "Memsync-Exit-Code" in record
    patch = tab.locator("section.patch", has_text="crdts.md")
    assert patch.locator(".del").count() > 10 and patch.locator(".add").count() > 1
    assert "finding 1 about nothing found" in patch.locator(".add").all_inner_texts()[1]
    _shot(tab, "version")


def test_restoring_through_the_page_leaves_the_clis_version(tab: Any, served: Served, world: World,
                                                            tmp_path: Path, cli: Cli) -> None:
    twin = tmp_path / "twin.git"
    shutil.copytree(world.hub, twin, symlinks=True)
    tab.goto(f"{served.origin}/m/research/f/crdts.md")
    history = tab.locator("#history tbody tr")
    assert history.count() == 2 and "shrink crdts.md 7285->1509" in history.nth(0).inner_text()
    _shot(tab, "file")
    history.nth(1).locator("text=restore this").click()
    tab.locator("#confirm").wait_for(timeout=60_000)
    assert "memsync restore crdts.md --at" in tab.inner_text("main")
    tab.click("#confirm button")
    tab.locator("#result").wait_for(timeout=60_000)
    assert "New version" in tab.inner_text("main"), tab.inner_text("main")
    assert cli("clone", "research", str(tmp_path / "mine"), "--remote", str(twin)).code == 0
    r = cli("restore", "crdts.md", "--at", world.versions[-1][:8], cwd=tmp_path / "mine")
    assert r.code == 0, r.err
    page_made = git_out(world.hub, "rev-parse", "memory/research").strip()
    cli_made = git_out(twin, "rev-parse", "memory/research").strip()
    for what in ("%T", "%P", "%an <%ae>", "%B"):
        assert git_out(world.hub, "log", "-1", f"--format={what}", page_made) == \
            git_out(twin, "log", "-1", f"--format={what}", cli_made), what
    assert len(git_out(world.hub, "show", f"{page_made}:crdts.md")) == 7285


@pytest.mark.attack
def test_hostile_names_messages_and_markdown_run_nothing(tab: Any, served: Served, world: World) -> None:
    dialogs: list[str] = []
    console: list[str] = []
    def dialog(d: Any) -> None:
        dialogs.append(d.message)
        d.dismiss()

    tab.on("dialog", dialog)
    tab.on("console", lambda m: console.append(m.text))
    hostile = quote(HOSTILE_NAME)
    pages = ["/m/research", f"/m/research/v/{world.versions[1]}", f"/m/research/v/{world.versions[2]}",
             f"/m/research/f/{hostile}", f"/m/research/f/{hostile}?at={world.versions[0]}",
             f"/m/research/run/{RUN1}"]
    shown = {}
    for path in pages:
        tab.goto(served.origin + path)
        tab.wait_for_timeout(300)
        assert tab.evaluate("window.__mutations") == 0, path  # the observer is there, and saw nothing
        assert tab.locator("script, img, iframe, object, embed").count() == 0, path
        assert tab.locator("a[href^='javascript:' i]").count() == 0, path
        shown[path] = tab.inner_text("main")
    assert HOSTILE_SUBJECT in shown[pages[0]]
    assert HOSTILE_NAME in shown[pages[3]] and HOSTILE_NAME in shown[pages[5]]
    assert "[click me](javascript:alert(3))" in shown[pages[4]], "shown as text, never rendered"
    assert "<script>alert(4)</script>" in shown[pages[4]]
    assert dialogs == [] and console == []


@pytest.mark.attack
def test_a_hostile_proposal_is_reviewed_and_rejected_running_nothing(tab: Any, served: Served,
                                                                     world: World) -> None:
    """Its file is named like an <img> tag and gains a <script> line; the rejection's reason is a
    <script>: every page showing them runs nothing, and the hub holds the rejection."""
    dialogs: list[str] = []
    console: list[str] = []
    def dialog(d: Any) -> None:
        dialogs.append(d.message)
        d.dismiss()

    tab.on("dialog", dialog)
    tab.on("console", lambda m: console.append(m.text))
    tab.goto(served.origin + "/")
    assert tab.locator("#memories tbody tr td").nth(8).inner_text() == "1", "one open proposal"
    tab.goto(served.origin + "/m/research")
    tab.click("header >> text=proposals")
    rows = tab.locator("#proposals tbody tr")
    rows.first.wait_for(timeout=60_000)  # the list reads the working copy first (slow under load)
    assert rows.count() == 1 and PROPOSAL in rows.nth(0).inner_text()
    rows.nth(0).locator("a").first.click()
    tab.locator("#forgotten").wait_for(timeout=60_000)  # the review reads the working copy first
    assert tab.locator("section.patch").count() == 2
    assert HOSTILE_NAME in tab.locator("section.patch").nth(0).inner_text()
    assert "+<script>alert(7)</script>" in tab.locator("section.patch").nth(0).locator(".add").all_inner_texts()
    assert "first line" in tab.locator("#forgotten").inner_text()
    _shot(tab, "proposal")
    tab.click("#reject")
    tab.locator("#confirm").wait_for(timeout=60_000)
    assert f"memsync reject {PROPOSAL}" in tab.inner_text("main")
    tab.fill("input[name=reason]", "<script>alert(5)</script>")
    tab.click("#confirm button")
    tab.locator("#result").wait_for(timeout=60_000)
    assert "Rejected proposal" in tab.inner_text("main"), tab.inner_text("main")
    for path in (f"/m/research/proposals/{PROPOSAL}", "/m/research/proposals?all=1",
                 f"/m/research/proposals/{PROPOSAL}/accept"):
        tab.goto(served.origin + path)
        tab.wait_for_timeout(300)
        assert tab.evaluate("window.__mutations") == 0, path
        assert tab.locator("script, img, iframe, object, embed").count() == 0, path
    tab.goto(f"{served.origin}/m/research/proposals/{PROPOSAL}")
    assert "<script>alert(5)</script>" in tab.locator("#record").inner_text()
    assert dialogs == [] and console == []
    assert "rejected" in git_out(world.hub, "log", "-1", "--format=%B", f"refs/memsync/proposals/research/{PROPOSAL}")
    assert git_out(world.hub, "rev-parse", "memory/research").strip() == world.versions[0]
