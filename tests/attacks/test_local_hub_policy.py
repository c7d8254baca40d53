"""A hub on this machine with hooks or `receive.*` settings is pushed to through git's
receive-pack, so its policy applies (docs/REMOTES.md, "A hub on this machine with hooks")."""

from __future__ import annotations

from pathlib import Path

import pytest

from memsync.errors import EXIT_REJECTED
from tests.conftest import Cli, git, hub_path, write
from tests.helpers.figures import Figures, figures
from tests.helpers.servers import make_bare_hub

pytestmark = pytest.mark.attack
__all__ = ["figures"]


def _hook(hub: Path, name: str, body: str) -> Path:
    path = hub / "hooks" / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return path


@pytest.fixture
def team(tmp_path: Path, cli: Cli) -> tuple[Path, Path]:
    """(hub, memory): a bare hub on this machine and a memory pushed to it once."""
    hub = make_bare_hub(tmp_path / "team.git")
    root = tmp_path / "research"
    root.mkdir()
    assert cli("init", "--name", "research", "--remote", str(hub), cwd=root).code == 0
    write(root, "notes.md", "first\n")
    assert cli("push", cwd=root).code == 0
    return hub, root


def test_a_pre_receive_hook_protects_the_branch(team: tuple[Path, Path], cli: Cli, figures: Figures) -> None:
    """Before: the ref was written in place, the hook never ran, the push exited 0."""
    figures.add("security attacks")
    hub, root = team
    before = git("rev-parse", "memory/research", cwd=hub)
    _hook(hub, "pre-receive", 'while read old new ref; do\n'
          '  [ "$ref" = refs/heads/memory/research ] && { echo "memory/research is protected" >&2; exit 1; }\n'
          'done\nexit 0\n')
    write(root, "notes.md", "first\nsecond\n")
    r = cli("push", cwd=root)
    assert r.code == EXIT_REJECTED, r.err
    assert "memory/research is protected" in r.err and "pre-receive hook declined" in r.err
    assert git("rev-parse", "memory/research", cwd=hub) == before
    assert "second" in git("show", "HEAD:notes.md", cwd=root), "the commit stays local"
    figures.add("security attacks refused")


def test_update_and_post_receive_run_and_the_agents_hooks_do_not(team: tuple[Path, Path], cli: Cli,
                                                                 tmp_path: Path) -> None:
    hub, root = team
    seen = tmp_path / "seen"
    _hook(hub, "update", f'echo "update $1" >> {seen}\n')
    _hook(hub, "post-receive", f'cat >> {seen}\n')
    # what an agent can plant in the memory's own .git: never run with the operator's rights
    planted = tmp_path / "planted"
    _hook(root / ".git", "pre-push", f"touch {planted}\n")
    evil = root / ".git" / "evil"
    (evil / "hooks").mkdir(parents=True)
    _hook(evil, "pre-push", f"touch {planted}\n")
    git("config", "core.hooksPath", str(evil / "hooks"), cwd=root)
    write(root, "notes.md", "first\nsecond\n")
    r = cli("push", cwd=root)
    assert r.code == 0, r.err
    tip = git("rev-parse", "memory/research", cwd=hub).strip()
    assert tip == git("rev-parse", "HEAD", cwd=root).strip()
    lines = seen.read_text().splitlines()
    assert lines[0] == "update refs/heads/memory/research"
    assert lines[1].endswith(f"{tip} refs/heads/memory/research")
    assert not planted.exists()


def test_receive_settings_apply(team: tuple[Path, Path], cli: Cli) -> None:
    """`receive.maxInputSize` refuses a pack over it: the hub's setting, applied by receive-pack."""
    hub, root = team
    git("config", "receive.maxInputSize", "200", cwd=hub)
    write(root, "big.md", "".join(f"line {i} of something long enough\n" for i in range(400)))
    r = cli("push", cwd=root)
    assert r.code == EXIT_REJECTED, r.err
    assert "big.md" not in git("ls-tree", "--name-only", "memory/research", cwd=hub)


def test_a_hub_without_a_policy_keeps_the_in_place_write(memory: Path) -> None:
    """The embedded hub carries memsync's own protection only: no receive-pack for it."""
    from memsync.git.receivepack import policy

    assert git("config", "receive.denyNonFastForwards", cwd=hub_path()).strip() == "true"
    assert policy(hub_path()) == []
    _hook(hub_path(), "post-update", "exit 0\n")
    assert policy(hub_path()) == ["hooks/post-update"]
