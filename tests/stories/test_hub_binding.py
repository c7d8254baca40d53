"""A memory never changes hub silently: it remembers the hub it was cloned from or first pushed
to, however that hub was given, and a command that would use another one is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import Cli, git, hub_path, write
from tests.helpers.servers import make_bare_hub


def _branches(bare: Path) -> list[str]:
    if not bare.exists():
        return []
    return git("for-each-ref", "--format=%(refname)", "refs/heads/", cwd=bare).split()


@pytest.fixture
def real_hub(tmp_path: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A hub holding the memory `research`, given only through MEMSYNC_REMOTE (now unset)."""
    bare = make_bare_hub(tmp_path / "real.git")
    monkeypatch.setenv("MEMSYNC_REMOTE", str(bare))
    seed = tmp_path / "seed"
    seed.mkdir()
    assert cli("init", "--name", "research", cwd=seed).code == 0
    write(seed, "notes.md", "seed\n")
    assert cli("push", cwd=seed).code == 0
    monkeypatch.delenv("MEMSYNC_REMOTE")
    return bare


def test_a_memory_cloned_through_the_environment_keeps_pushing_there(
        cli: Cli, tmp_path: Path, real_hub: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMSYNC_REMOTE", str(real_hub))
    assert cli("clone", "research", str(tmp_path / "laptop"), cwd=tmp_path).code == 0
    monkeypatch.delenv("MEMSYNC_REMOTE")  # a new shell without the variable
    laptop = tmp_path / "laptop"
    assert f"remote: {real_hub}" in (laptop / ".vm0" / "storage.yaml").read_text()
    write(laptop, "notes.md", "seed\nedited on the laptop\n")
    r = cli("push", cwd=laptop)
    assert r.code == 0, r.err
    assert git("show", "memory/research:notes.md", cwd=real_hub).endswith("edited on the laptop\n")
    assert "refs/heads/memory/research" not in _branches(hub_path())  # no fork on the embedded hub
    r = cli("status", cwd=laptop)
    assert "not pushed yet" not in r.out


def test_the_first_push_records_the_hub_it_went_to(cli: Cli, tmp_path: Path, real_hub: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "fresh"
    root.mkdir()
    assert cli("init", "--name", "fresh", cwd=root).code == 0
    monkeypatch.setenv("MEMSYNC_REMOTE", str(real_hub))
    assert cli("push", cwd=root).code == 0
    monkeypatch.delenv("MEMSYNC_REMOTE")
    assert f"remote: {real_hub}" in (root / ".vm0" / "storage.yaml").read_text()
    write(root, "later.md", "later\n")
    assert cli("push", cwd=root).code == 0
    assert git("show", "memory/fresh:later.md", cwd=real_hub) == "later\n"
    assert "refs/heads/memory/fresh" not in _branches(hub_path())


def test_another_hub_in_the_environment_is_refused(cli: Cli, tmp_path: Path, real_hub: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    laptop = tmp_path / "laptop"
    assert cli("clone", "research", str(laptop), "--remote", str(real_hub), cwd=tmp_path).code == 0
    other = make_bare_hub(tmp_path / "other.git")
    monkeypatch.setenv("MEMSYNC_REMOTE", str(other))
    write(laptop, "notes.md", "changed\n")
    for verb in ("push", "pull", "status"):
        r = cli(verb, cwd=laptop)
        assert r.code == 2, (verb, r.out, r.err)
        assert "belongs to the hub" in r.err and str(other) in r.err and "Traceback" not in r.err
        assert "hint:" in r.err and "--remote" in r.err
    assert _branches(other) == []
    assert git("show", "memory/research:notes.md", cwd=real_hub) == "seed\n"
    assert (laptop / "notes.md").read_text() == "changed\n"  # nothing lost


def test_a_mirror_push_is_explicit_and_named(cli: Cli, tmp_path: Path, real_hub: Path) -> None:
    laptop = tmp_path / "laptop"
    assert cli("clone", "research", str(laptop), "--remote", str(real_hub), cwd=tmp_path).code == 0
    mirror = make_bare_hub(tmp_path / "mirror.git")
    before = (laptop / ".vm0" / "storage.yaml").read_text()
    r = cli("push", "--force", "--remote", str(mirror), cwd=laptop)
    assert r.code == 0, r.err
    assert "Mirror push to" in r.out and str(real_hub) in r.out
    assert "refs/heads/memory/research" in _branches(mirror)
    assert (laptop / ".vm0" / "storage.yaml").read_text() == before  # its own hub is unchanged


def test_a_memory_older_versions_left_unrecorded_is_refused_elsewhere(
        cli: Cli, tmp_path: Path, real_hub: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMSYNC_REMOTE", str(real_hub))
    laptop = tmp_path / "laptop"
    assert cli("clone", "research", str(laptop), cwd=tmp_path).code == 0
    cfg = laptop / ".vm0" / "storage.yaml"
    cfg.write_text("".join(line for line in cfg.read_text().splitlines(True) if not line.startswith("remote:")))
    monkeypatch.delenv("MEMSYNC_REMOTE")
    write(laptop, "notes.md", "changed\n")
    r = cli("push", cwd=laptop)
    assert r.code == 2, r.err
    assert str(real_hub) in r.err and "embedded hub" in r.err
    assert "refs/heads/memory/research" not in _branches(hub_path())
    monkeypatch.setenv("MEMSYNC_REMOTE", str(real_hub))  # the hub it came from: fine
    r = cli("push", cwd=laptop)
    assert r.code == 0, r.err
    assert git("show", "memory/research:notes.md", cwd=real_hub) == "changed\n"
    assert "remote:" not in cfg.read_text()  # its storage.yaml is the operator's: not rewritten
    monkeypatch.delenv("MEMSYNC_REMOTE")
    assert cli("push", "--force", cwd=laptop).code == 2  # still refused without it


@pytest.mark.server
def test_a_token_in_memsync_remote_is_used_and_never_recorded(cli: Cli, tmp_path: Path, http_server,  # type: ignore[no-untyped-def]
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    make_bare_hub(http_server.project_root / "hub.git")
    url = http_server.url("hub.git")
    with_token = url.replace("://", f"://{http_server.user}:{http_server.token}@")
    monkeypatch.setenv("MEMSYNC_REMOTE", with_token)
    seed = tmp_path / "seed"
    seed.mkdir()
    assert cli("init", "--name", "research", cwd=seed).code == 0
    write(seed, "notes.md", "seed\n")
    r = cli("push", cwd=seed)
    assert r.code == 0, r.err
    laptop = tmp_path / "laptop"
    r = cli("clone", "research", str(laptop), cwd=tmp_path)
    assert r.code == 0, r.err
    for cfg in (seed / ".vm0" / "storage.yaml", laptop / ".vm0" / "storage.yaml"):
        text = cfg.read_text()
        assert http_server.token not in text and f"{http_server.user}@" not in text
        assert f"remote: {url}" in text
    write(laptop, "notes.md", "seed\nfrom the laptop\n")
    assert cli("push", cwd=laptop).code == 0  # the same hub, with the variable's token
    monkeypatch.delenv("MEMSYNC_REMOTE")  # then the recorded hub, with the token from MEMSYNC_TOKEN
    monkeypatch.setenv("MEMSYNC_TOKEN", http_server.token)
    monkeypatch.setenv("MEMSYNC_USER", http_server.user)
    r = cli("pull", cwd=seed)
    assert r.code == 0, r.err
    assert (seed / "notes.md").read_text() == "seed\nfrom the laptop\n"
