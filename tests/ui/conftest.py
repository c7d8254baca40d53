"""The page's fixtures: one memory with a history worth showing (built once per session by real
`memsync` commands, then copied into each test's own MEMSYNC_HOME), the page served in a thread,
a plain HTTP client, and one headless chromium per module."""

from __future__ import annotations

import http.client
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import write

RUN1, RUN2 = "20261127T101500Z-ui0001", "20261127T111500Z-ui0002"
PROPOSAL = "20261127T121500Z-ui0003"  # a run --propose: rewrites summary.md, appends to the hostile file
HOSTILE_NAME = "<img src=x onerror=alert(1)>.md"
HOSTILE_TEXT = "# notes\n\n[click me](javascript:alert(3))\n\n<script>alert(4)</script>\n"
HOSTILE_SUBJECT = "Seed the notes <script>alert(2)</script>"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]

pytest.importorskip("starlette", reason="the page needs memsync[ui]")


def notes(size: int, topic: str) -> bytes:
    lines = [f"# Notes on {topic}\n"]
    n = 0
    while sum(map(len, lines)) < size:
        n += 1
        lines.append(f"- finding {n} about {topic}: state-based merge, causal delivery, tombstones\n")
    return "".join(lines).encode()[:size - 1] + b"\n"


def _env(base: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "MEMSYNC_", "XDG_"))}
    home = base / "home"
    home.mkdir(exist_ok=True)
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"), XDG_DATA_HOME=str(home / ".local/share"),
               MEMSYNC_HOME=str(base / "memsync-home"), GIT_CONFIG_NOSYSTEM="1",
               GIT_CONFIG_GLOBAL=str(home / ".gitconfig"), GIT_AUTO_GC="0")
    return env


def _memsync(env: dict[str, str], cwd: Path, *args: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "memsync", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, f"memsync {args}: {proc.stderr}"


@pytest.fixture(scope="session")
def world_hub(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The hub of memory `research`: an operator's version with a `<script>` in its message, a run
    that writes a file named like an HTML tag holding a javascript: link, a run that shrinks
    crdts.md (flagged), and an open proposal (PROPOSAL) that rewrites summary.md and appends a
    `<script>` line to the file named like a tag."""
    base = tmp_path_factory.mktemp("ui-world")
    env = _env(base)
    mem = base / "research"
    mem.mkdir()
    _memsync(env, mem, "init")
    write(mem, "crdts.md", notes(7285, "CRDTs"))
    write(mem, "summary.md", "# Summary\n\nfirst line\n")
    _memsync(env, mem, "push", "-m", HOSTILE_SUBJECT)
    write(base, "hostile.md", HOSTILE_TEXT)
    write(base, "damaged.md", notes(1509, "nothing found"))
    code = ("import shutil, sys; shutil.copy(sys.argv[1], sys.argv[2]); "
            "open('runs-note.md', 'a').write('ran\\n')")
    _memsync(env, mem, "run", "--run-id", RUN1, "--checkpoint", "0", "--", sys.executable, "-c", code,
             str(base / "hostile.md"), HOSTILE_NAME)
    _memsync(env, mem, "run", "--run-id", RUN2, "--checkpoint", "0", "--", sys.executable, "-c", code,
             str(base / "damaged.md"), "crdts.md")
    propose = ("import sys; open('summary.md', 'w').write('# Summary\\n\\nrewritten\\n'); "
               "open(sys.argv[1], 'a').write('<script>alert(7)</script>\\n')")
    _memsync(env, mem, "run", "--propose", "--run-id", PROPOSAL, "--checkpoint", "0", "--", sys.executable, "-c",
             propose, HOSTILE_NAME)
    return base / "memsync-home" / "hub.git"


@dataclass
class World:
    hub: Path  # this test's embedded hub, a copy of the session's
    versions: list[str]  # newest first


def git_out(where: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=where, check=True, capture_output=True, text=True).stdout


@pytest.fixture
def world(world_hub: Path) -> World:
    hub = Path(os.environ["MEMSYNC_HOME"]) / "hub.git"
    shutil.copytree(world_hub, hub, symlinks=True)
    versions = git_out(hub, "rev-list", "memory/research").split()
    return World(hub, versions)


class Served:
    """The page, served from a thread of this process for one test."""

    def __init__(self, remote: str | None = None, read_only: bool = False) -> None:
        from memsync.ui.server import Page

        self.page = Page(remote, None, 0, read_only)
        self.thread = threading.Thread(target=self.page.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.page.started():
            assert time.monotonic() < deadline, "the page did not start"
            time.sleep(0.02)
        self.port, self.token = self.page.port, self.page.token
        self.origin = f"http://127.0.0.1:{self.port}"
        self.cookie = f"memsync_ui_{self.port}={self.token}"

    def stop(self) -> None:
        self.page.stop()
        self.thread.join(30)
        assert not self.thread.is_alive()

    def request(self, method: str, path: str, headers: dict[str, str] | None = None,
                body: str | None = None) -> tuple[int, dict[str, str], str]:
        """One raw request (http.client sends exactly the headers given)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        try:
            sent = {"Host": f"127.0.0.1:{self.port}", **(headers or {})}
            if body is not None:
                sent.setdefault("Content-Type", "application/x-www-form-urlencoded")
            conn.request(method, path, body=body, headers=sent)
            r = conn.getresponse()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read().decode()
        finally:
            conn.close()

    def get(self, path: str) -> tuple[int, str]:
        status, _, body = self.request("GET", path, {"Cookie": self.cookie})
        return status, body


@pytest.fixture
def served(world: World) -> Iterator[Served]:
    s = Served()
    yield s
    s.stop()


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """One headless chromium (Debian's) per module, with a fresh profile; never downloaded."""
    if not Path(CHROMIUM).exists():
        pytest.skip("the browser tests need Debian's chromium (.ci/run installs it)")
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")), executable_path=CHROMIUM, headless=True,
            args=CHROMIUM_ARGS, viewport={"width": 1280, "height": 900})
        yield context
        context.close()
