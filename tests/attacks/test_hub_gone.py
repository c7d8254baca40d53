"""A memory never silently forks to a new hub (docs/SECURITY.md, "A hub that disappeared"): the
embedded hub a memory exchanged with is never made anew behind its back, a memory started by
`run --create` is bound to its hub like one `init` and `push` made, and a hint names only what is set."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from memsync.errors import EXIT_REMOTE
from tests.conftest import Cli, git, hub_path, write
from tests.helpers.figures import Figures, figures
from tests.helpers.servers import make_bare_hub

pytestmark = pytest.mark.attack
__all__ = ["figures"]


@pytest.mark.parametrize("gone", ["hub", "home"])
def test_a_vanished_embedded_hub_is_an_error_not_a_new_hub(gone: str, memory: Path, cli: Cli,
                                                          figures: Figures) -> None:
    """Before: `push` made an empty hub, said "pushed" and exited 0 (a silent fork)."""
    figures.add("security attacks")
    shutil.rmtree(hub_path() if gone == "hub" else hub_path().parent)
    write(memory, "decisions.md", "after the hub vanished\n")
    for verb in (("push",), ("run", "--", "true")):
        r = cli(*verb, cwd=memory)
        assert r.code == EXIT_REMOTE, (verb, r.err)
        assert f"the hub {hub_path()}" in r.err and "has disappeared" in r.err
        assert f"git init --bare {hub_path()}" in r.err
        assert not hub_path().exists(), "no hub made behind the memory's back"
    git("init", "-q", "--bare", str(hub_path()), cwd=memory)  # re-created on purpose
    r = cli("push", cwd=memory)
    assert r.code == 0, r.err
    assert "after the hub vanished" in git("show", "memory/research:decisions.md", cwd=hub_path())
    assert git("show", "memory/research:summary.md", cwd=hub_path()).startswith("# Summary")
    figures.add("security attacks refused")


def test_a_new_memory_still_creates_the_embedded_hub(tmp_path: Path, cli: Cli) -> None:
    root = tmp_path / "fresh"
    root.mkdir()
    assert cli("init", "--name", "fresh", cwd=root).code == 0
    write(root, "a.md", "a\n")
    assert cli("push", cwd=root).code == 0 and (hub_path() / "HEAD").exists()


def test_run_create_records_its_hub_and_later_pushes_need_no_variable(
        tmp_path: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch, figures: Figures) -> None:
    """Before: `run --create` left storage.yaml without `remote:`; a push without the variable was
    refused with a hint to "unset MEMSYNC_REMOTE", which was not set."""
    figures.add("security attacks")
    bare = make_bare_hub(tmp_path / "team.git")
    monkeypatch.setenv("MEMSYNC_REMOTE", str(bare))
    dest = tmp_path / "sandbox" / "fresh"
    r = cli("run", "--create", "--memory", f"fresh:{dest}", "--", "sh", "-c", "echo one > notes.md", cwd=tmp_path)
    assert r.code == 0, r.err
    assert f"remote: {bare}" in (dest / ".vm0" / "storage.yaml").read_text()
    monkeypatch.delenv("MEMSYNC_REMOTE")
    write(dest, "notes.md", "one\ntwo\n")
    r = cli("push", cwd=dest)
    assert r.code == 0, r.err
    assert git("show", "memory/fresh:notes.md", cwd=bare) == "one\ntwo\n"
    assert not hub_path().exists(), "nothing went to the embedded hub"
    figures.add("security attacks refused")


def test_a_hint_never_names_an_unset_variable(tmp_path: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    """A memory made by an older memsync (no `remote:`) that came from another hub: refused, and the
    hint says how to keep its hub rather than to unset a variable nobody set."""
    bare = make_bare_hub(tmp_path / "team.git")
    monkeypatch.setenv("MEMSYNC_REMOTE", str(bare))
    root = tmp_path / "old"
    root.mkdir()
    assert cli("init", "--name", "old", cwd=root).code == 0
    write(root, "a.md", "a\n")
    assert cli("push", cwd=root).code == 0
    monkeypatch.delenv("MEMSYNC_REMOTE")
    config = root / ".vm0" / "storage.yaml"
    config.write_text("".join(line for line in config.read_text().splitlines(keepends=True)
                              if not line.startswith("remote:")))
    r = cli("push", cwd=root)
    assert r.code != 0 and "belongs to the hub" in r.err
    assert "MEMSYNC_REMOTE" not in r.err
    assert f"remote: {bare}" in r.err
