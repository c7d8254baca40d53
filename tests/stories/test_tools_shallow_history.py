"""History reads through the MCP tools on a shallow memory (cloned from a network hub: newest
version only), in every order: none may answer from the cut-off history. The seed-004 failure
was an agent told its notes did not exist; `search` after `log` once answered "no matches"."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.server.mcpserver.exceptions import ToolError

from memsync.integrations.mcp_server import Memories, MemoryServer, build
from memsync.run.mounts import Mount
from tests.conftest import Cli, git, write

pytestmark = pytest.mark.server

READS = ("log", "diff", "search", "restore")


def call(server: MemoryServer, name: str, **arguments: Any) -> str:
    async def main() -> str:
        result = await server.call_tool(name, arguments)
        return "".join(getattr(c, "text", "") for c in getattr(result, "content", []))
    return anyio.run(main)


@pytest.fixture
def first_version(daemon_hub: Path, cli: Cli, tmp_path: Path) -> str:
    """`research` on the daemon's hub in 4 versions; notes.md holds "early-line" in the first only."""
    src = tmp_path / "src"
    src.mkdir()
    assert cli("init", "--name", "research", cwd=src).code == 0
    for n, text in enumerate(["early-line\n", "second\n", "third\n", "fourth\n"], 1):
        write(src, "notes.md", text)
        write(src, f"f{n}.md", f"{n}\n")
        assert cli("push", "-m", f"version {n}", cwd=src).code == 0
    return git("rev-list", "--max-parents=0", "HEAD", cwd=src).strip()


def check(server: MemoryServer, read: str, first: str) -> None:
    if read == "log":
        text = call(server, "log", limit=20)
        assert len(text.splitlines()) >= 4 and first[:8] in text, text
    elif read == "diff":
        text = call(server, "diff", rev=first[:8])
        assert "+early-line" in text, text
    elif read == "search":
        text = call(server, "search", pattern="early-line", history=True)
        assert text != "no matches" and "notes.md" in text, text
    else:
        text = call(server, "restore", path="notes.md", at=first[:8])
        assert "restored notes.md" in text or "already as it was" in text, text


@pytest.mark.parametrize(("before", "after"), list(itertools.product(READS, READS)))
def test_every_history_read_on_a_shallow_memory_in_every_order(first_version: str, tmp_path: Path,
                                                                before: str, after: str) -> None:
    root = tmp_path / "agent" / "research"
    memories = Memories([Mount("research", root, False)], remote=None, run_id="shallow-run", offline=False,
                        checkpoint_writes=0, checkpoint_seconds=0)
    memories.open()
    try:
        assert (root / ".git" / "shallow").exists()  # the premise: a clone of the newest version only
        server = build(memories)
        check(server, before, first_version)
        check(server, after, first_version)
    finally:
        memories.close()


def test_a_search_refused_over_budget_never_reads_as_no_matches(first_version: str, tmp_path: Path) -> None:
    root = tmp_path / "agent" / "research"
    memories = Memories([Mount("research", root, False)], remote=None, run_id="shallow-run", offline=False,
                        checkpoint_writes=0, checkpoint_seconds=0)
    memories.open()
    try:
        server = build(memories)
        write(root, "slow.md", "a" * 41 + "!\n")
        with pytest.raises(ToolError) as info:
            call(server, "search", pattern="(a|aa)+$", history=True)
        assert "search stopped after" in str(info.value) and "no matches" not in str(info.value)
    finally:
        memories.close()
