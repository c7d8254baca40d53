"""`secrets: warn|block|off` end to end: push and run, what is committed, printed and kept.

Secret-shaped values are assembled at runtime so this file itself holds nothing a scanner flags.
"""

from __future__ import annotations

import os
import random
import sys
from pathlib import Path

import pytest

from memsync.secrets import scan_bytes
from tests.conftest import git, hub_tree, memsync_cmd, write

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
def test_warn_names_file_and_line_and_commits(memory: Path, cli, policy: str | None) -> None:  # type: ignore[no-untyped-def]
    set_policy(memory, policy)
    write(memory, "notes.md", NOTES)
    r = cli("push", cwd=memory)
    assert r.code == 0, r.err
    assert "notes.md:4" in r.err and "github-token" in r.err and "committed" in r.err
    assert TOKEN not in r.out + r.err
    assert TOKEN[4:12] not in r.out + r.err  # not even a slice of the random part
    assert hub_tree()["notes.md"] == NOTES.encode()


def test_block_keeps_the_file_out_and_on_disk(memory: Path, cli) -> None:  # type: ignore[no-untyped-def]
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


def test_block_then_fix_commits_the_cleaned_file(memory: Path, cli) -> None:  # type: ignore[no-untyped-def]
    set_policy(memory, "block")
    write(memory, "notes.md", NOTES)
    assert cli("push", cwd=memory).code == 9
    write(memory, "notes.md", NOTES.replace(TOKEN, "$GITHUB_TOKEN"))
    r = cli("push", cwd=memory)
    assert r.code == 0, r.err
    assert hub_tree()["notes.md"] == NOTES.replace(TOKEN, "$GITHUB_TOKEN").encode()


def test_off_commits_silently(memory: Path, cli) -> None:  # type: ignore[no-untyped-def]
    set_policy(memory, "off")
    write(memory, "notes.md", NOTES)
    r = cli("push", cwd=memory)
    assert r.code == 0, r.err
    assert "secret" not in r.err
    assert hub_tree()["notes.md"] == NOTES.encode()


def test_bad_policy_is_a_config_error(memory: Path, cli) -> None:  # type: ignore[no-untyped-def]
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
        assert "secret" not in proc.stderr
