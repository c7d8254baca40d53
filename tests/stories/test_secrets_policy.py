"""`secrets: warn|block|off` end to end: push and run, what is committed, printed and kept.

Secret-shaped values are assembled at runtime so this file itself holds nothing a scanner flags.
"""

from __future__ import annotations

import os
import random
import sys
from pathlib import Path

import pytest

from memsync.checks.secrets import scan_bytes
from tests.conftest import Cli, git, hub_path, hub_tree, memsync_cmd, write
from tests.helpers.figures import Figures, figures

__all__ = ["figures"]

_rng = random.Random(5)
TOKEN = "gh" + "p_" + "".join(_rng.choice("abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789")
                              for _ in range(36))
NOTES = f"# Notes\n\nthe deploy works now\nGITHUB_TOKEN={TOKEN}\nmore notes\n"


def set_policy(root: Path, policy: str | None) -> None:
    cfg = root / ".vm0" / "storage.yaml"
    text = "".join(line for line in cfg.read_text().splitlines(keepends=True) if not line.startswith("secrets:"))
    cfg.write_text(text + (f"secrets: {policy}\n" if policy else ""))


def test_token_is_detected_by_the_scanner() -> None:
    assert [f.rule for f in scan_bytes("notes.md", NOTES.encode())] == ["github-token"]


@pytest.mark.parametrize("policy", [None, "warn"])
def test_warn_names_file_and_line_and_commits(memory: Path, cli: Cli, policy: str | None) -> None:
    set_policy(memory, policy)
    write(memory, "notes.md", NOTES)
    r = cli("push", cwd=memory)
    assert r.code == 0, r.err
    assert "notes.md:4" in r.err and "github-token" in r.err and "committed" in r.err
    assert TOKEN not in r.out + r.err
    assert TOKEN[4:12] not in r.out + r.err  # not even a slice of the random part
    assert hub_tree()["notes.md"] == NOTES.encode()


def test_block_keeps_the_file_out_and_on_disk(memory: Path, cli: Cli) -> None:
    set_policy(memory, "block")
    write(memory, "notes.md", NOTES)
    write(memory, "clean.md", "nothing secret\n")
    r = cli("push", cwd=memory)
    assert r.code == 9, (r.code, r.err)
    assert "notes.md:4" in r.err and "kept out of the commit" in r.err
    assert TOKEN not in r.out + r.err
    tree = hub_tree()
    assert "notes.md" not in tree and tree["clean.md"] == b"nothing secret\n"
    assert (memory / "notes.md").read_text() == NOTES  # nothing lost locally
    assert "notes.md" not in git("ls-tree", "-r", "--name-only", "HEAD", cwd=memory)
    assert TOKEN not in git("log", "-p", "--all", cwd=memory)


def test_block_then_fix_commits_the_cleaned_file(memory: Path, cli: Cli) -> None:
    set_policy(memory, "block")
    write(memory, "notes.md", NOTES)
    assert cli("push", cwd=memory).code == 9
    write(memory, "notes.md", NOTES.replace(TOKEN, "$GITHUB_TOKEN"))
    r = cli("push", cwd=memory)
    assert r.code == 0, r.err
    assert hub_tree()["notes.md"] == NOTES.replace(TOKEN, "$GITHUB_TOKEN").encode()


def test_off_commits_silently(memory: Path, cli: Cli) -> None:
    set_policy(memory, "off")
    write(memory, "notes.md", NOTES)
    r = cli("push", cwd=memory)
    assert r.code == 0, r.err
    assert "possible secret" not in r.err
    assert hub_tree()["notes.md"] == NOTES.encode()


def test_bad_policy_is_a_config_error(memory: Path, cli: Cli) -> None:
    set_policy(memory, "maybe")
    write(memory, "notes.md", "x\n")
    r = cli("push", cwd=memory)
    assert r.code == 3 and "secrets" in r.err


