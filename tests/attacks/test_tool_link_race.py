"""A file and a folder of the memory flipped to symlinks pointing outside while the agent-facing
tools work on them (the agent's own shell tool can do that between a tool's check and its use).

A thread swaps `notes.txt` for a link to a secret file outside the memory and `dir` for a link to
the folder holding it, and back, as fast as it can, while the memory tool and the MCP tools view,
read, search, edit, list and commit. No result, no work-tree file and no commit may ever hold a
byte of the outside file. Before every file operation went through the memory's folder
descriptors (memtree.py), `view` returned the secret and `insert` committed it within seconds.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from anthropic.lib.tools import ToolError
from anthropic.lib.tools._tool_dispatch import tool_error_content

from memsync.integrations.claude import MemsyncMemoryTool
from memsync.integrations.mcp_server import Memories, build
from memsync.run.mounts import Mount
from tests.attacks.test_security_tools import mcp_call
from tests.conftest import git
from tests.helpers.figures import Figures, figures

pytestmark = [pytest.mark.attack, pytest.mark.slow]
__all__ = ["figures"]

SECRET = "OUTSIDE-SECRET-7f3a9c"
SECONDS = 3.0  # the campaign's length; under load it makes fewer rounds, never a wrong result
INSIDE = "inside notes\n"


def flipper(root: Path, outside: Path, stop: threading.Event, flips: list[int]) -> None:
    notes, folder, kept = root / "notes.txt", root / "dir", root / ".dir-real"
    while not stop.is_set():
        link = root / ".notes-link"
        link.symlink_to(outside / "secret.txt")
        os.replace(link, notes)  # notes.txt is now a link to the secret
        os.rename(folder, kept)
        folder.symlink_to(outside, target_is_directory=True)  # dir/ is now the outside folder
        time.sleep(0.0005)
        plain = root / ".notes-plain"
        plain.write_text(INSIDE)
        os.replace(plain, notes)
        folder.unlink()
        os.rename(kept, folder)
        flips[0] += 1


def _text(call: Any) -> str:
    try:
        return str(call())
    except ToolError as exc:
        return str(tool_error_content(exc))
    except Exception as exc:  # an OSError from a race is an answer too, and checked the same
        return f"{type(exc).__name__}: {exc}"


def test_no_outside_byte_reaches_a_result_a_file_or_a_commit(tmp_path: Path, figures: Figures) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text(f"{SECRET}\n")
    (outside / "a.md").write_text(f"{SECRET} in a.md\n")
    root = tmp_path / "research"
    tool = MemsyncMemoryTool("research", root, run_id="race-run", checkpoint_seconds=0, checkpoint_writes=0,
                             create=True, check_seen=False, confirm_destructive=False)
    tool.open()
    tool.call({"command": "create", "path": "/memories/notes.txt", "file_text": INSIDE})
    tool.call({"command": "create", "path": "/memories/dir/a.md", "file_text": "a\n"})
    memories = Memories([Mount("research", root, False)], remote=None, run_id="race-run", offline=True,
                        checkpoint_writes=0, checkpoint_seconds=0)
    memories.open()
    server = build(memories)
    commands: list[Any] = [
        lambda: tool.call({"command": "view", "path": "/memories/notes.txt"}),
        lambda: tool.call({"command": "view", "path": "/memories/dir/a.md"}),
        lambda: tool.call({"command": "view", "path": "/memories"}),
        lambda: tool.call({"command": "view", "path": "/memories/dir"}),
        lambda: tool.call({"command": "insert", "path": "/memories/notes.txt", "insert_line": 0, "insert_text": "x"}),
        lambda: tool.call({"command": "str_replace", "path": "/memories/notes.txt", "old_str": "inside",
                           "new_str": "inside!"}),
        lambda: tool.call({"command": "str_replace", "path": "/memories/dir/a.md", "old_str": "a", "new_str": "b"}),
        lambda: mcp_call(server, "read", path="notes.txt"),
        lambda: mcp_call(server, "read", path="dir/a.md"),
        lambda: mcp_call(server, "view", path="dir"),
        lambda: mcp_call(server, "search", pattern="SECRET|notes|a"),
        lambda: mcp_call(server, "insert", path="dir/a.md", insert_line=0, insert_text="y"),
    ]
    stop, flips = threading.Event(), [0]
    thread = threading.Thread(target=flipper, args=(root, outside, stop, flips), daemon=True)
    rounds = leaks = refused = 0
    thread.start()
    try:
        deadline = time.monotonic() + SECONDS
        while time.monotonic() < deadline:
            for command in commands:
                text = _text(command)
                leaks += SECRET in text
                refused += "symlink" in text
            rounds += 1
    finally:
        stop.set()
        thread.join(timeout=60)
        memories.close()
        tool.close()
    work_tree = [p for p in root.rglob("*") if ".git" not in p.parts and p.is_file() and not p.is_symlink()]
    leaks += sum(SECRET in p.read_text(errors="replace") for p in work_tree)
    history = git("log", "--all", "-p", "--format=%H", cwd=root)
    leaks += history.count(SECRET)
    commits = int(git("rev-list", "--count", "--all", cwd=root).strip())
    print(f"\nlink race: {rounds} rounds x {len(commands)} tool calls, {flips[0]} flips, {refused} refused as "
          f"links, {commits} commits, leaks={leaks}")
    figures.add("security attacks", rounds * len(commands))
    assert rounds >= 5 and flips[0] >= 5 and commits > 2
    assert leaks == 0
    figures.add("security attacks refused", rounds * len(commands))


def test_the_memory_folder_itself_swapped_for_a_link_is_refused(tmp_path: Path, figures: Figures) -> None:
    """The folder the session opened, moved away and replaced by a link to a folder outside (the
    agent owns the folder holding the memory): every later call is refused, nothing read there."""
    figures.add("security attacks")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "notes.txt").write_text(f"{SECRET}\n")
    root = tmp_path / "research"
    with MemsyncMemoryTool("research", root, run_id="swap-run", checkpoint_seconds=0, create=True) as tool:
        tool.call({"command": "create", "path": "/memories/notes.txt", "file_text": INSIDE})
        root.rename(tmp_path / "moved-away")
        root.symlink_to(outside, target_is_directory=True)
        for command in ({"command": "view", "path": "/memories/notes.txt"}, {"command": "view", "path": "/memories"},
                        {"command": "insert", "path": "/memories/notes.txt", "insert_line": 0, "insert_text": "x"}):
            text = _text(lambda c=command: tool.call(c))
            assert SECRET not in text, text
            assert "not the folder this session opened" in text or "cannot create the lock" in text, text
        root.unlink()
        (tmp_path / "moved-away").rename(root)
    assert (outside / "notes.txt").read_text() == f"{SECRET}\n"
    figures.add("security attacks refused")
