"""The agent-facing tools (the Claude memory tool backend and `memsync mcp`) attacked by the agent
that calls them and by a hub writer: a pattern that backtracks without end, a symlink planted to
turn a delete into the deletion of another file, a 4 MB file, arguments of the wrong type or
unknown, a permissive umask. Each case failed on the code before the limits were added."""

from __future__ import annotations

import os
import stat
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import pytest
from anthropic.lib.tools import ToolError as SdkToolError
from anthropic.lib.tools._tool_dispatch import tool_error_content
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.server.mcpserver.exceptions import ToolError

import memsync
from memsync.integrations.claude import MemsyncMemoryTool
from memsync.integrations.mcp_server import Memories, build
from memsync.run.mounts import Mount
from tests.conftest import git, hub_tree, memsync_cmd, write
from tests.helpers.figures import Figures, figures

if TYPE_CHECKING:
    from memsync.integrations.mcp_server import MemoryServer

pytestmark = pytest.mark.stress
__all__ = ["figures"]

SLOW_LINE = "a" * 40 + "!"  # 41 characters
SLOW_PATTERN = "(a|aa)+$"  # backtracks without end on SLOW_LINE, in `re` and in `regex` alike


def tool(path: Path, **kw: Any) -> MemsyncMemoryTool:
    kw.setdefault("run_id", "run-tools-1")
    kw.setdefault("checkpoint_seconds", 0)
    return MemsyncMemoryTool("research", path, **kw)


def refused(t: MemsyncMemoryTool, **command: Any) -> str:
    with pytest.raises(SdkToolError) as info:
        t.call(command)
    content = tool_error_content(info.value)
    assert isinstance(content, str)
    return content


@pytest.fixture
def served(memory: Path) -> Iterator[tuple[MemoryServer, Memories]]:
    """The MCP tools on `research` (its own work tree), in this process."""
    memories = Memories([Mount("research", memory, False)], remote=None, run_id="run-tools-1", offline=False,
                        checkpoint_writes=0, checkpoint_seconds=0)
    memories.open()
    try:
        yield build(memories), memories
    finally:
        memories.close()


def mcp_call(server: MemoryServer, name: str, **arguments: Any) -> tuple[bool, str, Any]:
    """(is_error, text, structured content) as a client would get them."""
    async def main() -> tuple[bool, str, Any]:
        try:
            result = await server.call_tool(name, arguments)
        except ToolError as exc:
            return True, str(exc), None
        text = "".join(getattr(c, "text", "") for c in getattr(result, "content", []))
        return bool(getattr(result, "is_error", False)), text, getattr(result, "structured_content", None)
    return anyio.run(main)


# -- patterns ------------------------------------------------------------------------------------
def test_a_backtracking_pattern_stops_at_the_budget_and_never_reads_as_no_matches(
        memory: Path, figures: Figures) -> None:
    figures.add("security attacks")
    from memsync.core.memory import open_memory
    from memsync.integrations.search import OverBudget, search

    write(memory, "slow.md", SLOW_LINE + "\n")
    mem = open_memory(memory)
    started = time.monotonic()
    with pytest.raises(OverBudget) as info:
        search(mem, SLOW_PATTERN, seconds=0.5)
    assert time.monotonic() - started < 5
    assert "search stopped after 0.5 s" in info.value.message and "slow.md:1" in info.value.message
    with pytest.raises(OverBudget):  # the history pass has the same budget
        search(mem, "first run$|" + SLOW_PATTERN, past=True, seconds=0.5)
    with pytest.raises(OverBudget, match="would read more than"):
        search(mem, "x", max_bytes=10)
    found = search(mem, "first line")  # an ordinary pattern is not affected
    assert [(h.path, h.line) for h in found.hits] == [("summary.md", 3)] and not found.unsearched
    figures.add("security attacks refused")


def test_a_long_pattern_and_a_bad_one_are_refused_in_one_line(served: tuple[MemoryServer, Memories],
                                                             figures: Figures) -> None:
    figures.add("security attacks", 2)
    server, _ = served
    err, text, _ = mcp_call(server, "search", pattern="a" * 5000)
    assert err and "more than 1,000" in text and "\n" not in text
    err, text, _ = mcp_call(server, "search", pattern="(")
    assert err and "bad regular expression" in text and "\n" not in text
    started = time.monotonic()  # 35 characters that would take gigabytes to compile
    err, text, _ = mcp_call(server, "search", pattern="(?:(?:(?:a{100}){100}){100}){100}")
    assert err and "repeats too much" in text and "\n" not in text and time.monotonic() - started < 2
    err, text, _ = mcp_call(server, "search", pattern="first run|(?:a{10}){10}|[{]{3}")
    assert not err and "runs/first.md:1: first run" in text  # ordinary counts pass
    figures.add("security attacks refused", 2)


