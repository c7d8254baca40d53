"""Proposals over `git daemon`, accepted through `memsync serve`, and a proposal run killed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import Cli, git, hub_path, hub_tree, write
from tests.proposals.conftest import agent, propose
from tests.servers.test_serve import CLIENT_MODULES, client_imports, server  # noqa: F401  (the fixture)
from tests.stories.test_transports import Hub, _start


@pytest.fixture(params=["http", "ssh"])
def other_hub(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Hub:
    """Smart HTTP (token auth) and SSH (host key checked): the other network transports."""
    h = _start(request.param, request, tmp_path)
    monkeypatch.setenv("MEMSYNC_REMOTE", h.url or "")
    for key, value in h.env.items():
        monkeypatch.setenv(key, value)
    return h


@pytest.mark.server
def test_proposals_over_http_and_ssh(other_hub: Hub, cli: Cli, tmp_path: Path) -> None:
    root = tmp_path / "research"
    root.mkdir()
    assert cli("init", cwd=root).code == 0
    write(root, "summary.md", "# Summary\n")
    assert cli("push", cwd=root).code == 0
    propose(cli, root, "n1", "open('summary.md','a').write('net\\n')")
    propose(cli, root, "n2", "open('x.md','w').write('x\\n')")
    assert cli("reject", "n2", cwd=root).code == 0
    assert cli("accept", "n1", cwd=root).code == 0
    assert other_hub.tree()["summary.md"] == "# Summary\nnet\n"
    refs = git("for-each-ref", "--format=%(refname)", cwd=other_hub.bare).split()
    assert "refs/memsync/proposals/research/n2" in refs and not any("heads/proposals" in r for r in refs)


@pytest.mark.server
def test_propose_review_accept_reject_over_git_daemon(daemon_memory: Path, daemon_hub: Path, cli: Cli) -> None:
    propose(cli, daemon_memory, "d1", "open('summary.md','a').write('over the wire\\n')")
    propose(cli, daemon_memory, "d2", "open('other.md','w').write('no\\n')")
    assert git("rev-parse", "proposals/research/d1", cwd=daemon_hub).strip()
    listed = json.loads(cli("proposals", "--json", cwd=daemon_memory).out)
    assert [(p["id"], p["files"]) for p in listed] == [("d1", ["summary.md"]), ("d2", ["other.md"])]
    assert "+over the wire" in cli("review", "d1", cwd=daemon_memory).out
    assert cli("accept", "d1", cwd=daemon_memory).code == 0
    assert cli("reject", "d2", "--reason", "later", cwd=daemon_memory).code == 0
    assert hub_tree(hub=daemon_hub)["summary.md"] == b"# Summary\nover the wire\n"
    refs = git("for-each-ref", "--format=%(refname)", cwd=daemon_hub).split()
    assert "refs/memsync/proposals/research/d2" in refs and not any("refs/heads/proposals" in r for r in refs)
    states = {p["id"]: p["state"] for p in json.loads(cli("proposals", "--all", "--json", cwd=daemon_memory).out)}
    assert states == {"d1": "accepted", "d2": "rejected"}


@pytest.mark.server
@pytest.mark.attack
def test_proposals_count_against_a_network_hubs_ref_cap(daemon_memory: Path, cli: Cli,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    propose(cli, daemon_memory, "c1", "open('a.md','w').write('a\\n')")
    propose(cli, daemon_memory, "c2", "open('b.md','w').write('b\\n')")
    monkeypatch.setenv("MEMSYNC_MAX_REFS", "2")  # the memory's branch and two proposals: three refs
    refused = cli("proposals", cwd=daemon_memory)
    assert refused.code == 4 and "MEMSYNC_MAX_REFS" in refused.err + refused.out


@pytest.mark.server
def test_accepting_through_serve(research: Path, cli: Cli, server) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    propose(cli, research, "served", "open('summary.md','a').write('accepted by a worker\\n')")
    imported = client_imports(["accept", "served"], research, server.env())
    assert imported <= CLIENT_MODULES, sorted(imported - CLIENT_MODULES)  # the work was the server's
    assert hub_tree()["summary.md"].endswith(b"accepted by a worker\n")
    trailers = git("log", "-1", "--format=%(trailers)", "memory/research", cwd=hub_path())
    assert "Memsync-Accepted-Proposal: served" in trailers


@pytest.mark.slow
def test_a_killed_proposal_run_keeps_its_checkpoints_on_the_proposal(research: Path, tmp_path: Path) -> None:
    go = tmp_path / "go"
    script = ("import time; open('notes/kept.md','w').write('checkpointed\\n'); "
              f"[time.sleep(0.1) for _ in iter(lambda: os.path.exists({str(go)!r}), True)]")
    proc = subprocess.Popen([sys.executable, "-m", "memsync", "run", "--propose", "--checkpoint", "1",
                             "--run-id", "killed", "--", *agent(script)], cwd=research, env=dict(os.environ,
                            MEMSYNC_QUIET="0.2", MEMSYNC_SETTLE="0.1"), stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 90
    branch = "refs/heads/proposals/research/killed"
    while time.monotonic() < deadline and (branch not in git("for-each-ref", cwd=hub_path()) or "notes/kept.md" not in
                                           git("ls-tree", "-r", "--name-only", branch, cwd=hub_path())):
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        time.sleep(0.2)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    go.write_text("")
    assert hub_tree("proposals/research/killed")["notes/kept.md"] == b"checkpointed\n"
    assert "notes/kept.md" not in hub_tree()  # never on the memory
    local = git("for-each-ref", "--format=%(refname) %(objectname)", "refs/heads/memory/research", cwd=research)
    assert local.split()[1] == git("rev-parse", "memory/research", cwd=hub_path()).strip()
    blocked = subprocess.run([sys.executable, "-m", "memsync", "push"], cwd=research, capture_output=True, text=True,
                             timeout=60)
    assert blocked.returncode == 7 and "git switch memory/research" in blocked.stderr
    (research / "notes" / "late.md").write_text("written after the last checkpoint\n")
    again = subprocess.run([sys.executable, "-m", "memsync", "run", "--checkpoint", "0", "--", sys.executable, "-c",
                            "pass"], cwd=research, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    assert "proposal killed" in again.stderr  # the next run recovers the directory by itself
    proposed = hub_tree("proposals/research/killed")
    assert proposed["notes/kept.md"] == b"checkpointed\n" and proposed["notes/late.md"].startswith(b"written")
    assert "notes/kept.md" not in hub_tree() and "notes/late.md" not in hub_tree()
    assert git("symbolic-ref", "HEAD", cwd=research).strip() == "refs/heads/memory/research"
