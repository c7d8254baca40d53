"""A memory the hub does not have: `memsync run --memory NEW`, `memsync mcp --memory NEW` and the
Claude memory tool agree. Each refuses it by default (exit 4, `error:` naming the memories the hub
does have, a `hint:` naming `--create`), so a misspelt name or the wrong hub never looks like an
empty memory to an agent; each starts it when asked (`--create`, `create=True`) and publishes it."""

from __future__ import annotations

from pathlib import Path

import pytest
from anthropic.lib.tools import ToolError

from memsync.errors import MemoryNotFound
from memsync.integrations.claude import MemsyncMemoryTool
from memsync.integrations.mcp_server import Memories
from memsync.run.mounts import Mount
from tests.conftest import hub_tree, memsync_cmd


def refused_line(stderr: str) -> None:
    lines = stderr.strip().splitlines()
    assert lines[0] == f"error: no memory 'new-notes' on {lines[0].split(' on ', 1)[1]}", stderr
    assert lines[1].startswith("hint: memories there: research") and "--create" in lines[1], stderr
    assert "Traceback" not in stderr


def test_run_refuses_a_memory_the_hub_lacks_and_creates_it_when_asked(memory: Path, tmp_path: Path) -> None:
    sandbox = tmp_path / "sandbox"
    sandbox.mkdir()
    proc = memsync_cmd("run", "--memory", "new-notes", "--", "sh", "-c", "echo hi > note.md", cwd=sandbox)
    assert proc.returncode == 4
    refused_line(proc.stderr)
    assert not (sandbox / "new-notes").exists()
    proc = memsync_cmd("run", "--create", "--memory", "new-notes", "--", "sh", "-c",
                       'echo hi > "$MEMSYNC_MEMORY_DIR/note.md"', cwd=sandbox)
    assert proc.returncode == 0, proc.stderr
    assert "a new memory" in proc.stderr
    assert hub_tree("memory/new-notes")["note.md"] == b"hi\n"


@pytest.mark.slow
def test_mcp_refuses_a_memory_the_hub_lacks_and_creates_it_when_asked(memory: Path, tmp_path: Path) -> None:
    proc = memsync_cmd("mcp", "--memory", "new-notes", cwd=tmp_path)
    assert proc.returncode == 4 and proc.stdout == ""
    refused_line(proc.stderr)
    memories = Memories([Mount("new-notes", tmp_path / "new-notes", False)], remote=None, run_id="r-mcp",
                        offline=False, checkpoint_writes=0, checkpoint_seconds=0, create=True)
    memories.open()
    memories.files["new-notes"].create(memories.files["new-notes"].target("a.md"), "a\n")
    assert [r.pushed for r in memories.close()] == [True]
    assert hub_tree("memory/new-notes")["a.md"] == b"a\n"


def test_memory_tool_refuses_a_memory_the_hub_lacks_and_creates_it_when_asked(memory: Path, tmp_path: Path) -> None:
    t = MemsyncMemoryTool("new-notes", tmp_path / "new-notes", checkpoint_seconds=0)
    with pytest.raises(ToolError) as info:  # the first command opens it: the model reads why not
        t.call({"command": "view", "path": "/memories"})
    assert "no memory 'new-notes'" in str(info.value) and "research" in str(info.value)
    assert "create=True" in str(info.value)
    with pytest.raises(MemoryNotFound):
        MemsyncMemoryTool("new-notes", tmp_path / "new-notes", checkpoint_seconds=0).open()
    with MemsyncMemoryTool("new-notes", tmp_path / "new-notes", checkpoint_seconds=0, create=True) as t:
        t.call({"command": "create", "path": "/memories/b.md", "file_text": "b\n"})
    assert hub_tree("memory/new-notes")["b.md"] == b"b\n"
