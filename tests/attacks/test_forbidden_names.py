"""Names no version may hold are refused on the way in, by the rule the hub's trees are checked
with (docs/SECURITY.md, "Names no version may hold"): an agent cannot push what every other
sandbox's clone refuses, and a path libgit2 cannot store never blocks the rest of a commit."""

from __future__ import annotations

import sys
from pathlib import Path

import pygit2
import pytest

from memsync.checks.pathnames import refused_path
from memsync.errors import EXIT_BLOCKED
from tests.conftest import Cli, hub_tree, write
from tests.helpers.figures import Figures, figures

pytestmark = pytest.mark.attack
__all__ = ["figures"]

ZWNJ = "\u200c"
# the look-alikes of .vm0 (clones refuse them), then paths libgit2's index refuses outright
LOOKALIKES = ["notes/.vm0/x", ".VM0/x", ".vm0./x", "VM0~1/x", "sub/.VM0/x", f".v{ZWNJ}m0/x", f"a/.g{ZWNJ}it/x"]
UNSTORABLE = [".git./x", ".git /x", "GIT~1/x", ".git::$DATA/x"]


@pytest.mark.parametrize("path", LOOKALIKES + UNSTORABLE + [".GIT/x", "d/.Git/y"])
def test_the_commit_side_and_the_hub_side_share_one_rule(path: str, memory: Path) -> None:
    """Each path the commit side refuses is one a hub version is refused for (git/hubtree.py)."""
    from memsync.git.hubtree import UnsafeVersion, check_tree

    assert refused_path(path) is not None
    repo = pygit2.Repository(str(memory / ".git"))
    tree = _tree_with(repo, path)
    with pytest.raises(UnsafeVersion):
        check_tree(repo, tree, None, version="0" * 40)


@pytest.mark.parametrize("path", ["notes.md", "vm0/x", ".vm01/x", "x.vm0/y", ".gitignore", "git~2/x", ".github/x"])
def test_ordinary_names_pass(path: str) -> None:
    assert refused_path(path) is None


def _tree_with(repo: pygit2.Repository, path: str) -> pygit2.Tree:
    """A tree holding `path`, written raw as a hostile hub writer can (libgit2's builder refuses)."""
    oid, mode = repo.create_blob(b"hi\n"), b"100644"
    for name in reversed(path.split("/")):
        entry = mode + b" " + name.encode() + b"\0" + oid.raw
        oid, mode = repo.odb.write(pygit2.enums.ObjectType.TREE, entry), b"40000"
    return repo[oid].peel(pygit2.Tree)


def test_push_keeps_every_lookalike_out_names_it_and_commits_the_rest(memory: Path, cli: Cli,
                                                                      figures: Figures) -> None:
    """Before: the look-alikes were pushed (exit 0) and every clone then exited 7; one unstorable
    path made the push fail with "free some disk space" and nothing was committed."""
    figures.add("security attacks")
    for path in LOOKALIKES + UNSTORABLE:
        write(memory, path, "hidden\n")
    write(memory, "decisions.md", "kept\n")
    r = cli("push", cwd=memory)
    assert r.code == EXIT_BLOCKED, r.err
    assert "free some disk space" not in r.err
    for path in LOOKALIKES + UNSTORABLE:
        assert f"kept out of the commit: {path.replace(ZWNJ, '')}" in r.err.replace(ZWNJ, "")
    on_hub = hub_tree()
    assert on_hub["decisions.md"] == b"kept\n"
    assert not any("vm0" in p.lower().replace(ZWNJ, "") or "git" in p.lower() for p in on_hub)
    assert all((memory / p).read_text() == "hidden\n" for p in LOOKALIKES + UNSTORABLE), "still on disk"
    write(memory, "later.md", "next\n")
    again = cli("push", cwd=memory)
    assert again.code == EXIT_BLOCKED and hub_tree()["later.md"] == b"next\n", again.err
    assert cli("clone", "research", "other", cwd=memory.parent).code == 0, "every clone still works"
    figures.add("security attacks refused")


@pytest.mark.parametrize("beside", ["on", "off"])
def test_a_run_that_writes_lookalikes_is_saved_and_says_so(memory: Path, cli: Cli, figures: Figures, beside: str,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: `notes/.vm0/x` went out with exit 0 (every later clone exited 7), `.git./x` lost the
    run ("NOT SAVED", exit 7) and `.GIT/x` vanished without a word. The `.GIT/` look is walked
    beside the scan's diff (core/gitlookalikes.beside), or after it (MEMSYNC_NO_EARLY_WALK=1)."""
    if beside == "off":
        monkeypatch.setenv("MEMSYNC_NO_EARLY_WALK", "1")
    figures.add("security attacks")
    script = ("import os\n"
              "for p in ['notes/.vm0/x', '.git./x', '.GIT/x', 'sub/.Git/y']:\n"
              "    os.makedirs(os.path.dirname(p), exist_ok=True); open(p, 'w').write('agent\\n')\n"
              "open('runs.md', 'w').write('the real work\\n')\n")
    r = cli("run", "--run-id", "run-names-1", "--", sys.executable, "-c", script, cwd=memory)
    assert r.code == EXIT_BLOCKED, r.err
    assert "NOT SAVED" not in r.err + r.out
    for shown in ("notes/.vm0/x", ".git./x", ".GIT/", "sub/.Git/"):
        assert f"kept out of the commit: {shown}" in r.err, r.err
    on_hub = hub_tree()
    assert on_hub["runs.md"] == b"the real work\n"
    assert sorted(p for p in on_hub if "git" in p.lower() or "vm0" in p.lower()) == []
    assert cli("clone", "research", "other", cwd=memory.parent).code == 0
    figures.add("security attacks refused")


def test_the_memory_tool_refuses_lookalike_names(memory: Path, tmp_path: Path, figures: Figures) -> None:
    """The memory tool and the MCP server resolve paths through one function (integrations/files.py):
    before, `create /memories/.GIT/x` answered success and the file was never committed."""
    from anthropic.lib.tools import ToolError

    from memsync.integrations.claude import MemsyncMemoryTool

    figures.add("security attacks")
    dest = tmp_path / "s" / "research"
    with MemsyncMemoryTool("research", dest, run_id="run-tool-1", checkpoint_seconds=0) as t:
        for path in (".GIT/x", "notes/.VM0/x", ".git./x", f".v{ZWNJ}m0/x"):
            with pytest.raises(ToolError, match="no version may hold it"):
                t.call({"command": "create", "path": f"/memories/{path}", "file_text": "x\n"})
            assert not (dest / path).exists()
    figures.add("security attacks refused")
