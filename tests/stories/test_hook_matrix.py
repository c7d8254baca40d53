"""Claude Code's auto memory kept by memsync's hooks on any number of machines, in any order.

Each "machine" is its own HOME and MEMSYNC_HOME with its own clone of one repository, all on one
hub (MEMSYNC_REMOTE). The hooks run exactly as the project's shared .claude/settings.json names
them (`memsync hooks run ... --project`), in this process, fed the hook JSON Claude Code sends.
Every schedule permutes, across the machines, when each one installs the hooks, writes its first
notes and first pushes: machines that started apart meet on the hub and are joined. Around them,
two clones on one machine, a linked worktree, a clone whose path makes a slug longer than 200
characters, a teammate who never ran `hooks install` (the settings came with the repository), and
an `autoMemoryDirectory` moved half way. Every schedule ends with the same notes on every machine
and no failing hook.
"""

from __future__ import annotations

import io
import json
import random
import shlex
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from memsync.agents import hookfail
from memsync.agents.projectdir import auto_memory_dir
from memsync.cli.hookcall import run_hook
from tests.conftest import Cli, git

pytestmark = pytest.mark.slow

REMOTE = "git@example.com:team/app.git"
EVENTS = {"session-start": "SessionStart", "stop": "Stop", "session-end": "SessionEnd"}


class World:
    """Machines (HOMEs) sharing one hub, each with clones of the repository."""

    def __init__(self, tmp: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch,
                 capsys: pytest.CaptureFixture[str]) -> None:
        self.tmp, self.cli, self.mp, self.capsys = tmp, cli, monkeypatch, capsys
        self.hub = tmp / "hub.git"
        git("init", "-q", "--bare", str(self.hub), cwd=tmp)
        self.settings: str | None = None  # the project's shared settings, once someone installed
        self.hooks_run = 0

    def clone(self, machine: str, path: str) -> Path:
        where = self.tmp / machine / path
        where.mkdir(parents=True)
        git("init", "-q", "-b", "main", cwd=where)
        git("remote", "add", "origin", REMOTE, cwd=where)
        return where

    @contextmanager
    def on(self, machine: str) -> Iterator[Path]:
        home = self.tmp / machine / "home"
        home.mkdir(parents=True, exist_ok=True)
        with self.mp.context() as m:
            m.setenv("HOME", str(home))
            m.setenv("XDG_CONFIG_HOME", str(home / ".config"))
            m.setenv("XDG_DATA_HOME", str(home / ".local" / "share"))
            m.setenv("MEMSYNC_HOME", str(self.tmp / machine / "memsync-home"))
            m.setenv("MEMSYNC_REMOTE", str(self.hub))
            m.delenv("CLAUDE_CONFIG_DIR", raising=False)
            m.delenv("CLAUDE_PROJECT_DIR", raising=False)
            yield home

    def folder(self, machine: str, project: Path) -> Path:
        """Where Claude Code keeps this project's auto memory on `machine`."""
        from memsync.git.project import identify

        with self.on(machine) as home:
            ident = identify(project, assign=False)
            return auto_memory_dir(home / ".claude", ident.root, ident.toplevel)

    def install(self, machine: str, project: Path) -> None:
        with self.on(machine):
            r = self.cli("hooks", "install", "claude-code", "--scope", "project", cwd=project)
        assert r.code == 0, r.err
        self.settings = (project / ".claude" / "settings.json").read_text()

    def hook(self, machine: str, project: Path, verb: str, session: str = "s") -> None:
        """The installed command for `verb`, as Claude Code runs it in `project` on `machine`; the
        repository's settings file is the shared one (a teammate's clone has it from git)."""
        assert self.settings is not None
        settings = project / ".claude" / "settings.json"
        if not settings.exists():
            settings.parent.mkdir(exist_ok=True)
            settings.write_text(self.settings)
        data = json.loads(settings.read_text())
        command = next(h["command"] for g in data["hooks"][EVENTS[verb]] for h in g["hooks"])
        words = shlex.split(command)
        assert words[:3] == ["memsync", "hooks", "run"] and "--project" in words
        payload = {"session_id": f"{machine}-{session}", "hook_event_name": EVENTS[verb], "cwd": str(project),
                   "source": "startup"}
        with self.on(machine):
            self.mp.chdir(project)
            self.mp.setattr(sys, "stdin", io.StringIO(json.dumps(payload)))
            self.capsys.readouterr()
            run_hook(words[3:])
            out, err = self.capsys.readouterr()
        self.hooks_run += 1
        assert out == "", f"{machine} {verb} failed: {err}"  # a failing hook prints its systemMessage

    def notes(self, folder: Path) -> dict[str, str]:
        return {p.relative_to(folder).as_posix(): p.read_text() for p in sorted(folder.rglob("*"))
                if p.is_file() and ".git" not in p.parts and ".vm0" not in p.parts and p.name != ".gitattributes"}

    def failures(self, machines: list[str]) -> list[str]:
        found = []
        for machine in machines:
            with self.on(machine):
                found += [f"{machine}: {c.dir}: {c.failure}" for c in hookfail.clones() if c.failure]
        return found


