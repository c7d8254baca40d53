"""A session's writes made a proposal (`memsync mcp --propose`, the memory tool's `propose=True`):
the versions land on `proposals/research/<run-id>` on the hub, the memory's branch never moves,
the directory is back on the memory's version when the session ends, and neither surface offers a
way to accept or reject."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from memsync.integrations.mcp_server import Memories, build
from memsync.run.mounts import Mount
from tests.attacks.test_security_tools import mcp_call
from tests.conftest import Cli, git, hub_path, hub_tree
from tests.unit.integrations.test_claude import call, tool
from tests.unit.integrations.test_mcp_server import _tools

REVIEW_VERBS = ("accept", "reject", "review", "proposals", "consolidate")


def _hub_rev(ref: str) -> str:
    found = subprocess.run(["git", "rev-parse", "--verify", "-q", ref], cwd=hub_path(), capture_output=True, text=True)
    return found.stdout.strip()


def test_an_mcp_session_proposes_and_cannot_accept(memory: Path) -> None:
    before = _hub_rev("memory/research")
    memories = Memories([Mount("research", memory, False)], remote=None, run_id="mcp-prop-1", offline=False,
                        checkpoint_writes=1, checkpoint_seconds=0, propose=True)
    memories.open()
    try:
        server = build(memories)
        assert not set(_tools(memories)) & set(REVIEW_VERBS), "an agent cannot close its own proposal"
        err, text, _ = mcp_call(server, "accept", id="mcp-prop-1")
        assert err and "accept" in text
        err, _, _ = mcp_call(server, "str_replace", path="summary.md", old_str="first line", new_str="second line")
        assert not err
        err, _, _ = mcp_call(server, "create", path="new.md", file_text="proposed\n")
        assert not err
        checkpointed = _hub_rev("proposals/research/mcp-prop-1")
        assert checkpointed, "a checkpoint reaches the proposal's branch on the hub"
    finally:
        reports = memories.close()
    assert reports[0].proposal == "mcp-prop-1" and reports[0].pushed
    assert _hub_rev("memory/research") == before, "the memory did not move"
    proposed = hub_tree("proposals/research/mcp-prop-1")
    assert proposed["summary.md"] == b"# Summary\n\nsecond line\n" and proposed["new.md"] == b"proposed\n"
    assert _hub_rev("proposals/research/mcp-prop-1~2") == before, "based on the pulled one"
    assert git("symbolic-ref", "HEAD", cwd=memory).strip() == "refs/heads/memory/research"
    assert (memory / "summary.md").read_text() == "# Summary\n\nfirst line\n" and not (memory / "new.md").exists()
    trailers = git("log", "-1", "--format=%(trailers)", "proposals/research/mcp-prop-1", cwd=hub_path())
    assert "Memsync-Run-Id: mcp-prop-1" in trailers


@pytest.mark.parametrize("writes", [True, False])
def test_the_memory_tool_proposes(memory: Path, writes: bool) -> None:
    before = _hub_rev("memory/research")
    t = tool(memory, propose=True, run_id="tool-prop-1").open()
    assert not any(hasattr(t, verb) for verb in ("accept", "reject")), "no way to close a proposal"
    if writes:
        assert "created" in call(t, command="create", path="/memories/idea.md", file_text="an idea\n").lower()
    report = t.close()
    assert report is not None and report.pushed
    assert _hub_rev("memory/research") == before
    assert git("symbolic-ref", "HEAD", cwd=memory).strip() == "refs/heads/memory/research"
    assert not (memory / "idea.md").exists()
    if writes:
        assert report.proposal == "tool-prop-1"
        assert hub_tree("proposals/research/tool-prop-1")["idea.md"] == b"an idea\n"
    else:
        assert report.proposal is None and not _hub_rev("proposals/research/tool-prop-1"), "no empty proposal"
        assert git("branch", "--list", "proposals/*", cwd=memory) == ""


def test_mcp_takes_propose_and_still_needs_a_memory(cli: Cli) -> None:
    r = cli("mcp", "--propose")
    assert r.code == 2 and "name the memories" in r.err
