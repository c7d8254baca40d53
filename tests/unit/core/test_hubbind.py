"""core/hubbind: which hub a memory's command uses, and the refusal to change it silently.
In-process on real memories: the `remote:` record wins, MEMSYNC_REMOTE naming another hub is
refused, a memory an older memsync left unrecorded is held to the hub it exchanged with, the first
push records its hub, and no account or credential is ever recorded."""

from __future__ import annotations

from pathlib import Path

import pygit2
import pytest

from memsync.core import hubbind
from memsync.core.memory import open_memory
from memsync.git import hub as hubmod
from tests.conftest import Cli, hub_path


def make_bare_hub(path: Path) -> Path:
    """An empty bare hub, made in-process."""
    pygit2.init_repository(str(path), bare=True)
    return path


def test_one_key_per_hub_whatever_its_spelling(tmp_path: Path) -> None:
    bare = make_bare_hub(tmp_path / "h.git")
    assert hubmod.parse(str(bare)).key == hubmod.parse(f"file://{bare}").key
    alice = hubmod.parse("https://alice@example.com/x.git")
    assert alice.key == hubmod.parse("https://example.com/x.git").key
    assert hubmod.parse("https://example.com:8443/x.git").key.endswith(":8443/x.git")
    assert alice.key != hubmod.parse("https://example.org/x.git").key


def test_what_is_recorded_never_holds_an_account_or_a_token() -> None:
    with_token = hubmod.parse("https://alice:s3cret-token@example.com/x.git")
    kept = with_token.recordable
    assert "alice" not in kept and "s3cret" not in kept and kept == "https://example.com/x.git"
    assert hubmod.parse("git://127.0.0.1:9418/hub.git").recordable == "git://127.0.0.1:9418/hub.git"


def test_the_recorded_hub_is_used_and_another_in_the_environment_refused(
        memory: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mem = open_memory(memory)
    assert mem.config.remote is not None  # the first push recorded the embedded hub
    own = hubbind.resolve_for(mem.config, mem.git, None)
    assert own.key == hubmod.parse(str(hub_path())).key
    monkeypatch.setenv("MEMSYNC_REMOTE", str(hub_path()))  # the same hub, spelled as a variable
    assert hubbind.resolve_for(mem.config, mem.git, None).key == own.key
    other = make_bare_hub(tmp_path / "other.git")
    monkeypatch.setenv("MEMSYNC_REMOTE", str(other))
    with pytest.raises(hubbind.HubChanged) as refused:
        hubbind.resolve_for(mem.config, mem.git, None)
    assert "MEMSYNC_REMOTE" in str(refused.value) and "unset MEMSYNC_REMOTE" in (refused.value.hint or "")


def test_an_explicit_remote_is_a_mirror_and_never_refused(memory: Path, tmp_path: Path) -> None:
    mem = open_memory(memory)
    mirror = make_bare_hub(tmp_path / "mirror.git")
    chosen = hubbind.resolve_for(mem.config, mem.git, str(mirror))
    assert chosen.local_path is not None and chosen.local_path.resolve() == mirror.resolve()


def test_an_unrecorded_memory_is_held_to_the_hub_it_exchanged_with(
        memory: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = memory / ".vm0" / "storage.yaml"
    config.write_text("".join(line for line in config.read_text().splitlines(True)
                              if not line.startswith("remote:")))  # as an older memsync left it
    mem = open_memory(memory)
    assert mem.config.remote is None
    earlier = hubbind.came_from(mem.git, mem.config.hub_branch)
    assert earlier is not None and earlier.key == hubmod.parse(str(hub_path())).key
    assert hubbind.resolve_for(mem.config, mem.git, None) is not None  # the same hub: allowed
    monkeypatch.setenv("MEMSYNC_REMOTE", str(make_bare_hub(tmp_path / "elsewhere.git")))
    with pytest.raises(hubbind.HubChanged, match="belongs to the hub"):
        hubbind.resolve_for(mem.config, mem.git, None)
    monkeypatch.delenv("MEMSYNC_REMOTE")
    own = hubbind.resolve_for(mem.config, mem.git, None)
    hubbind.record(memory, mem.config, mem.git, own)  # it exchanged already: nothing recorded
    assert "remote:" not in config.read_text()


def test_an_origin_memsync_did_not_set_is_no_evidence(memory: Path) -> None:
    config = memory / ".vm0" / "storage.yaml"
    config.write_text("".join(line for line in config.read_text().splitlines(True)
                              if not line.startswith("remote:")))
    mem = open_memory(memory)
    git_config = memory / ".git" / "config"
    git_config.write_text(git_config.read_text().replace("managed", "by-hand"))
    assert hubbind.came_from(mem.git, mem.config.hub_branch) is None


def test_the_first_push_records_the_hub_it_goes_to(tmp_path: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "fresh"
    root.mkdir()
    assert cli("init", "--name", "fresh", cwd=root).code == 0
    config = root / ".vm0" / "storage.yaml"
    assert "remote:" not in config.read_text()
    target = make_bare_hub(tmp_path / "target.git")
    monkeypatch.setenv("MEMSYNC_REMOTE", str(target))
    mem = open_memory(root)
    hubbind.record(root, mem.config, mem.git, hubbind.resolve_for(mem.config, mem.git, None))
    assert f"remote: {target}\n" in config.read_text() and mem.config.remote == str(target)
    before = config.read_text()
    hubbind.record(root, mem.config, mem.git, hubbind.resolve_for(mem.config, mem.git, None))  # recorded once
    assert config.read_text() == before
