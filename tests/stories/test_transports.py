"""Every storage verb on every transport: embedded hub (file), git://, smart HTTP with a token, SSH.

One parametrised suite: the `hub` fixture starts the real server for a transport, points
MEMSYNC_REMOTE at it and sets the credentials a user would set; the tests do not know which
transport they run on. Failure behaviour (refusal, restart mid-push) is checked on the network
transports, where a server can refuse or die.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import Cli, git, hub_path, memsync_cmd, write
from tests.helpers.servers import install_reject_hook, make_bare_hub

NETWORK = [pytest.param(kind, marks=pytest.mark.server) for kind in ("git", "http", "ssh")]  # each starts a server
TRANSPORTS = ["file", *NETWORK]
BRANCH = "memory/research"


@dataclass
class Hub:
    kind: str
    url: str | None  # None: the embedded hub
    bare: Path
    env: dict[str, str] = field(default_factory=dict)
    server: object | None = None

    def tree(self, branch: str = BRANCH) -> dict[str, str]:
        names = git("ls-tree", "-r", "--name-only", "-z", branch, cwd=self.bare).split("\0")
        return {n: git("show", f"{branch}:{n}", cwd=self.bare) for n in names if n}

    def head(self, branch: str = BRANCH) -> str:
        return git("rev-parse", branch, cwd=self.bare).strip()


def _start(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> Hub:
    if kind == "file":
        return Hub("file", None, hub_path())
    if kind == "git":
        daemon = request.getfixturevalue("git_daemon")
        bare = make_bare_hub(daemon.base_path / "hub.git")
        return Hub(kind, daemon.url("hub.git"), bare, server=daemon)
    if kind == "http":
        http = request.getfixturevalue("http_server")
        bare = make_bare_hub(http.project_root / "hub.git")
        return Hub(kind, http.url("hub.git"), bare, {"MEMSYNC_TOKEN": http.token, "MEMSYNC_USER": http.user}, http)
    ssh = request.getfixturevalue("ssh_server")
    bare = make_bare_hub(tmp_path / "ssh-hub.git")
    known = ssh.write_known_hosts(tmp_path / "known_hosts")
    env = {"MEMSYNC_SSH_KEY": str(ssh.client_key), "MEMSYNC_KNOWN_HOSTS": str(known)}
    return Hub(kind, ssh.url(bare), bare, env, ssh)


@pytest.fixture(params=TRANSPORTS)
def hub(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Hub]:
    h = _start(request.param, request, tmp_path)
    if h.url:
        monkeypatch.setenv("MEMSYNC_REMOTE", h.url)
    for key, value in h.env.items():
        monkeypatch.setenv(key, value)
    yield h


@pytest.fixture(params=NETWORK)
def net_hub(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Hub]:
    h = _start(request.param, request, tmp_path)
    monkeypatch.setenv("MEMSYNC_REMOTE", h.url or "")
    for key, value in h.env.items():
        monkeypatch.setenv(key, value)
    yield h


@pytest.fixture
def pushed(tmp_path: Path, cli: Cli, hub: Hub) -> Path:
    root = tmp_path / "research"
    root.mkdir()
    r = cli("init", cwd=root)
    assert r.code == 0, r.err
    write(root, "summary.md", "# Summary\n\nfirst line\n")
    write(root, "runs/first.md", "first run\n")
    r = cli("push", cwd=root)
    assert r.code == 0, r.err
    return root


def test_init_push_stores_the_memory_on_the_hub(pushed: Path, hub: Hub) -> None:
    assert hub.tree() == {"summary.md": "# Summary\n\nfirst line\n", "runs/first.md": "first run\n"}
    assert hub.head() == git("rev-parse", "HEAD", cwd=pushed).strip()
    stored = (pushed / ".vm0" / "storage.yaml").read_text()
    assert "name: research" in stored and f"remote: {hub.url or hub.bare}" in stored  # the hub it was first pushed to


def test_clone_edit_push_then_pull(pushed: Path, hub: Hub, cli: Cli, tmp_path: Path) -> None:
    r = cli("clone", "research", str(tmp_path / "laptop"), cwd=tmp_path)
    assert r.code == 0, r.err
    laptop = tmp_path / "laptop"
    assert (laptop / "summary.md").read_text() == "# Summary\n\nfirst line\n"
    write(laptop, "summary.md", "# Summary\n\nfirst line\nedited on the laptop\n")
    assert cli("push", "-m", "laptop edit", cwd=laptop).code == 0
    assert hub.tree()["summary.md"].endswith("edited on the laptop\n")
    r = cli("pull", cwd=pushed)
    assert r.code == 0, r.err
    assert (pushed / "summary.md").read_text().endswith("edited on the laptop\n")
    assert git("rev-parse", "HEAD", cwd=pushed).strip() == hub.head()


def test_diverged_pushes_keep_both_edits(pushed: Path, hub: Hub, cli: Cli, tmp_path: Path) -> None:
    assert cli("clone", "research", str(tmp_path / "other"), cwd=tmp_path).code == 0
    other = tmp_path / "other"
    write(other, "runs/other.md", "from the other sandbox\n")
    assert cli("push", cwd=other).code == 0
    write(pushed, "runs/mine.md", "from this sandbox\n")
    r = cli("push", cwd=pushed)
    assert r.code == 0, r.err
    tree = hub.tree()
    assert tree["runs/other.md"] == "from the other sandbox\n"
    assert tree["runs/mine.md"] == "from this sandbox\n"


def test_pull_by_name_outside_a_memory(pushed: Path, hub: Hub, cli: Cli, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    r = cli("pull", "research", cwd=elsewhere)
    assert r.code == 0, r.err
    assert (elsewhere / "research" / "runs" / "first.md").read_text() == "first run\n"


def test_status_shows_the_remote_version(pushed: Path, hub: Hub, cli: Cli) -> None:
    write(pushed, "draft.md", "not pushed yet\n")
    r = cli("status", "--json", cwd=pushed)
    assert r.code == 0, r.err
    data = json.loads(r.out)
    text = json.dumps(data)
    assert hub.head()[:8] in text
    assert "draft.md" in text
    assert data.get("remote_error") in (None, "")


def test_list_shows_every_memory(pushed: Path, hub: Hub, cli: Cli, tmp_path: Path) -> None:
    second = tmp_path / "notes-two"
    second.mkdir()
    assert cli("init", cwd=second).code == 0
    write(second, "a.md", "a\n")
    assert cli("push", cwd=second).code == 0
    r = cli("list", "--json", cwd=tmp_path)
    assert r.code == 0, r.err
    names = {m["name"] for m in json.loads(r.out)["memories"]}
    assert names == {"research", "notes-two"}
    r = cli("list", cwd=tmp_path)
    assert r.code == 0 and "research" in r.out and "notes-two" in r.out


AGENT = """\
import os, pathlib
mem = pathlib.Path(os.environ["MEMSYNC_MEMORY_DIR"])
rid = os.environ["MEMSYNC_RUN_ID"]
(mem / "runs" / f"{rid}.md").write_text(f"notes of {rid}\\n")
"""


def test_run_pulls_commits_and_pushes(pushed: Path, hub: Hub, tmp_path: Path) -> None:
    agent = tmp_path / "agent.py"
    agent.write_text(AGENT)
    sandbox = tmp_path / "sandbox"
    sandbox.mkdir()
    proc = memsync_cmd("run", "--memory", "research:mem", "--run-id", "r-transport", "--",
                       sys.executable, str(agent), cwd=sandbox, timeout=60)
    assert proc.returncode == 0, proc.stderr
    tree = hub.tree()
    assert tree["runs/r-transport.md"] == "notes of r-transport\n"
    assert tree["runs/first.md"] == "first run\n"
    body = git("log", "-1", "--format=%B", BRANCH, cwd=hub.bare)
    assert "Memsync-Run-Id: r-transport" in body


# -- failures that need a real server ---------------------------------------------------------


def test_push_refused_by_a_hook_stays_local(net_hub: Hub, cli: Cli, tmp_path: Path) -> None:
    root = tmp_path / "research"
    root.mkdir()
    assert cli("init", cwd=root).code == 0
    write(root, "a.md", "a\n")
    assert cli("push", cwd=root).code == 0
    install_reject_hook(net_hub.bare, "memory/research is protected by policy 42")
    before = net_hub.head()
    write(root, "b.md", "b\n")
    r = cli("push", cwd=root)
    assert r.code == 5, (r.code, r.err)
    assert "refused" in r.err and "protected by policy 42" in r.err
    assert net_hub.head() == before
    local = git("rev-parse", "HEAD", cwd=root).strip()
    assert local != before and git("show", "HEAD:b.md", cwd=root) == "b\n"


SLOW_HOOK = """#!/bin/sh
cat >/dev/null
touch {marker}
sleep 30
exit 0
"""


def test_server_restarted_mid_push_then_next_push_recovers(net_hub: Hub, cli: Cli, tmp_path: Path) -> None:
    root = tmp_path / "research"
    root.mkdir()
    assert cli("init", cwd=root).code == 0
    write(root, "a.md", "a\n")
    assert cli("push", cwd=root).code == 0
    marker = tmp_path / "hook-started"
    hook = net_hub.bare / "hooks" / "pre-receive"
    hook.write_text(SLOW_HOOK.format(marker=marker))
    hook.chmod(0o755)
    write(root, "b.md", "b, pushed while the server restarts\n")
    env = dict(os.environ, MEMSYNC_IO_TIMEOUT="5")
    started = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "memsync", "push"], cwd=root, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 20
        while not marker.exists():
            assert time.monotonic() < deadline and proc.poll() is None, "the push never reached the hook"
            time.sleep(0.05)
        hook.unlink()
        net_hub.server.restart()  # type: ignore[attr-defined]
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    # Either the push's own retry delivered it once the server was back, or it failed cleanly.
    assert proc.returncode in (0, 4), err
    assert "Traceback" not in err
    assert time.monotonic() - started < 45
    assert git("show", "HEAD:b.md", cwd=root) == "b, pushed while the server restarts\n"
    r = cli("push", cwd=root)
    assert r.code == 0, r.err
    assert net_hub.tree()["b.md"] == "b, pushed while the server restarts\n"
    assert net_hub.head() == git("rev-parse", "HEAD", cwd=root).strip()