@pytest.fixture
def world(tmp_path: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> World:
    for key, value in (("MEMSYNC_CONNECT_TIMEOUT", "5"), ("MEMSYNC_IO_TIMEOUT", "15"), ("MEMSYNC_NETWORK_TRIES", "2")):
        monkeypatch.setenv(key, value)  # what a hook sets: restored after the test
    return World(tmp_path, cli, monkeypatch, capsys)


def write_note(folder: Path, machine: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "MEMORY.md", "a") as fh:
        fh.write(f"- {machine}: the build needs make\n")
    (folder / f"topic-{machine}.md").write_text(f"{machine} learnt this\n")


def exchange_rounds(world: World, clones: list[tuple[str, Path]]) -> None:
    """Every clone starts a session and ends a turn, twice: what one pushed, the others pull."""
    for _ in range(2):
        for machine, project in clones:
            world.hook(machine, project, "session-start")
            world.hook(machine, project, "stop")


SCHEDULES = 4  # orderings per machine count (seeded: the same on every run)


@pytest.mark.parametrize("machines", [2, 3])
@pytest.mark.parametrize("seed", range(SCHEDULES))
def test_any_order_ends_with_the_same_notes_everywhere(world: World, machines: int, seed: int) -> None:
    names = [f"m{i}" for i in range(machines)]
    projects = {m: world.clone(m, f"src/{m}/app") for m in names}
    rng = random.Random(seed * 10 + machines)
    steps = []
    for m in names:  # per machine: install and first notes in either order, the first push after both
        opening = ["install", "note"] if rng.random() < 0.5 else ["note", "install"]
        steps.append([(m, s) for s in (*opening, "push")])
    schedule = []
    while any(steps):
        pick = rng.choice([s for s in steps if s])
        schedule.append(pick.pop(0))
    installer = next(m for m, s in schedule if s == "install")
    for machine, step in schedule:
        project = projects[machine]
        if step == "install":
            if machine == installer or rng.random() < 0.5:
                world.install(machine, project)
            # else a teammate who never runs `hooks install`: the repository's settings are enough
        elif step == "note":
            write_note(world.folder(machine, project), machine)
        elif world.settings is not None:
            world.hook(machine, project, "stop")
        else:  # nobody installed yet: the first push waits for the hooks
            schedule.append((machine, step))
    exchange_rounds(world, [(m, projects[m]) for m in names])
    trees = {m: world.notes(world.folder(m, projects[m])) for m in names}
    first = trees[names[0]]
    assert all(tree == first for tree in trees.values()), trees
    text = "".join(first.values())
    for m in names:
        assert f"- {m}: the build needs make" in text and first[f"topic-{m}.md"] == f"{m} learnt this\n"
    assert world.failures(names) == []
    print(f"\nhook matrix seed {seed}, {machines} machines: {' '.join(f'{m}:{s}' for m, s in schedule)}; "
          f"{world.hooks_run} hooks, 0 failing")


def test_clones_worktrees_long_paths_and_a_moved_folder_converge(world: World, cli: Cli) -> None:
    a1 = world.clone("a", "src/app")
    a2 = world.clone("a", "other-checkout/app")  # two clones on one machine
    deep = "/".join(["a-rather-long-folder-name-for-projects"] * 6)
    b1 = world.clone("b", f"{deep}/app")  # a slug past 200 characters: cut and hashed
    c1 = world.clone("c", "work/app")
    (c1 / "README").write_text("x\n")
    git("add", "README", cwd=c1)
    git("-c", "user.name=c", "-c", "user.email=c@c", "commit", "-q", "-m", "first", cwd=c1)
    c_tree = world.tmp / "c" / "work" / "app-feature"
    git("worktree", "add", "-q", str(c_tree), "-b", "feature", cwd=c1)  # a linked worktree
    world.install("a", a1)
    b_folder = world.folder("b", b1)
    assert len(b_folder.parent.name) > 200 and b_folder.parent.name[200] == "-"
    assert world.folder("c", c_tree) == world.folder("c", c1)  # a worktree shares the main one's folder
    labels = {"a-src": ("a", a1), "a-other": ("a", a2), "b-deep": ("b", b1), "c-worktree": ("c", c_tree)}
    for label, (machine, project) in labels.items():
        write_note(world.folder(machine, project), label)
        world.hook(machine, project, "stop")
    # c moves the project's memory in its own settings; the next hooks follow it
    old = world.folder("c", c1)
    with world.on("c") as home:
        moved = home / ".claude" / "notes" / "app"
        (home / ".claude").mkdir(exist_ok=True)
        (home / ".claude" / "settings.json").write_text(json.dumps({"autoMemoryDirectory": str(moved)}))
    assert world.folder("c", c1) == moved
    all_clones = [("a", a1), ("a", a2), ("b", b1), ("c", c1), ("c", c_tree)]
    exchange_rounds(world, all_clones)
    folders = {world.folder(m, p) for m, p in all_clones}
    assert len(folders) == 4 and old not in folders  # c's two checkouts share one, now moved
    trees = [world.notes(f) for f in folders]
    assert all(t == trees[0] for t in trees)
    assert {f"topic-{label}.md" for label in labels} <= set(trees[0])
    assert world.failures(["a", "b", "c"]) == []
    with world.on("c"):
        status = cli("hooks", "status", cwd=c1)
    assert f"at {moved}" in status.out and f"moved by autoMemoryDirectory from {old}" in status.out, status.out


def test_two_machines_that_started_apart_are_joined_once(world: World) -> None:
    """Both install and write before either pushes: two histories with no common version. The
    second to push joins them (a merge of both, keeping both sides' files), never fails on."""
    a, b = world.clone("a", "src/app"), world.clone("b", "code/app")
    world.install("a", a)
    world.install("b", b)
    write_note(world.folder("a", a), "a")
    write_note(world.folder("b", b), "b")
    world.hook("a", a, "stop")
    world.hook("b", b, "stop")
    folder = world.folder("b", b)
    joins = git("log", "--merges", "--format=%s %p", cwd=folder).splitlines()
    assert len(joins) == 1 and joins[0].startswith("Join the hub's history") and len(joins[0].split()) > 2
    tree = world.notes(folder)
    assert tree["topic-a.md"] == "a learnt this\n" and tree["topic-b.md"] == "b learnt this\n"
    copies = [p for p in tree if p.startswith("MEMORY.conflict-")]
    assert len(copies) == 1 and {tree["MEMORY.md"], tree[copies[0]]} == {"- a: the build needs make\n",
                                                                         "- b: the build needs make\n"}
    exchange_rounds(world, [("a", a), ("b", b)])
    assert world.notes(world.folder("a", a)) == world.notes(folder)
    assert world.failures(["a", "b"]) == []


def test_two_homes_that_started_apart_converge_at_user_scope(world: World, cli: Cli) -> None:
    """The whole ~/.claude of two machines, both installed before either pushed: joined, and only
    memory files ever travel (the join is checked like any version from the hub)."""
    homes = {}
    for machine in ("a", "b"):
        with world.on(machine) as home:
            claude = home / ".claude"
            claude.mkdir()
            (claude / "settings.json").write_text("{}\n")
            (claude / "CLAUDE.md").write_text(f"# {machine}'s rules\n")
            assert cli("hooks", "install", "claude-code").code == 0
            homes[machine] = claude

    def stop(machine: str) -> None:
        with world.on(machine):
            world.mp.setattr(sys, "stdin", io.StringIO(json.dumps({"session_id": machine, "hook_event_name": "Stop"})))
            world.capsys.readouterr()
            run_hook(["stop", "--agent", "claude-code", "--memory", "claude-code", "--dir", str(homes[machine])])
            out, err = world.capsys.readouterr()
        assert out == "", err

    for machine in ("a", "b", "a", "b"):
        stop(machine)
    from memsync.agents.registry import CLAUDE_CODE, allowed_path

    trees = [{k: v for k, v in world.notes(homes[m]).items() if allowed_path(CLAUDE_CODE, k)} for m in ("a", "b")]
    assert trees[0] == trees[1]
    with world.on("a"):
        assert "settings.json" not in git("ls-tree", "-r", "--name-only", "HEAD", cwd=homes["a"])
    assert sorted(v for k, v in trees[0].items() if k.startswith("CLAUDE")) == ["# a's rules\n", "# b's rules\n"]
    assert world.failures(["a", "b"]) == []
