"""Claude's memory tool on a memsync memory, with a scripted model (no network, no API key).

    pip install "memsync[claude]"; python demo/claude_memory_tool.py

Two sandboxes in turn: each opens the memory (pull), lets the "model" work through the memory
tool, and closes it (push). The model's turns are the SDK's own `BetaToolUseBlock`s; each is run
the way the SDK's tool runner runs it (`tool.call(input)`, a `ToolError` sent back as an error
result). The second model tries the destructive overwrite of the incident, reads the refusal and
appends instead. At the end: the memory's history, one version per write, attributed to each run.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from anthropic.lib.tools import ToolError
from anthropic.types.beta import BetaToolUseBlock

from memsync.integrations.claude import MemsyncMemoryTool

NOTES = "".join(f"- fact {i}: state-based CRDTs merge by a join, op-based ones need causal delivery\n"
                for i in range(60))


def turn(n: int, **command: Any) -> BetaToolUseBlock:
    return BetaToolUseBlock(id=f"toolu_{n:02d}", type="tool_use", name="memory", input=command)


def run_model(tool: MemsyncMemoryTool, script: list[BetaToolUseBlock]) -> None:
    """The runner's part: call the tool for each tool_use block, answer with a tool_result."""
    for block in script:
        try:
            result, is_error = tool.call(block.input), False
        except ToolError as exc:
            result, is_error = str(exc.content), True
        shown = str(result).replace("\n", "\n      ")[:400]
        print(f"  {block.input['command']:<11} -> {'ERROR ' if is_error else ''}{shown}")


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="memsync-claude-demo-") as tmp:
        os.environ["MEMSYNC_HOME"] = str(Path(tmp) / "home")  # the embedded hub lives here
        os.environ.setdefault("GIT_AUTHOR_NAME", "operator")
        os.environ.setdefault("GIT_AUTHOR_EMAIL", "operator@example.com")

        print("sandbox 1: the model starts a notes file")
        with MemsyncMemoryTool("research", Path(tmp) / "sandbox-1" / "research", run_id="run-1") as tool:
            run_model(tool, [
                turn(1, command="view", path="/memories"),
                turn(2, command="create", path="/memories/crdts.md", file_text="# CRDTs\n" + NOTES),
                turn(3, command="str_replace", path="/memories/crdts.md", old_str="# CRDTs", new_str="# CRDT notes"),
            ])

        print("\nsandbox 2: a fresh machine; the model misreads a failed search and overwrites")
        root = Path(tmp) / "sandbox-2" / "research"
        with MemsyncMemoryTool("research", root, run_id="run-2") as tool:
            run_model(tool, [
                turn(4, command="view", path="/memories"),
                turn(5, command="str_replace", path="/memories/crdts.md", old_str=NOTES,
                     new_str="- CRDTs: no notes yet, starting over\n"),
                turn(6, command="view", path="/memories/crdts.md", view_range=[1, 3]),
                turn(7, command="insert", path="/memories/crdts.md", insert_line=61,
                     insert_text="- fact 60: delta-state CRDTs ship only the changes"),
            ])

        print("\nthe memory's history (memsync log):")
        subprocess.run([sys.executable, "-m", "memsync", "log"], cwd=root, check=True)
        return 0


if __name__ == "__main__":
    raise SystemExit(main())
