"""A push reads its storage.yaml once, opens its repository once and binds its hub once.

Counted by wrapping the real functions (the storage loader, pygit2's Repository constructor)
during an in-process push of a real memory to a real bare hub (the embedded one); each wrapper
calls the real one. The constructor is counted, rather than a counter memsync would keep in its
own opener, because the claim is about every open: one that goes around memsync's opener (a
`pygit2.Repository(path)` anywhere in git/) must count too, and only the constructor sees it. The
pack builder's own handle (engine.for_packing: packing settings, a heap given back first) is not
the command's repository and is not counted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pygit2
import pytest

from memsync.core import config as cfgmod
from memsync.core import hubbind
from memsync.git import engine
from memsync.sync import storage
from tests.conftest import git, hub_path, write


class Counts:
    def __init__(self) -> None:
        self.loads: list[Path] = []
        self.opens: list[str] = []
        self.binds = 0
        self.on = True

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
    assert counts.opened(hub_path()) <= (3 if first else 2)  # (creating the embedded hub), the fetch, the push
