"""A push reads its storage.yaml once, opens its repository once and resolves and binds its hub
once; so does a push to a mirror (--remote), and a run's preparation that clones its memory.

Counted by wrapping the real functions (the storage loader, pygit2's Repository constructor, the
hub's resolution and the making of a hub object) during in-process commands on a real memory
and real bare hubs (the embedded one, a mirror); each wrapper calls the real one. The constructor
is counted, rather than a counter memsync would keep in its own opener, because the claim is about
every open: one that goes around memsync's opener (a `pygit2.Repository(path)` anywhere in git/)
must count too, and only the constructor sees it. The pack builder's own handle
(engine.for_packing: packing settings, a heap given back first) is not the command's repository
and is not counted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pygit2
import pytest

from memsync.core import config as cfgmod
from memsync.core import hubbind
from memsync.git import engine, remote
from memsync.git import hub as hubmod
from memsync.run import mounts
from memsync.sync import storage
from memsync.sync.options import PushOptions
from tests.conftest import git, hub_path, write


class Counts:
    def __init__(self) -> None:
        self.loads: list[Path] = []
        self.opens: list[str] = []
        self.binds = 0
        self.resolved = 0  # a hub resolved: hubbind.resolution or hub.resolve, the outermost call
        self.hubs = 0  # a hub object made (hubbind.open_hub: a LocalHub or a NetworkHub)
        self.on = True
        self._depth = 0

    def opened(self, path: Path) -> int:
        return sum(1 for p in self.opens if p != "None" and Path(p).resolve() == path.resolve())


def _count(monkeypatch: pytest.MonkeyPatch) -> Counts:
    counts = Counts()
    real_load, real_init, real_bind = cfgmod.load, pygit2.Repository.__init__, hubbind.bind_memory
    real_packing = engine.for_packing

    def load(root: Path) -> cfgmod.StorageConfig:
        if counts.on:
            counts.loads.append(root)
        return real_load(root)

    def init(self: pygit2.Repository, path: Any = None, *args: Any, **kwargs: Any) -> None:
        if counts.on:
            counts.opens.append(str(path))
        real_init(self, path, *args, **kwargs)

    def bind(*args: Any, **kwargs: Any) -> hubbind.Bound:
        counts.binds += counts.on
        return real_bind(*args, **kwargs)

    def for_packing(path: Any) -> pygit2.Repository:  # the pack builder's own handle (engine.for_packing)
        was, counts.on = counts.on, False
        try:
            return real_packing(path)
        finally:
            counts.on = was

    def resolving(real: Any) -> Any:
        def counted(*args: Any, **kwargs: Any) -> Any:
            counts.resolved += counts.on and counts._depth == 0
            counts._depth += 1
            try:
                return real(*args, **kwargs)
            finally:
                counts._depth -= 1
        return counted

    def open_hub(*args: Any, **kwargs: Any) -> Any:
        counts.hubs += counts.on
        return real_open_hub(*args, **kwargs)

    real_open_hub = remote.open_hub
    monkeypatch.setattr(hubbind, "resolution", resolving(hubbind.resolution))
    monkeypatch.setattr(hubmod, "resolve", resolving(hubmod.resolve))
    monkeypatch.setattr(hubbind, "open_hub", open_hub)
    monkeypatch.setattr(cfgmod, "load", load)
    monkeypatch.setattr(engine, "for_packing", for_packing)
    monkeypatch.setattr(pygit2.Repository, "__init__", init)
    monkeypatch.setattr(hubbind, "bind_memory", bind)
    return counts


def _memory(tmp_path: Path) -> Path:
    root = tmp_path / "research"
    root.mkdir()
    storage.init(root)
    write(root, "summary.md", "first\n")
    return root


@pytest.mark.parametrize("first", [True, False], ids=["first push", "later push"])
def test_a_push_loads_its_configuration_once_and_opens_its_repository_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, first: bool) -> None:
    root = _memory(tmp_path)
    if not first:
        storage.push(root)
        write(root, "summary.md", "second\n")
    counts = _count(monkeypatch)
    result = storage.push(root)
    counts.on = False
    assert result.exchange.pushed
    assert git("rev-parse", "memory/research", cwd=hub_path()) == git("rev-parse", "HEAD", cwd=root)
    assert f"remote: {hub_path()}" in (root / ".vm0" / "storage.yaml").read_text()  # the first push bound it
    assert counts.loads == [root]
    assert counts.opened(root / ".git") == 1
    assert counts.binds == 1
    assert (counts.resolved, counts.hubs) == (1, 1)
    assert counts.opened(hub_path()) <= (3 if first else 2)  # (creating the embedded hub), the fetch, the push


def test_a_push_to_a_mirror_resolves_and_binds_one_hub_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _memory(tmp_path)
    storage.push(root)
    write(root, "summary.md", "second\n")
    mirror = tmp_path / "mirror.git"
    pygit2.init_repository(str(mirror), bare=True)
    counts = _count(monkeypatch)
    result = storage.push(root, PushOptions(remote=str(mirror)))
    counts.on = False
    assert result.exchange.pushed and result.mirror_of == str(hub_path())
    assert git("rev-parse", "memory/research", cwd=mirror) == git("rev-parse", "HEAD", cwd=root)
    assert git("rev-parse", "memory/research", cwd=hub_path()) != git("rev-parse", "HEAD", cwd=root)
    assert counts.loads == [root]
    assert counts.opened(root / ".git") == 1
    assert (counts.binds, counts.resolved, counts.hubs) == (1, 1, 1)  # the memory's own hub: read, never bound
    assert counts.opened(hub_path()) == 0


def test_a_run_that_clones_its_memory_resolves_and_binds_its_hub_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    storage.push(_memory(tmp_path))
    place = tmp_path / "sandbox" / "research"
    counts = _count(monkeypatch)
    [mem] = mounts.prepare([mounts.Mount("research", place)], tmp_path, None, False, lambda _m: None)
    counts.on = False
    assert mem.root == place and (place / "summary.md").read_text() == "first\n"
    assert mem.hub.key == hubmod.parse(str(hub_path())).key and mem.tracking == "origin"
    assert counts.loads == [place]  # the clone wrote it; the run read it once
    assert counts.opened(place / ".git") == 1  # the clone's own handle was on its staging directory
    assert (counts.resolved, counts.hubs) == (1, 1)