AGENT = """\
import os, pathlib
mem = pathlib.Path(os.environ["MEMSYNC_MEMORY_DIR"])
(mem / "notes.md").write_text(os.environ["NOTES"])
(mem / "runs").mkdir(exist_ok=True)
(mem / "runs" / (os.environ["MEMSYNC_RUN_ID"] + ".md")).write_text("ran\\n")
"""


@pytest.mark.parametrize(("policy", "code", "committed"), [("warn", 0, True), ("block", 9, False),
                                                          ("off", 0, True)])
@pytest.mark.slow
def test_run_applies_the_policy(memory: Path, tmp_path: Path, policy: str, code: int, committed: bool) -> None:
    set_policy(memory, policy)
    agent = tmp_path / "agent.py"
    agent.write_text(AGENT)
    env = dict(os.environ, NOTES=NOTES)
    proc = memsync_cmd("run", "--run-id", f"r-{policy}", "--", sys.executable, str(agent), cwd=memory, env=env)
    assert proc.returncode == code, proc.stderr
    assert TOKEN not in proc.stdout + proc.stderr
    tree = hub_tree()
    assert tree["runs/r-" + policy + ".md"] == b"ran\n"  # the rest of the run is pushed either way
    assert ("notes.md" in tree) is committed
    assert (memory / "notes.md").read_text() == NOTES
    if policy != "off":
        assert "notes.md:4" in proc.stderr and "github-token" in proc.stderr
    else:
        assert "possible secret" not in proc.stderr


# --------------------------------------------------------------------------
# `secrets: block` blocks whatever form the secret takes: every way to smuggle one into a commit.

def _binary(token: str) -> bytes:
    return b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) + token.encode() + b"\x00" * 16


SMUGGLED: list[tuple[str, str, bytes]] = [
    # (case, path, content)
    ("utf-16le-bom", "notes.md", NOTES.encode("utf-16")),
    ("utf-16le-no-bom", "notes.md", NOTES.encode("utf-16-le")),
    ("utf-16be", "notes.md", NOTES.encode("utf-16-be")),
    ("utf-32", "notes.md", NOTES.encode("utf-32")),
    ("binary-with-nul", "shot.png", _binary(TOKEN)),
    ("utf-16-inside-binary", "app.db", b"\x00\x01\x02\x03" * 64 + ("token=" + TOKEN).encode("utf-16-le") + b"\x00" * 8),
    ("above-old-scan-size", "big.log", b"x" * 79 + b"\n" + b"y" * 79 * 1024 * 80 + b"\n" + NOTES.encode()),
    ("token-as-file-name", f"keys/{TOKEN}.md", b"harmless\n"),
]


@pytest.mark.parametrize(("path", "data"), [pytest.param(p, d, id=c) for c, p, d in SMUGGLED])
@pytest.mark.slow
def test_block_refuses_every_form_of_the_secret(memory: Path, cli: Cli, path: str, data: bytes,
                                                figures: Figures) -> None:
    figures.add("security attacks")
    set_policy(memory, "block")
    write(memory, path, data)
    write(memory, "clean.md", "nothing secret\n")
    r = cli("push", cwd=memory)
    assert r.code == 9, (r.code, r.err)
    assert "kept out of the commit" in r.err and "github-token" in r.err
    assert TOKEN not in r.out + r.err and TOKEN[4:12] not in r.out + r.err
    tree = hub_tree()
    assert path not in tree and tree["clean.md"] == b"nothing secret\n"
    assert TOKEN not in git("log", "-p", "--all", "--format=%B", cwd=memory)
    assert (memory / path).read_bytes() == data  # nothing lost locally
    figures.add("security attacks refused")


