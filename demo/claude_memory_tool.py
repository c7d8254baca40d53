"""Claude's memory tool on a memsync memory, with a scripted model (no network, no API key).

    pip install "memsync[claude]"; python demo/claude_memory_tool.py

Two sandboxes in turn: each opens the memory (pull), runs the Anthropic SDK's own tool runner with
the memory tool, and closes it (push). The "model" is a scripted Messages API behind the SDK's
HTTP client (an in-process transport): each reply asks for the next memory command, and the tool
results the runner sends back are printed. The second model tries the destructive overwrite of the
incident, gets a tool error, views the file and appends instead. At the end: the memory's history,
one version per write, attributed to each run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import httpx2
from anthropic import Anthropic

from memsync.integrations.claude import MemsyncMemoryTool

NOTES = "".join(f"- fact {i}: state-based CRDTs merge by a join, op-based ones need causal delivery\n"
                for i in range(60))


class ScriptedModel:
    """Plays the Messages API: each reply is the next scripted memory command, then "done"."""

    def __init__(self, commands: list[dict[str, Any]]) -> None:
        self.commands = commands
        self.turn = 0

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        for block in json.loads(request.content)["messages"][-1]["content"]:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                text = str(block["content"]).replace("\n", "\n      ")[:400]
                print(f"    <- {'ERROR ' if block.get('is_error') else ''}{text}")
        self.turn += 1
        if self.turn <= len(self.commands):
            command = self.commands[self.turn - 1]
            print(f"  -> {command['command']} {command.get('path', command.get('old_path', ''))}")
            content: list[dict[str, Any]] = [{"type": "tool_use", "id": f"toolu_{self.turn:02d}",
                                              "name": "memory", "input": command}]
            stop = "tool_use"
        else:
            content, stop = [{"type": "text", "text": "Done."}], "end_turn"
        return httpx2.Response(200, json={
            "id": f"msg_{self.turn:02d}", "type": "message", "role": "assistant", "model": "scripted",
            "content": content, "stop_reason": stop, "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1}})


def session(tool: MemsyncMemoryTool, commands: list[dict[str, Any]]) -> None:
    client = Anthropic(api_key="scripted", http_client=httpx2.Client(transport=httpx2.MockTransport(
        ScriptedModel(commands))))
    with tool:  # pull now, push at the end
        runner = client.beta.messages.tool_runner(model="scripted", max_tokens=1024, tools=[tool],
                                                  messages=[{"role": "user", "content": "Keep CRDT notes."}])
        runner.until_done()


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="memsync-claude-demo-") as tmp:
        os.environ["MEMSYNC_HOME"] = str(Path(tmp) / "home")  # the embedded hub lives here
        os.environ.setdefault("GIT_AUTHOR_NAME", "operator")
        os.environ.setdefault("GIT_AUTHOR_EMAIL", "operator@example.com")

        print("sandbox 1: the model starts a notes file")
        session(MemsyncMemoryTool("research", Path(tmp) / "sandbox-1" / "research", run_id="run-1", create=True), [
            {"command": "view", "path": "/memories"},
            {"command": "create", "path": "/memories/crdts.md", "file_text": "# CRDTs\n" + NOTES},
            {"command": "str_replace", "path": "/memories/crdts.md", "old_str": "# CRDTs",
             "new_str": "# CRDT notes"},
        ])

        print("\nsandbox 2: a fresh machine; the model misreads a failed search and overwrites")
        root = Path(tmp) / "sandbox-2" / "research"
        session(MemsyncMemoryTool("research", root, run_id="run-2"), [
            {"command": "view", "path": "/memories"},
            {"command": "str_replace", "path": "/memories/crdts.md", "old_str": NOTES,
             "new_str": "- CRDTs: no notes yet, starting over\n"},
            {"command": "view", "path": "/memories/crdts.md", "view_range": [1, 3]},
            {"command": "insert", "path": "/memories/crdts.md", "insert_line": 61,
             "insert_text": "- fact 60: delta-state CRDTs ship only the changes"},
        ])

        print("\nthe memory's history (memsync log):")
        subprocess.run([sys.executable, "-m", "memsync", "log"], cwd=root, check=True)
        return 0


if __name__ == "__main__":
    raise SystemExit(main())
