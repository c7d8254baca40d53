"""The Claude memory tool backend, driven through the Anthropic SDK's own types and call path."""

from __future__ import annotations

import hashlib
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from anthropic.lib.tools import ToolError
from anthropic.lib.tools._tool_dispatch import run_runnable_tool, tool_error_content
from anthropic.types.beta import (
    BetaMemoryTool20250818CreateCommand,
    BetaMemoryTool20250818StrReplaceCommand,
    BetaMemoryTool20250818ViewCommand,
)

from memsync.integrations.claude import AsyncMemsyncMemoryTool, MemsyncMemoryTool
from tests.conftest import git, hub_tree, write
from tests.helpers.figures import Figures, figures

__all__ = ["figures"]

CRDTS = "".join(f"- note {i}: operation-based CRDTs need causal delivery, state-based ones a join\n"
                for i in range(100))  # 7.9 KB, about the size of the incident's notes file


def tool(path: Path, **kw: Any) -> MemsyncMemoryTool:
    kw.setdefault("run_id", "run-claude-1")
    kw.setdefault("checkpoint_seconds", 0)
    return MemsyncMemoryTool("research", path, **kw)


def call(t: MemsyncMemoryTool, **command: Any) -> str:
    """What the SDK's tool runner does with a tool_use block: call(input) with the raw JSON."""
    result = anyio.run(run_runnable_tool, t, command)
    assert isinstance(result, str)
    return result


def refused(t: MemsyncMemoryTool, **command: Any) -> str:
    with pytest.raises(ToolError) as info:
        t.call(command)
    content = tool_error_content(info.value)  # what the runner sends back with is_error
    assert isinstance(content, str) and "Traceback" not in content
    return content


def trailers(root: Path, rev: str = "HEAD") -> str:
    return git("log", "-1", "--format=%(trailers)", rev, cwd=root)


def count(root: Path) -> int:
    return int(git("rev-list", "--count", "HEAD", cwd=root))


