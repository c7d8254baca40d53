"""`memsync mcp`: the real server process, driven by the MCP SDK's own stdio client."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.conftest import git, hub_path, hub_tree, memsync_cmd, write

Call = Callable[..., Awaitable[tuple[bool, str]]]


def serve(cwd: Path, args: list[str], body: Callable[[Call], Awaitable[None]]) -> None:
    params = StdioServerParameters(command=sys.executable, args=["-m", "memsync", "mcp", *args],
                                   env=dict(os.environ), cwd=str(cwd))

    async def main() -> None:
        with open(cwd / "server.log", "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write_), ClientSession(read, write_) as session:
                await session.initialize()

                async def call(name: str, **arguments: Any) -> tuple[bool, str]:
                    result = await session.call_tool(name, arguments)
                    text = "".join(getattr(c, "text", "") for c in result.content)
                    assert "Traceback" not in text
                    return result.is_error, text

                tools = {t.name for t in (await session.list_tools()).tools}
                assert {"view", "read", "create", "str_replace", "insert", "delete", "rename", "log", "diff", "restore",
                        "search"} <= tools
                await body(call)

    anyio.run(main)


@pytest.mark.slow
def test_mcp_server_file_operations_history_and_search(memory: Path, tmp_path: Path) -> None:
    write(memory, "crdts.md", "state-based CRDTs need a join\n")
    assert memsync_cmd("push", cwd=memory).returncode == 0
    reference_memory(tmp_path)
    since = git("rev-parse", "memory/research", cwd=hub_path()).strip()
    work = tmp_path / "agent"
    work.mkdir()

    async def body(call: Call) -> None:
        err, text = await call("view", path="crdts.md")
        assert not err and text.startswith("sha256: ") and "state-based CRDTs" in text
        sha = text.split()[1]
        err, text = await call("read", path="crdts.md")
        assert not err and text == "state-based CRDTs need a join\n"
        err, text = await call("str_replace", path="crdts.md", old_str="need a join", new_str="merge by join",
                               expected_sha256=sha)
        assert not err and "has been edited" in text
        err, text = await call("str_replace", path="crdts.md", old_str="merge", new_str="x",
                               expected_sha256=sha)  # the base it names is gone
        assert err and "Precondition failed" in text
        assert not (await call("create", path="notes/new.md", file_text="fresh note\n"))[0]
        err, text = await call("create", path="notes/new.md", file_text="again\n")
        assert err and "already exists" in text
        assert not (await call("insert", path="notes/new.md", insert_line=1, insert_text="second"))[0]
        assert not (await call("rename", old_path="notes/new.md", new_path="notes/moved.md"))[0]
        err, text = await call("create", path="../escape.md", file_text="x")
        assert err and "escape" in text
        err, text = await call("create", path="x.md", file_text="x", memory="ref-notes")
        assert err and "read-only" in text
        err, text = await call("view", path="", memory="ref-notes")
        assert not err and "reference.md" in text

        err, text = await call("log", limit=5)
        assert not err and "run mcp-run-1: mcp: rename notes/new.md -> notes/moved.md" in text
        first_edit = re.search(r"^(\w{8}) .*str_replace crdts.md", text, re.M)
        assert first_edit is not None
        err, text = await call("diff", rev=first_edit.group(1))
        assert not err and "-state-based CRDTs need a join" in text and "+state-based CRDTs merge by join" in text
        err, text = await call("search", pattern="need a join")
        assert not err and text == "no matches"
        err, text = await call("search", pattern="need a join", history=True)
        assert not err and re.fullmatch(r"\w{8} crdts\.md:1: state-based CRDTs need a join", text), text
        err, text = await call("search", pattern="(")
        assert err and "bad regular expression" in text

        err, text = await call("restore", path="crdts.md", at=f"{first_edit.group(1)}~1")
        assert not err and "restored crdts.md" in text, text
        err, text = await call("delete", path="notes")  # created in this session: no flag, no refusal
        assert not err, text

    serve(work, ["--memory", f"research:{work / 'research'}", "--memory", "ref-notes:ref:ro",
                 "--run-id", "mcp-run-1", "--checkpoint", "0"], body)
    root = work / "research"
    assert (root / "crdts.md").read_text() == "state-based CRDTs need a join\n"
    assert hub_tree()["crdts.md"] == b"state-based CRDTs need a join\n"  # pushed when the client left
    assert "notes/moved.md" not in hub_tree()
    # Every version the server wrote is the run's, the restore included (an agent is never the operator).
    actors = git("log", "--format=%(trailers:key=Memsync-Actor,valueonly)", f"{since}..HEAD", cwd=root).split()
    assert actors == ["run"] * 6  # str_replace, create, insert, rename, restore, delete: one version each
    restore_msg = git("log", "-1", "--format=%B", "--grep=^Restore", cwd=root)
    assert "Memsync-Run-Id: mcp-run-1" in restore_msg
    assert set(hub_tree("memory/ref-notes")) == {"reference.md"}


def reference_memory(tmp_path: Path) -> None:
    """A second memory on the hub, served read-only."""
    ref = tmp_path / "ref-src"
    ref.mkdir()
    assert memsync_cmd("init", "--name", "ref-notes", cwd=ref).returncode == 0
    write(ref, "reference.md", "shared knowledge\n")
    assert memsync_cmd("push", cwd=ref).returncode == 0


def test_mcp_without_memory_is_a_usage_error(tmp_path: Path) -> None:
    proc = memsync_cmd("mcp", cwd=tmp_path)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith("error: name the memories to serve") and "Traceback" not in proc.stderr


@pytest.mark.slow
def test_demo_runs_without_network(tmp_path: Path) -> None:
    demo = Path(__file__).resolve().parents[2] / "demo" / "claude_memory_tool.py"
    proc = subprocess.run([sys.executable, str(demo)], cwd=tmp_path, env=dict(os.environ), capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "ERROR Refused: this str_replace looks destructive" in proc.stdout
    assert "run run-2" in proc.stdout and "run run-1" in proc.stdout and "Traceback" not in proc.stderr


@pytest.mark.slow
def test_a_line_that_is_not_json_rpc_gets_an_error_answer(memory: Path, tmp_path: Path) -> None:
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                  "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                             "clientInfo": {"name": "t", "version": "1"}}}
    stdin = "{not json\n" + json.dumps({"hello": "world"}) + "\n" + json.dumps(initialize) + "\n"
    proc = subprocess.run([sys.executable, "-m", "memsync", "mcp", "--memory", f"research:{memory}", "--offline"],
                          input=stdin, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    answers = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    assert answers[0] == {"jsonrpc": "2.0", "id": None,
                          "error": {"code": -32700, "message": "Parse error: the line is not valid JSON"}}
    assert answers[1]["id"] is None and answers[1]["error"]["code"] == -32600
    assert answers[2]["id"] == 1 and "result" in answers[2]  # the server goes on
    assert "Traceback" not in proc.stderr
