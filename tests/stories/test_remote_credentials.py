"""A credential written into a hub URL never reaches storage.yaml, .git/config or any output, for
every URL shape (https://, ssh://, scp-style user:password@host:path); on memsync's command line
(`--remote`) it is refused outright, as `run` refuses it (issue 21, part 6)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from memsync.git import hub as hubmod
from tests.conftest import Cli

pytestmark = pytest.mark.slow

SECRET = "pw" + "Zq7Lk2" * 4  # not a placeholder, long enough to be unmistakable

# `.invalid` never resolves: a command that reaches the network fails fast, without a server
CREDENTIAL_URLS = {
    "https token": f"https://bot:{SECRET}@git.example.invalid/hub.git",
    "https bare token": f"https://{SECRET}@git.example.invalid/hub.git",
    "ssh password": f"ssh://me:{SECRET}@git.example.invalid/srv/hub.git",
    "ssh password and port": f"ssh://me:{SECRET}@git.example.invalid:2222/srv/hub.git",
    "scp password": f"me:{SECRET}@git.example.invalid:srv/hub.git",
}


def _everything_under(root: Path) -> bytes:
    data = b""
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            data += path.read_bytes()
    return data


@pytest.mark.parametrize("shape", sorted(CREDENTIAL_URLS))
def test_parse_splits_the_credential_off_every_shape(shape: str) -> None:
    hub = hubmod.parse(CREDENTIAL_URLS[shape])
    assert hub.password == SECRET
    assert SECRET not in hub.url and SECRET not in hub.display and SECRET not in repr(hub)
    assert SECRET not in hubmod.safe_url(CREDENTIAL_URLS[shape])
    assert hub.kind == ("http" if shape.startswith("https") else "ssh")


def test_scp_urls_without_a_password_stay_as_written() -> None:
    for url in ("git@github.com:acme/memory.git", "box:hubs/memory.git"):
        hub = hubmod.parse(url)
        assert (hub.url, hub.kind, hub.password) == (url, "ssh", None)
        assert hubmod.safe_url(url) == url
    assert hubmod.parse("ssh://git@host/x.git").password is None  # a bare ssh user is not a secret
    assert hubmod.safe_url(f"me:{SECRET}@host:x.git") == "me:***@host:x.git"


def _verb_cases(tmp_path: Path, cli: Cli) -> list[tuple[list[str], Path]]:
    memory = tmp_path / "existing"
    memory.mkdir()
    assert cli("init", "--name", "existing", cwd=memory).code == 0
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    return [(["init", "--name", "fresh"], fresh), (["push"], memory), (["pull"], memory),
            (["status"], memory), (["clone", "research", str(tmp_path / "laptop")], tmp_path),
            (["list"], tmp_path), (["pull", "research"], tmp_path), (["gc"], memory),
            (["hooks", "install", "claude-code"], tmp_path), (["run", "--", "true"], memory)]


@pytest.mark.parametrize("shape", sorted(CREDENTIAL_URLS))
def test_a_credential_in_remote_is_refused_by_every_verb(shape: str, tmp_path: Path, cli: Cli) -> None:
    url = CREDENTIAL_URLS[shape]
    for args, cwd in _verb_cases(tmp_path, cli):
        before = _everything_under(tmp_path)
        at = args.index("--") if "--" in args else len(args)  # options before `run`'s command
        proc = cli(*args[:at], "--remote", url, *args[at:], cwd=cwd)
        verb = " ".join(args[:2])
        assert proc.code == 2, (verb, proc.err)
        lines = proc.err.strip().splitlines()
        assert lines[0].startswith("error: --remote ") and "credential on memsync's command line" in lines[0], verb
        assert lines[1].startswith("hint: set MEMSYNC_TOKEN"), verb
        assert "Traceback" not in proc.err
        assert SECRET not in proc.out + proc.err, verb
        assert _everything_under(tmp_path) == before, f"{verb} wrote something before refusing"
    assert SECRET.encode() not in _everything_under(Path(os.environ["MEMSYNC_HOME"]).parent)


@pytest.mark.parametrize("shape", ["scp password", "ssh password and port"])
def test_an_ssh_password_from_the_environment_is_never_stored_or_shown(
        shape: str, tmp_path: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMSYNC_REMOTE", CREDENTIAL_URLS[shape])
    root = tmp_path / "research"
    root.mkdir()
    init = cli("init", cwd=root)
    assert init.code == 0, init.err
    (root / "notes.md").write_text("notes\n")
    shown = [init.out + init.err]
    for args, cwd in ((["push"], root), (["status"], root), (["list"], tmp_path),
                      (["clone", "research", str(tmp_path / "laptop")], tmp_path)):
        r = cli(*args, cwd=cwd)
        assert r.code == 4 or args == ["status"], (args, r.err)  # the host does not resolve
        shown.append(r.out + r.err)
    assert "git.example.invalid" in "".join(shown)  # the hub is named, its password is not
    assert SECRET not in "".join(shown)
    assert SECRET.encode() not in _everything_under(tmp_path)
    assert b"git.example.invalid" in (root / ".git" / "config").read_bytes()


def test_a_user_name_in_remote_is_one_for_run_as_for_every_verb(tmp_path: Path, cli: Cli,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """With MEMSYNC_TOKEN set, `https://NAME@host` names a user (git/hub.from_flag): `run` reads
    it as clone does, instead of refusing it as a credential on the command line."""
    monkeypatch.setenv("MEMSYNC_TOKEN", SECRET)
    memory = tmp_path / "existing"
    memory.mkdir()
    assert cli("init", "--name", "existing", cwd=memory).code == 0
    url = "https://bot@git.example.invalid/hub.git"
    proc = cli("run", "--offline", "--no-push", "--remote", url, "--", "true", cwd=memory)
    assert proc.code == 0, proc.err
    assert "credential" not in proc.err and SECRET not in proc.out + proc.err
    monkeypatch.delenv("MEMSYNC_TOKEN")  # without a token, the same name is a bare token: refused
    proc = cli("run", "--offline", "--no-push", "--remote", url, "--", "true", cwd=memory)
    assert proc.code == 2 and "credential on memsync's command line" in proc.err
