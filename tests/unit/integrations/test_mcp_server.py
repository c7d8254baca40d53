"""The MCP server's protocol edges and limits: a line that is not JSON-RPC gets an error answer,
a read-only server offers only the read tools, a write tool says its writes reach a hub, results
are capped by estimated tokens (CJK text included) with a hint to page, and search pages through
a file of any size."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from memsync.integrations.budget import MAX_RESULT_TOKENS, tokens
from memsync.integrations.mcp_server import READ_TOOLS, WRITE_TOOLS, Memories, build
from memsync.run.mounts import Mount
from tests.attacks.test_security_tools import mcp_call
from tests.conftest import write


def _tools(memories: Memories) -> dict[str, object]:
    async def main() -> dict[str, object]:
        return {t.name: t.annotations for t in await build(memories).list_tools()}
    return anyio.run(main)


def _served(memory: Path, *, read_only: bool, offline: bool = False) -> Memories:
    memories = Memories([Mount("research", memory, read_only)], remote=None, run_id="limits-run", offline=offline,
                        checkpoint_writes=0, checkpoint_seconds=0)
    memories.open()
    return memories


def test_a_read_only_server_offers_only_the_read_tools(memory: Path) -> None:
    memories = _served(memory, read_only=True)
    try:
        assert set(_tools(memories)) == set(READ_TOOLS)
        err, text, _ = mcp_call(build(memories), "create", path="x.md", file_text="x")
        assert err and "create" in text  # not a tool of this server at all
    finally:
        memories.close()
    assert not (memory / "x.md").exists()


def test_write_tools_say_their_writes_reach_a_hub(memory: Path) -> None:
    memories = _served(memory, read_only=False)
    try:
        tools = _tools(memories)
    finally:
        memories.close()
    assert set(tools) == set(READ_TOOLS) | set(WRITE_TOOLS)
    for name in WRITE_TOOLS:
        assert getattr(tools[name], "open_world_hint", None) is True, name
    for name in READ_TOOLS:
        assert getattr(tools[name], "open_world_hint", None) is False, name
    offline = _served(memory, read_only=False, offline=True)
    try:  # offline: nothing leaves the machine
        assert all(getattr(_tools(offline)[n], "open_world_hint", None) is False for n in WRITE_TOOLS)
    finally:
        offline.close()


CJK = "".join(f"第{i:05d}行：状態ベースのCRDTは結合を必要とする。メモを残す。\n" for i in range(3_000))  # ~90k chars


def test_results_are_capped_by_estimated_tokens_cjk_included(memory: Path) -> None:
    write(memory, "notes-ja.md", CJK)
    memories = _served(memory, read_only=False)
    server = build(memories)
    try:
        err, text, _ = mcp_call(server, "view", path="notes-ja.md")
        assert not err and tokens(text) <= MAX_RESULT_TOKENS and len(text) < 25_000
        assert "第00000行" in text and "View the rest with view_range [" in text
        err, text, _ = mcp_call(server, "read", path="notes-ja.md")
        assert err and "read it in parts: offset=0 length=" in text
        length = int(text.split("length=")[1].split(",")[0].split()[0])
        err, page, _ = mcp_call(server, "read", path="notes-ja.md", offset=0, length=length)
        assert not err and page == CJK[:length] and tokens(page) <= MAX_RESULT_TOKENS
        err, text, _ = mcp_call(server, "search", pattern="CRDT", limit=500)
        assert not err and tokens(text) <= MAX_RESULT_TOKENS
    finally:
        memories.close()


@pytest.mark.slow
def test_search_pages_through_a_big_file(memory: Path) -> None:
    lines = [f"filler line {i}\n" for i in range(200_000)]  # about 3.5 MB: past 2 MB and past a page
    lines[180_000] = "the needle is here\n"
    write(memory, "huge.md", "".join(lines))
    memories = _served(memory, read_only=False)
    try:
        err, text, _ = mcp_call(build(memories), "search", pattern="needle")
    finally:
        memories.close()
    assert not err and text == "huge.md:180001: the needle is here", text