def test_block_refuses_a_symlink_whose_target_is_the_secret(memory: Path, cli: Cli, figures: Figures) -> None:
    figures.add("security attacks")
    set_policy(memory, "block")
    os.symlink(f"/tmp/{TOKEN}", memory / "link")
    r = cli("push", cwd=memory)
    assert r.code == 9, (r.code, r.err)
    assert "link" in r.err and "github-token" in r.err and TOKEN not in r.out + r.err
    assert "link" not in hub_tree()
    assert os.readlink(memory / "link") == f"/tmp/{TOKEN}"
    figures.add("security attacks refused")


def test_a_secret_file_name_is_shown_redacted_and_never_committed(memory: Path, cli: Cli) -> None:
    set_policy(memory, "warn")
    write(memory, f"{TOKEN}.md", "notes\n")
    r = cli("push", cwd=memory)
    assert r.code == 0, r.err
    assert "in the file name <redacted>.md" in r.err and TOKEN not in r.out + r.err


@pytest.mark.slow
def test_watch_once_exits_9_when_it_kept_a_file_out(memory: Path) -> None:
    set_policy(memory, "block")
    write(memory, "notes.md", NOTES)
    write(memory, "clean.md", "nothing secret\n")
    proc = memsync_cmd("watch", "--once", cwd=memory)
    assert proc.returncode == 9, proc.stderr
    assert "notes.md" in proc.stderr and "kept out of the commit" in proc.stderr and TOKEN not in proc.stderr
    tree = hub_tree()
    assert "notes.md" not in tree and tree["clean.md"] == b"nothing secret\n"


_PW = "Zq8" + "".join(_rng.choice("abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789") for _ in range(14))
WRITE_NOTE = "import os, pathlib; pathlib.Path(os.environ['MEMSYNC_MEMORY_DIR'], 'ran.md').write_text('ran')"
_RUN_COMMANDS: list[tuple[str, list[str]]] = [
    ("option-value", ["--token", _PW]),
    ("option-equals", [f"--api-key={_PW}"]),
    ("password-option", ["--password", _PW]),
    ("mysql-attached", ["mysql", "-uroot", f"-p{_PW}"]),
    ("curl-user", ["curl", "-u", f"deploy:{_PW}"]),
    ("bearer-header", ["-H", f"Authorization: Bearer {_PW}"]),
    ("url-userinfo", [f"https://deploy:{_PW}@git.example.org/r.git"]),
    ("env-assignment", [f"DB_PASSWORD={_PW}"]),
    ("known-token", [TOKEN]),
    ("shell-script", [f"curl --token {_PW} -H 'Authorization: Bearer {_PW}' https://x && TOKEN={_PW} ./go"]),
]


@pytest.mark.parametrize("args", [pytest.param(a, id=c) for c, a in _RUN_COMMANDS])
@pytest.mark.slow
def test_the_recorded_command_never_holds_the_credential(memory: Path, args: list[str],
                                                         figures: Figures) -> None:
    figures.add("security attacks")
    proc = memsync_cmd("run", "--run-id", "cmd", "--", sys.executable, "-c", WRITE_NOTE, *args, cwd=memory)
    assert proc.returncode == 0, proc.stderr
    secret = TOKEN if args == [TOKEN] else _PW
    history = git("log", "--format=%B", "memory/research", cwd=hub_path())
    assert "Memsync-Command:" in history and "import os, pathlib" in history  # recorded, readable
    assert secret not in history and secret not in proc.stdout + proc.stderr
    figures.add("security attacks refused")


def test_a_too_big_file_named_with_a_token_is_reported_redacted(memory: Path, cli: Cli) -> None:
    set_policy(memory, "block")
    cfg = memory / ".vm0" / "storage.yaml"
    cfg.write_text(cfg.read_text() + "max_file_size: 1KiB\n")
    write(memory, f"{TOKEN}.bin", b"x" * 4096)
    r = cli("push", cwd=memory)
    assert "not committed: <redacted>.bin" in r.err, r.err
    assert TOKEN not in r.out + r.err
    assert f"{TOKEN}.bin" not in hub_tree()