@pytest.mark.server
def test_a_slow_search_does_not_freeze_the_mcp_server(memory: Path, tmp_path: Path, figures: Figures) -> None:
    """The issue's attack: one search froze every other call for more than 30 s (Python's `re`
    holds the GIL while it backtracks). Other calls are answered meanwhile; the search is refused
    at its budget; the server still closes cleanly and pushes."""
    figures.add("security attacks")
    write(memory, "slow.md", SLOW_LINE + "\n")
    assert memsync_cmd("push", cwd=memory).returncode == 0
    work = tmp_path / "agent"
    work.mkdir()
    params = StdioServerParameters(command=sys.executable,
                                   args=["-m", "memsync", "mcp", "--memory", f"research:{work / 'research'}",
                                         "--run-id", "slow-run", "--checkpoint", "0"],
                                   env=dict(os.environ), cwd=str(work))
    answers: dict[str, float] = {}

    async def main() -> None:
        with open(work / "server.log", "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write_), ClientSession(read, write_) as s:
                await s.initialize()
                started = time.monotonic()

                async def slow() -> None:
                    result = await s.call_tool("search", {"pattern": SLOW_PATTERN})
                    answers["search"] = time.monotonic() - started
                    text = "".join(getattr(c, "text", "") for c in result.content)
                    assert result.is_error and "search stopped after" in text, text

                async with anyio.create_task_group() as tg:
                    tg.start_soon(slow)
                    await anyio.sleep(0.5)  # the search is running
                    with anyio.fail_after(10):  # the search's budget is 5 s: this answer comes first
                        result = await s.call_tool("create", {"path": "meanwhile.md", "file_text": "still here\n"})
                    assert not result.is_error
                    answers["create"] = time.monotonic() - started
                    with anyio.fail_after(40):  # 5 s, and slack for a loaded machine
                        while "search" not in answers:
                            await anyio.sleep(0.05)

    anyio.run(main)
    assert answers["create"] < answers["search"]
    assert hub_tree()["meanwhile.md"] == b"still here\n"  # pushed at the clean close
    figures.add("security attacks refused")


def test_a_search_that_skipped_something_never_answers_no_matches(
        served: tuple[MemoryServer, Memories], memory: Path) -> None:
    server, memories = served
    # a big file is read in pages, never skipped: the needle past 2 MB (and past a page) is found
    write(memory, "huge.md", "x" * 2_100_000 + "\nneedle at the end\n")
    err, text, _ = mcp_call(server, "search", pattern="needle")
    assert not err and text == "huge.md:2: needle at the end", text
    (memory / "huge.md").unlink()
    for n in range(3):  # versions 2-4; the needle is in the first only (summary.md)
        assert not mcp_call(server, "create", path=f"v{n}.md", file_text="v\n")[0]
    server = build(memories, search_versions=2)  # the same memories, a history search of 2 versions
    err, text, _ = mcp_call(server, "search", pattern="first line", history=True)
    assert not err and text.startswith("summary.md:3: first line\n… not searched: versions older than the newest 2")
    err, text, _ = mcp_call(server, "search", pattern="nowhere", history=True)
    assert not err and text.startswith("… not searched: versions older than the newest 2"), text
    err, text, _ = mcp_call(server, "search", pattern="nowhere")  # the current files, all of them read
    assert not err and text == "no matches"


# -- symlinks ------------------------------------------------------------------------------------
def planted_link(memory: Path) -> None:
    """A hub writer's `old-notes.md -> summary.md`, pulled into the memory."""
    (memory / "old-notes.md").symlink_to("summary.md")
    (memory / "notes-dir").symlink_to("runs", target_is_directory=True)
    assert memsync_cmd("push", cwd=memory).returncode == 0


def test_delete_and_rename_of_a_symlink_act_on_the_link(memory: Path, tmp_path: Path, figures: Figures) -> None:
    figures.add("security attacks", 3)
    planted_link(memory)
    summary = (memory / "summary.md").read_bytes()
    with tool(memory) as t:
        for _ in range(2):  # a refusal of a destructive delete says "repeat it": the second try goes through
            try:
                t.call({"command": "delete", "path": "/memories/old-notes.md"})
                break
            except SdkToolError:
                continue
        assert not os.path.lexists(memory / "old-notes.md")
        assert (memory / "summary.md").read_bytes() == summary
        t.call({"command": "rename", "old_path": "/memories/notes-dir", "new_path": "/memories/archive/runs"})
        assert (memory / "archive" / "runs").is_symlink() and (memory / "runs" / "first.md").is_file()
        for _ in range(2):
            try:
                t.call({"command": "delete", "path": "/memories/archive/runs"})
                break
            except SdkToolError:
                continue
        assert not os.path.lexists(memory / "archive" / "runs") and (memory / "runs" / "first.md").is_file()
    tree = hub_tree()
    assert tree["summary.md"] == summary and tree["runs/first.md"] == b"first run\n"
    assert "old-notes.md" not in tree and "notes-dir" not in tree and "archive/runs" not in tree
    figures.add("security attacks refused", 3)


def test_mcp_delete_of_a_symlink_keeps_its_target(memory: Path, figures: Figures) -> None:
    figures.add("security attacks")
    planted_link(memory)
    memories = Memories([Mount("research", memory, False)], remote=None, run_id="run-tools-1", offline=False,
                        checkpoint_writes=0, checkpoint_seconds=0)
    memories.open()
    try:
        server = build(memories)
        err, text, _ = mcp_call(server, "delete", path="old-notes.md", confirm=True)
        assert not err, text
    finally:
        memories.close()
    assert not os.path.lexists(memory / "old-notes.md") and (memory / "summary.md").is_file()
    assert "summary.md" in hub_tree()
    figures.add("security attacks refused")


# -- bounded results -----------------------------------------------------------------------------
BIG = "".join(f"line {i:06d} " + "x" * 80 + "\n" for i in range(45_000))  # 4 MB


def test_view_of_a_4mb_file_is_one_bounded_page_with_a_hint(memory: Path, figures: Figures) -> None:
    figures.add("security attacks")
    write(memory, "big.md", BIG)
    with tool(memory) as t:
        text = t.call({"command": "view", "path": "/memories/big.md"})
        assert isinstance(text, str) and len(text) <= 60_000
        assert "line 000000" in text and "View the rest with view_range [" in text
        page = t.call({"command": "view", "path": "/memories/big.md", "view_range": [40_000, 40_002]})
        assert isinstance(page, str) and "line 039999" in page and "line 040001" in page
        write(memory, "one-line.md", "y" * 1_000_000)
        text = t.call({"command": "view", "path": "/memories/one-line.md"})
        assert isinstance(text, str) and len(text) <= 60_000 and "shown cut" in text
        err = refused(t, command="str_replace", path="/memories/big.md", old_str="z" * 200_000, new_str="q")
        assert len(err) <= 60_000  # the error echoes old_str: bounded too
    figures.add("security attacks refused")


def test_mcp_results_are_bounded_and_sent_once(served: tuple[MemoryServer, Memories], memory: Path,
                                               figures: Figures) -> None:
    figures.add("security attacks", 3)
    server, _ = served
    write(memory, "big.md", BIG)
    err, text, structured = mcp_call(server, "view", path="big.md")
    assert not err and len(text) <= 60_000 and "view_range" in text
    assert structured is None  # the text once, not a second time as structuredContent
    err, text, _ = mcp_call(server, "read", path="big.md")
    assert err and "read it in parts" in text and len(text) < 1_000
    err, text, _ = mcp_call(server, "read", path="big.md", offset=60_000, length=60_000)
    assert not err and text == BIG[60_000:120_000]
    err, text, _ = mcp_call(server, "read", path="big.md", length=600_000)
    assert err and "at most 60,000" in text
    err, text, _ = mcp_call(server, "search", pattern="line", limit=500)
    assert not err and len(text) <= 60_000
    figures.add("security attacks refused", 3)


def test_mcp_view_of_the_root_lists_single_slashes(served: tuple[MemoryServer, Memories]) -> None:
    server, _ = served
    for root in ("/", "", "."):
        err, text, _ = mcp_call(server, "view", path=root)
        assert not err and "//" not in text, text
        assert "\t/summary.md" in text or "\tsummary.md" in text


# -- arguments -----------------------------------------------------------------------------------
def test_mcp_invalid_arguments_are_one_readable_line_and_unknown_ones_refused(
        served: tuple[MemoryServer, Memories], memory: Path, figures: Figures) -> None:
    figures.add("security attacks", 3)
    server, _ = served
    err, text, _ = mcp_call(server, "insert", path="summary.md", insert_line="abc", insert_text="x")
    assert err and "\n" not in text and "insert_line" in text and "pydantic" not in text, text
    err, text, _ = mcp_call(server, "view")  # path has a default: a plain listing
    assert not err
    err, text, _ = mcp_call(server, "create", file_text="x")
    assert err and "path is required" in text and "\n" not in text, text
    err, text, _ = mcp_call(server, "delete", path="summary.md", confirm=True, force=True)
    assert err and "Unknown argument for delete: 'force'" in text
    assert (memory / "summary.md").is_file()
    figures.add("security attacks refused", 3)


def test_memory_tool_invalid_arguments_are_one_readable_line_and_unknown_ones_refused(
        memory: Path, figures: Figures) -> None:
    figures.add("security attacks", 3)
    with tool(memory) as t:
        text = refused(t, command="view")
        assert text == "Invalid arguments for view: path is required"
        text = refused(t, command="insert", path="/memories/summary.md", insert_line="two", insert_text="x")
        assert "insert_line" in text and "\n" not in text and "pydantic" not in text
        text = refused(t, command="shred", path="/memories/summary.md")
        assert "\n" not in text and "command" in text
        text = refused(t, command="delete", path="/memories/summary.md", recursive=True)
        assert text.startswith("Unknown argument for delete: 'recursive'")
        assert (memory / "summary.md").is_file()
        assert "File created" in str(t.call({"command": "create", "path": "/memories/ok.md", "file_text": "x",
                                             "confirm": True}))  # memsync's own extras stay accepted
    figures.add("security attacks refused", 3)


# -- what a client is told -----------------------------------------------------------------------
@pytest.mark.server
def test_mcp_tools_carry_annotations_and_the_server_its_version(memory: Path, tmp_path: Path) -> None:
    params = StdioServerParameters(command=sys.executable,
                                   args=["-m", "memsync", "mcp", "--memory", f"research:{tmp_path / 'r'}",
                                         "--checkpoint", "0"], env=dict(os.environ), cwd=str(tmp_path))

    async def main() -> None:
        with open(tmp_path / "server.log", "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write_), ClientSession(read, write_) as s:
                init = await s.initialize()
                assert init.server_info.name == "memsync" and init.server_info.version == memsync.__version__
                tools = {t.name: t for t in (await s.list_tools()).tools}
                for name in ("view", "read", "log", "diff", "search"):
                    a = tools[name].annotations
                    assert a is not None and a.read_only_hint is True and a.destructive_hint is False
                for name in ("delete", "str_replace", "rename", "restore"):
                    a = tools[name].annotations
                    assert a is not None and a.read_only_hint is False and a.destructive_hint is True
                for name in ("create", "insert"):
                    a = tools[name].annotations
                    assert a is not None and a.read_only_hint is False and a.destructive_hint is False
                assert tools["restore"].annotations.idempotent_hint is True  # type: ignore[union-attr]
                assert tools["delete"].annotations.idempotent_hint is False  # type: ignore[union-attr]
                for t in tools.values():
                    assert t.output_schema is None  # results are text, not structured content

    anyio.run(main)


# -- file modes ----------------------------------------------------------------------------------
@pytest.fixture
def permissive_umask() -> Iterator[None]:
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_files_and_folders_the_tools_create_are_private_under_umask_0(
        memory: Path, permissive_umask: None, figures: Figures) -> None:
    figures.add("security attacks", 2)
    with tool(memory) as t:
        t.call({"command": "create", "path": "/memories/deep/er/note.md", "file_text": "x\n"})
        t.call({"command": "rename", "old_path": "/memories/deep/er/note.md", "new_path": "/memories/moved/to/n.md"})
        t.call({"command": "create", "path": "/memories/top.md", "file_text": "y\n"})
        t.call({"command": "str_replace", "path": "/memories/top.md", "old_str": "y", "new_str": "z"})
    assert mode(memory / "deep") == 0o700 and mode(memory / "deep" / "er") == 0o700
    assert mode(memory / "moved") == 0o700 and mode(memory / "moved" / "to") == 0o700
    assert mode(memory / "moved" / "to" / "n.md") == 0o600 and mode(memory / "top.md") == 0o600
    memories = Memories([Mount("research", memory, False)], remote=None, run_id="run-tools-2", offline=False,
                        checkpoint_writes=0, checkpoint_seconds=0)
    memories.open()
    try:
        assert not mcp_call(build(memories), "create", path="mcp/new.md", file_text="m\n")[0]
    finally:
        memories.close()
    assert mode(memory / "mcp") == 0o700 and mode(memory / "mcp" / "new.md") == 0o600
    sandbox = memory.parent / "sandbox"
    with tool(sandbox / "mounts" / "research") as t:  # cloned by the tool: its folders too
        t.call({"command": "view", "path": "/memories"})
    for made in (sandbox, sandbox / "mounts", sandbox / "mounts" / "research"):
        assert mode(made) == 0o700, made
    assert git("status", "--porcelain", cwd=memory) == ""  # all of it committed: modes git keeps are unchanged
    figures.add("security attacks refused", 2)
