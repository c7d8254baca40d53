"""Shared fixtures: every test runs against real git in its own isolated world."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import pygit2
import pytest
from pygit2.enums import ConfigLevel

pytest_plugins = ["tests.helpers.server_fixtures", "tests.helpers.agent_user"]


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """HOME, XDG dirs, MEMSYNC_HOME, GIT_* and pygit2's config search path point into tmp."""
    home = tmp_path / "home"
    home.mkdir()
    for key in list(os.environ):
        if key.startswith(("GIT_", "MEMSYNC_", "XDG_", "SSH_AUTH_SOCK")):
            monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / ".local" / "share"))
    monkeypatch.setenv("MEMSYNC_HOME", str(tmp_path / "memsync-home"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(home / ".gitconfig"))
    monkeypatch.setenv("GIT_AUTO_GC", "0")
    monkeypatch.setenv("MEMSYNC_LOCK_TIMEOUT", "20")
    levels = (ConfigLevel.GLOBAL, ConfigLevel.XDG, ConfigLevel.SYSTEM)
    saved = {level: pygit2.settings.search_path[level] for level in levels}
    for level in levels:
        pygit2.settings.search_path[level] = str(home)
    monkeypatch.chdir(tmp_path)
    yield tmp_path
    for level, value in saved.items():
        pygit2.settings.search_path[level] = value


@dataclass
class Result:
    code: int
    out: str
    err: str


class Cli(Protocol):
    """The `cli` fixture: cli("push", cwd=path) -> Result(code, out, err)."""

    def __call__(self, *args: str, cwd: Path | None = None) -> Result: ...


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Cli:
    """Call the memsync CLI in-process: cli("push", cwd=path) -> Result(code, out, err)."""
    from memsync.cli.app import main

    def invoke(*args: str, cwd: Path | None = None) -> Result:
        if cwd is not None:
            monkeypatch.chdir(cwd)
        capsys.readouterr()
        code = main(list(args))
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return invoke


def memsync_cmd(
    *args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 120, check: bool = False
) -> subprocess.CompletedProcess[str]:
    """Run the installed entry point as a separate process."""
    proc = subprocess.run(
        [sys.executable, "-m", "memsync", *args],
        cwd=cwd,
        env=env or dict(os.environ),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"memsync {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr}")
    return proc


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def write(root: Path, rel: str, text: str | bytes) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


def fresh_for_a_minute(path: Path) -> Path:
    """Give `path` an mtime a minute ahead: memsync's 2-second rule for fresh files
    (core/snapshot.py, FRESH_NS) then holds for it however slowly a loaded machine runs the test."""
    ahead = time.time_ns() + 60 * 10**9
    os.utime(path, ns=(ahead, ahead), follow_symlinks=False)
    return path


def hub_path() -> Path:
    return Path(os.environ["MEMSYNC_HOME"]) / "hub.git"


def hub_tree(branch: str = "memory/research", hub: Path | None = None) -> dict[str, bytes]:
    """Every file of a memory's tip on the hub, read with plain git."""
    where = hub or hub_path()
    names = git("ls-tree", "-r", "--name-only", "-z", branch, cwd=where).split("\0")
    return {
        n: subprocess.run(["git", "show", f"{branch}:{n}"], cwd=where, check=True, capture_output=True).stdout
        for n in names
        if n
    }


@pytest.fixture
def memory(tmp_path: Path, cli: Cli) -> Path:
    """An initialised and pushed memory `research` with two files, on the embedded hub."""
    root = tmp_path / "research"
    root.mkdir()
    assert cli("init", cwd=root).code == 0
    write(root, "summary.md", "# Summary\n\nfirst line\n")
    write(root, "runs/first.md", "first run\n")
    assert cli("push", cwd=root).code == 0
    return root


# Fixtures that start a server on 127.0.0.1 (tests/helpers/server_fixtures.py and a few files' own).
SERVER_FIXTURES = frozenset({"git_daemon", "daemon_hub", "http_server", "https_server", "ssh_server",
                             "hanging_server", "refusing_port", "token_hub"})


def pytest_configure(config: pytest.Config) -> None:
    from tests.helpers import figures

    figures.register(config)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The `server` marker means what it says: every test whose fixtures start a server has it
    (`-m "not server"` leaves out exactly those), whether or not its file says so."""
    for item in items:
        if SERVER_FIXTURES & set(getattr(item, "fixturenames", ())) and not item.get_closest_marker("server"):
            item.add_marker(pytest.mark.server)
        if item.path.name in SERVE_MODULES:
            item.add_marker(pytest.mark.solo)


# The files of `memsync serve`'s own tests. Two of their tests move the mtime of one of memsync's own
# modules to make a server restart, and every running server then declines its clients (its
# code changed under it), and their spare-worker checks watch the server's children: `make test`
# runs them (marker `solo`) on their own, after the rest has run in parallel (pytest-xdist).
SERVE_MODULES = frozenset({"test_serve.py", "test_self_command.py"})