def test_each_write_is_a_version_of_the_run_and_reaches_the_hub(memory: Path, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMSYNC_RUN_ID", "run-from-env")
    dest = tmp_path / "sandbox" / "research"
    with MemsyncMemoryTool("research", dest, checkpoint_seconds=0) as t:
        assert (dest / "summary.md").read_text() == "# Summary\n\nfirst line\n"  # pulled at start
        start = count(dest)
        listing = call(t, command="view", path="/memories")
        assert "\t/memories/summary.md" in listing and "\t/memories/runs/first.md" in listing
        assert ".vm0" not in listing and ".git" not in listing
        assert call(t, command="create", path="/memories/notes/a.md", file_text="alpha\n").startswith(
            "File created successfully at: /memories/notes/a.md")
        t.execute(BetaMemoryTool20250818StrReplaceCommand(command="str_replace", path="/memories/summary.md",
                                                          old_str="first line", new_str="first line, edited"))
        call(t, command="insert", path="/memories/summary.md", insert_line=1, insert_text="inserted")
        call(t, command="rename", old_path="/memories/notes/a.md", new_path="/memories/notes/b.md")
        call(t, command="delete", path="/memories/notes/b.md")
        assert count(dest) == start + 5  # one version per write
        subjects = git("log", f"-{5}", "--format=%s", cwd=dest).split("\n")[:5]
        assert subjects == ["memory_20250818: delete notes/b.md", "memory_20250818: rename notes/a.md -> notes/b.md",
                            "memory_20250818: insert summary.md", "memory_20250818: str_replace summary.md",
                            "memory_20250818: create notes/a.md"]
        for rev in range(5):
            found = trailers(dest, f"HEAD~{rev}")
            assert "Memsync-Actor: run" in found and "Memsync-Run-Id: run-from-env" in found
            assert "Memsync-Command: memory_20250818 " in found and "Memsync-Flag" not in found
        author = git("log", "-1", "--format=%an", cwd=dest).strip()
        assert author == "memsync run run-from-env"
    assert hub_tree()["summary.md"] == b"# Summary\ninserted\n\nfirst line, edited\n"  # pushed at close
    assert "notes/b.md" not in hub_tree()


def test_sdk_semantics_and_messages(memory: Path, tmp_path: Path) -> None:
    with tool(tmp_path / "s" / "research") as t:
        assert "File /memories/summary.md already exists" in refused(
            t, command="create", path="/memories/summary.md", file_text="x")
        assert "did not appear verbatim in /memories/summary.md" in refused(
            t, command="str_replace", path="/memories/summary.md", old_str="nope", new_str="x")
        call(t, command="create", path="/memories/dup.md", file_text="a\nb\na\n")
        assert "Multiple occurrences of old_str `a` in lines: 1, 3" in refused(
            t, command="str_replace", path="/memories/dup.md", old_str="a", new_str="c")
        assert "It should be within the range [0, 3]" in refused(
            t, command="insert", path="/memories/dup.md", insert_line=9, insert_text="x")
        view = t.execute(BetaMemoryTool20250818ViewCommand(command="view", path="/memories/dup.md",
                                                           view_range=[2, -1]))
        assert view == "Here's the content of /memories/dup.md with line numbers:\n     2\tb\n     3\ta\n     4\t"
        assert "Cannot delete the /memories directory itself" in refused(t, command="delete", path="/memories")
        assert "The destination /memories/summary.md already exists" in refused(
            t, command="rename", old_path="/memories/dup.md", new_path="/memories/summary.md")
        assert "does not exist" in refused(t, command="view", path="/memories/missing.md")
        assert "Path must start with /memories" in refused(t, command="view", path="/etc/passwd")


@pytest.mark.parametrize("path", ["/memories/../outside.md", "/memories/link/outside.md", "/memories/.git/config",
                                  "/memories/.vm0/storage.yaml", "/memoriesx/a.md"])
def test_paths_cannot_escape_the_memory(memory: Path, tmp_path: Path, path: str, figures: Figures) -> None:
    figures.add("security attacks")
    outside = tmp_path / "s"
    dest = outside / "research"
    with tool(dest) as t:
        (dest / "link").symlink_to(outside, target_is_directory=True)
        before = count(dest)
        for command in ({"command": "create", "path": path, "file_text": "pwned\n"},
                        {"command": "view", "path": path},
                        {"command": "delete", "path": path}):
            text = refused(t, **command)
            assert "escape" in text or "memsync's own data" in text or "must start with" in text
        assert not (outside / "outside.md").exists() and not (tmp_path / "outside.md").exists()
        assert "pwned" not in (dest / ".vm0" / "storage.yaml").read_text()
        assert count(dest) == before
    figures.add("security attacks refused")


def test_destructive_overwrite_is_refused_then_made_flagged_on_purpose(memory: Path, tmp_path: Path) -> None:
    write(memory, "crdts.md", CRDTS)
    git("add", "-A", cwd=memory)  # the operator's push below commits it
    from memsync.sync import storage as sync

    sync.push(memory)
    with tool(tmp_path / "s" / "research") as t:
        root = t.session.root
        before = count(root)
        command = {"command": "str_replace", "path": "/memories/crdts.md", "old_str": CRDTS[200:],
                   "new_str": "- CRDTs: see the paper\n"}
        text = refused(t, **command)
        assert "looks destructive" in text and f"shrink from {len(CRDTS)} to 223 bytes" in text
        assert "repeat exactly the same" in text
        assert (root / "crdts.md").read_text() == CRDTS and count(root) == before  # nothing written
        assert "The memory file has been edited" in call(t, **command)  # the same command again: deliberate
        assert (root / "crdts.md").stat().st_size < 1024
        assert f"Memsync-Flag: shrink crdts.md {len(CRDTS)}->223" in trailers(root)
        assert "looks destructive" in refused(t, command="delete", path="/memories/runs/first.md")
        assert (root / "runs" / "first.md").exists()
        call(t, command="delete", path="/memories/runs/first.md", confirm=True)  # the explicit override
        assert "Memsync-Flag: delete runs/first.md" in trailers(root)


def test_protect_policy_and_secrets_answer_with_a_tool_error(memory: Path) -> None:
    cfg = memory / ".vm0" / "storage.yaml"
    cfg.write_text(cfg.read_text() + "protect:\n  - path: runs/**\n    mode: append-only\nsecrets: block\n")
    with tool(memory) as t:
        before = count(memory)
        text = refused(t, command="str_replace", path="/memories/runs/first.md", old_str="first", new_str="1st")
        assert "protect policy" in text and "append-only" in text
        for _ in range(2):  # neither a repeat nor confirm overrides a policy
            text = refused(t, command="delete", path="/memories/runs", confirm=True)
            assert "protect policy" in text and "append-only: file deleted" in text
        assert (memory / "runs" / "first.md").exists()
        token = "ghp_" + "a1B2c3D4e5" * 4
        text = refused(t, command="create", path="/memories/creds.md", file_text=f"token {token}\n")
        assert "looks like a secret" in text and token not in text
        assert not (memory / "creds.md").exists()
        assert count(memory) == before
        call(t, command="insert", path="/memories/runs/first.md", insert_line=1, insert_text="appended")
        assert (memory / "runs" / "first.md").read_text() == "first run\nappended\n"


def test_sha256_precondition_refuses_a_write_whose_base_changed(memory: Path) -> None:
    with tool(memory) as t:
        current = hashlib.sha256((memory / "summary.md").read_bytes()).hexdigest()
        text = refused(t, command="str_replace", path="/memories/summary.md", old_str="first", new_str="1st",
                       expected_sha256="0" * 64)
        assert "Precondition failed" in text
        stale = BetaMemoryTool20250818StrReplaceCommand(  # type: ignore[call-arg]  # the extra field validates with the SDK's type
            command="str_replace", path="/memories/summary.md", old_str="first", new_str="1st",
            expected_sha256="f" * 64)
        with pytest.raises(ToolError, match="Precondition failed"):
            t.execute(stale)
        call(t, command="str_replace", path="/memories/summary.md", old_str="first", new_str="1st",
             expected_sha256=current)
        call(t, command="view", path="/memories/runs/first.md")
        write(memory, "runs/first.md", "first run\nchanged by another writer\n")  # e.g. merged at a checkpoint
        assert "changed since you read it" in refused(
            t, command="insert", path="/memories/runs/first.md", insert_line=0, insert_text="x")
        call(t, command="view", path="/memories/runs/first.md")
        call(t, command="insert", path="/memories/runs/first.md", insert_line=0, insert_text="x")


def test_checkpoint_pushes_every_n_writes(memory: Path, tmp_path: Path) -> None:
    t = tool(tmp_path / "s" / "research", checkpoint_writes=2).open()
    call(t, command="create", path="/memories/a.md", file_text="a\n")
    assert "a.md" not in hub_tree()
    call(t, command="create", path="/memories/b.md", file_text="b\n")
    assert {"a.md", "b.md"} <= set(hub_tree())  # pushed before close
    report = t.close()
    assert report is not None and report.pushed and report.writes == 2


def test_new_memory_is_created_and_read_only_refuses(tmp_path: Path) -> None:
    with MemsyncMemoryTool("fresh-notes", tmp_path / "fresh-notes", run_id="r1", checkpoint_seconds=0,
                           create=True) as t:
        call(t, command="create", path="/memories/hello.md", file_text="hi\n")
    assert hub_tree("memory/fresh-notes")["hello.md"] == b"hi\n"
    with MemsyncMemoryTool("fresh-notes", tmp_path / "ro", read_only=True, checkpoint_seconds=0) as ro:
        assert "hi" in call(ro, command="view", path="/memories/hello.md")
        assert "read-only" in refused(ro, command="create", path="/memories/x.md", file_text="x")
        assert not (tmp_path / "ro" / "x.md").exists()


def test_async_twin_and_errors_without_open(tmp_path: Path, memory: Path) -> None:
    async def main() -> None:
        async with AsyncMemsyncMemoryTool("research", tmp_path / "a" / "research", run_id="r-async",
                                          checkpoint_seconds=0) as t:
            out = await run_runnable_tool(t, {"command": "create", "path": "/memories/async.md", "file_text": "z\n"})
            assert isinstance(out, str) and "File created successfully" in out
            with pytest.raises(ToolError):
                await t.execute(BetaMemoryTool20250818CreateCommand(command="create", path="/memories/async.md",
                                                                    file_text="again"))
    anyio.run(main)
    assert hub_tree()["async.md"] == b"z\n"
    # Never opened: the first command opens the memory, and the model reads why it could not.
    t = MemsyncMemoryTool("no-such-memory", tmp_path / "b" / "no-such-memory", create=False,
                          checkpoint_seconds=0)
    text = refused(t, command="view", path="/memories")
    assert "no-such-memory" in text and "research" in text  # the names the hub does have


def test_symlinked_file_cannot_leak_or_overwrite_outside(memory: Path, tmp_path: Path, figures: Figures) -> None:
    figures.add("security attacks")
    secret = tmp_path / "secret.txt"
    secret.write_text("outside the memory\n")
    (memory / "peek.md").symlink_to(secret)
    with tool(memory) as t:
        for command in ({"command": "view", "path": "/memories/peek.md"},
                        {"command": "str_replace", "path": "/memories/peek.md", "old_str": "outside", "new_str": "x"},
                        {"command": "insert", "path": "/memories/peek.md", "insert_line": 0, "insert_text": "x"}):
            text = refused(t, **command)
            assert "escape /memories directory via symlink" in text and "outside the memory" not in text
    assert secret.read_text() == "outside the memory\n"
    figures.add("security attacks refused")


def test_timer_checkpoint_pushes_an_idle_session(memory: Path, tmp_path: Path) -> None:
    t = tool(tmp_path / "s" / "research", checkpoint_seconds=0.3).open()
    try:
        call(t, command="create", path="/memories/idle.md", file_text="written, then idle\n")
        for _ in range(50):
            if "idle.md" in hub_tree():
                break
            time.sleep(0.1)
        assert hub_tree()["idle.md"] == b"written, then idle\n"  # before close: a kill -9 now loses nothing
    finally:
        t.close()


def test_two_sandboxes_a_merged_change_refuses_the_stale_edit(memory: Path, tmp_path: Path) -> None:
    a = tool(tmp_path / "a" / "research", run_id="run-a").open()
    b = tool(tmp_path / "b" / "research", run_id="run-b").open()
    try:
        call(b, command="view", path="/memories/summary.md")  # b reads the summary
        call(a, command="str_replace", path="/memories/summary.md", old_str="first line", new_str="line from a")
        assert a.session.checkpoint() is None  # a's edit reaches the hub
        call(b, command="create", path="/memories/b.md", file_text="b\n")
        assert b.session.checkpoint() is None  # b pulls at its checkpoint: a's edit is merged in
        assert "line from a" in (b.session.root / "summary.md").read_text()
        text = refused(b, command="str_replace", path="/memories/summary.md", old_str="# Summary",
                       new_str="# Summary (b)")
        assert "changed since you read it" in text
        call(b, command="view", path="/memories/summary.md")
        call(b, command="str_replace", path="/memories/summary.md", old_str="# Summary", new_str="# Summary (b)")
    finally:
        a.close()
        b.close()
    assert hub_tree()["summary.md"] == b"# Summary (b)\n\nline from a\n"


def test_the_sdk_tool_runner_drives_the_tool(memory: Path, tmp_path: Path) -> None:
    """The SDK's own runner against a scripted Messages API (an in-process HTTP transport)."""
    import json

    import httpx2
    from anthropic import Anthropic

    commands = [{"command": "create", "path": "/memories/a.md", "file_text": "alpha\n"},
                {"command": "create", "path": "/memories/a.md", "file_text": "again\n"},
                {"command": "view", "path": "/memories/../../etc/passwd"}]
    requests: list[dict[str, Any]] = []

    def model(request: httpx2.Request) -> httpx2.Response:
        requests.append(json.loads(request.content))
        n = len(requests)
        content: list[dict[str, Any]] = (
            [{"type": "tool_use", "id": f"toolu_{n}", "name": "memory", "input": commands[n - 1]}]
            if n <= len(commands) else [{"type": "text", "text": "done"}])
        return httpx2.Response(200, json={"id": f"msg_{n}", "type": "message", "role": "assistant", "model": "m",
                                          "content": content, "stop_reason": "tool_use" if n <= len(commands)
                                          else "end_turn", "stop_sequence": None,
                                          "usage": {"input_tokens": 1, "output_tokens": 1}})

    client = Anthropic(api_key="k", http_client=httpx2.Client(transport=httpx2.MockTransport(model)))
    with tool(tmp_path / "s" / "research") as t:
        before = count(t.session.root)
        client.beta.messages.tool_runner(model="m", max_tokens=64, tools=[t],
                                         messages=[{"role": "user", "content": "hi"}]).until_done()
        assert count(t.session.root) == before + 1
    assert requests[0]["tools"] == [{"type": "memory_20250818", "name": "memory"}]
    results = [r["messages"][-1]["content"][0] for r in requests[1:]]
    assert [r.get("is_error", False) for r in results] == [False, True, True]
    assert results[1]["content"] == "File /memories/a.md already exists"
    assert "would escape /memories directory" in results[2]["content"]
    assert hub_tree()["a.md"] == b"alpha\n"


def test_versions_left_unpushed_by_a_killed_session_go_at_the_next_checkpoint(memory: Path, tmp_path: Path) -> None:
    dest = tmp_path / "s" / "research"
    killed = tool(dest).open()
    call(killed, command="create", path="/memories/orphan.md", file_text="written before the kill\n")
    killed.session._stop.set()  # as if killed: never closed, never pushed
    assert "orphan.md" not in hub_tree()
    again = tool(dest, run_id="run-claude-2", checkpoint_seconds=0.2).open()
    try:
        for _ in range(50):
            if "orphan.md" in hub_tree():
                break
            time.sleep(0.1)
        assert hub_tree()["orphan.md"] == b"written before the kill\n"
    finally:
        again.close()
