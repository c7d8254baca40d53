"""Text from a hostile hub never reaches the terminal raw (issue 15: "hub-supplied text is shown
safely"): file names, commit trailers and server messages holding terminal escapes, CR, BEL,
backspace, C1 controls and bidi overrides are shown escaped as git quotes them, and --json keeps
the exact data.

The hostile version is made with plain git, as anyone with write access to the hub can.
"""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import git, hub_path, memsync_cmd, write
from tests.helpers.figures import Figures, figures
from tests.helpers.servers import GitDaemon, make_bare_hub

pytestmark = pytest.mark.attack
__all__ = ["figures"]

# ESC sequences (colour, window title), BEL, CR, backspace, a one-character CSI (U+009B), and
# bidi overrides/isolates that make text read differently from what it is
EVIL = "\x1b[31mred\x1b]0;pwned\x07\r\x08\x9b2J\u202eevil\u2066"
RAW = ("\x1b", "\r", "\x07", "\x08", "\x9b", "\u202e", "\u2066")
EVIL_FILE = f"notes-{EVIL}.md"
MARKUP_FILE = "[red]x[/red][link=https:evil.example]y[/link].md"
EVIL_LINE = EVIL.replace("\r", "")  # a CR would end a trailer line (then no trailers are read at all)
EVIL_RUN = f"run-\x1b[2J\x1b[H{EVIL_LINE}"


def assert_safe(what: str, text: str) -> None:
    found = [repr(ch) for ch in RAW if ch in text]
    assert not found, f"{what}: raw {', '.join(found)} reached the terminal:\n{text!r}"


def hostile_version(tmp_path: Path, *, base_branch: str = "memory/research") -> str:
    """Push, with plain git, a version whose names, trailers and author are hostile."""
    work = tmp_path / "evil-work"
    git("clone", "-q", "-b", base_branch, str(hub_path()), str(work), cwd=tmp_path)
    write(work, EVIL_FILE, "x" * 4000 + "\n")
    write(work, MARKUP_FILE, "markup\n")
    write(work, "summary.md", "shrunk\n")
    git("add", "-A", cwd=work)
    tree = git("write-tree", cwd=work).strip()
    parent = git("rev-parse", "HEAD", cwd=work).strip()
    message = (f"Update {EVIL}\n\nMemsync-Actor: run\nMemsync-Run-Id: {EVIL_RUN}\n"
               f"Memsync-Exit-Code: 0\nMemsync-Command: {EVIL_LINE}\n"
               f"Memsync-Flag: shrink {EVIL_LINE} 100->1\nMemsync-Policy: {EVIL_LINE}\n")
    env = dict(os.environ, GIT_AUTHOR_NAME=f"ev{EVIL}il", GIT_AUTHOR_EMAIL="evil@hub",
               GIT_COMMITTER_NAME="evil", GIT_COMMITTER_EMAIL="evil@hub")
    oid = subprocess.run(["git", "commit-tree", tree, "-p", parent, "-F", "-"], cwd=work, input=message,
                         env=env, capture_output=True, text=True, check=True).stdout.strip()
    git("push", "-q", "origin", f"{oid}:refs/heads/{base_branch}", cwd=work)
    return oid


def test_hostile_names_and_trailers_are_escaped_everywhere(memory: Path, tmp_path: Path,
                                                           figures: Figures) -> None:
    evil = hostile_version(tmp_path)
    outputs: dict[str, subprocess.CompletedProcess[str]] = {}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        proc = memsync_cmd(*args, cwd=memory)
        key = " ".join(args)
        outputs[key if key not in outputs else f"{key} (again)"] = proc
        return proc

    # a local edit of the hostile file's sibling and an untracked hostile name for `status`
    write(memory, f"local-{EVIL}.md", "mine\n")
    assert run("pull").returncode == 0, outputs["pull"].stderr
    assert run("log").returncode == 0
    assert run("log", "--flagged").returncode == 0
    assert run("log", EVIL_FILE).returncode == 0
    assert run("log", "--run", EVIL_RUN).returncode == 0
    write(memory, f"untracked-{EVIL}.md", "new\n")
    assert run("status").returncode == 0
    assert run("diff", "--stat", evil).returncode == 0
    assert run("diff", evil).returncode == 0
    assert run("list").returncode == 0
    assert run("restore", EVIL_FILE, "--at", evil).returncode == 0  # already as at: a message naming it
    (memory / EVIL_FILE).write_text("changed locally\n")
    assert run("push").returncode == 0, outputs["push"].stderr
    assert run("restore", EVIL_FILE, "--at", evil).returncode == 0
    assert run("revert", evil).returncode == 0
    for what, proc in outputs.items():
        figures.add("security attacks")
        assert_safe(f"`memsync {what}` stdout", proc.stdout)
        assert_safe(f"`memsync {what}` stderr", proc.stderr)
        figures.add("security attacks refused")
    # shown escaped as git quotes them, not dropped
    quoted = '"notes-\\033[31mred\\033]0;pwned\\a\\r\\b\\302\\2332J\\342\\200\\256evil\\342\\201\\246.md"'
    assert len(outputs[f"log {EVIL_FILE}"].stdout.splitlines()) >= 1  # its versions, listed
    assert f"Already as at {evil[:8]}" in outputs[f"restore {EVIL_FILE} --at {evil}"].stdout
    assert quoted in outputs[f"restore {EVIL_FILE} --at {evil} (again)"].stdout
    assert quoted in outputs[f"diff --stat {evil}"].stdout
    assert "run-\\033[2J\\033[H\\033[31mred" in outputs["log"].stdout
    assert "run-\\033[2J" in outputs["status"].stdout and "run-\\033[2J" in outputs["list"].stdout
    assert '"untracked-\\033[31mred' in outputs["status"].stdout
    assert "FLAG shrink \\033[31mred" in outputs["log --flagged"].stdout
    assert MARKUP_FILE in outputs[f"diff --stat {evil}"].stdout
    # --json stays exact data (JSON escaping is already safe)
    log = memsync_cmd("log", "--json", cwd=memory)
    assert_safe("log --json", log.stdout)
    assert EVIL_RUN in {v["run_id"] for v in json.loads(log.stdout)["versions"]}
    status = memsync_cmd("status", "--json", cwd=memory)
    assert json.loads(status.stdout)["last_run"]["run_id"] == EVIL_RUN


def test_conflict_reports_quote_hostile_paths(memory: Path, tmp_path: Path, figures: Figures) -> None:
    figures.add("security attacks")
    hostile_version(tmp_path)
    assert memsync_cmd("pull", cwd=memory).returncode == 0
    work = tmp_path / "evil-work"
    git("pull", "-q", cwd=work)
    (work / EVIL_FILE).write_text("theirs\n")
    git("-c", "user.name=evil", "-c", "user.email=e@h", "commit", "-qam", "theirs", cwd=work)
    git("push", "-q", "origin", "HEAD:memory/research", cwd=work)
    (memory / EVIL_FILE).write_text("ours\n")
    proc = memsync_cmd("push", cwd=memory)
    assert proc.returncode == 0, proc.stderr
    assert "conflict in \"notes-\\033[31mred" in proc.stderr
    assert_safe("push stderr", proc.stderr)
    assert_safe("push stdout", proc.stdout)
    status = memsync_cmd("status", cwd=memory)
    assert_safe("status", status.stdout)
    assert "Conflicts: 1 version from other writers to fold, in 1 file" in status.stdout
    assert "notes-\\033[31mred" in status.stdout  # the gathered file is named, quoted
    figures.add("security attacks refused")


def test_a_terminal_gets_no_escapes_and_no_markup(memory: Path, tmp_path: Path, figures: Figures) -> None:
    """On a terminal, rich draws the log: hub text goes in as plain Text, never as markup."""
    figures.add("security attacks")
    evil = hostile_version(tmp_path)
    assert memsync_cmd("pull", cwd=memory).returncode == 0
    shown = {}
    for args in (["log"], ["diff", "--stat", evil], ["diff", evil]):
        shown[args[0] + " ".join(args[1:2])] = _on_a_terminal(args, memory)
    for what, text in shown.items():
        assert_safe(f"{what} on a terminal", text)
    assert "run-\\033[2J" in shown["log"]
    assert MARKUP_FILE in shown["diff--stat"]
    figures.add("security attacks refused")


def _on_a_terminal(args: list[str], cwd: Path) -> str:
    """stdout of `memsync ARGS` on a pseudo-terminal; TERM=dumb so rich adds no colours of its
    own (any ESC seen then came from the hub)."""
    leader, follower = pty.openpty()
    env = dict(os.environ, TERM="dumb", COLUMNS="400")
    env.pop("NO_COLOR", None)
    proc = subprocess.Popen([sys.executable, "-m", "memsync", *args], cwd=cwd, env=env,
                            stdin=subprocess.DEVNULL, stdout=follower, stderr=subprocess.PIPE)
    os.close(follower)
    chunks: list[bytes] = []
    while True:
        ready, _, _ = select.select([leader], [], [], 30)
        if not ready:
            break
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    assert proc.wait(timeout=30) == 0, proc.stderr.read() if proc.stderr else ""
    return b"".join(chunks).decode("utf-8", "replace").replace("\r\n", "\n")


def test_server_messages_on_the_sideband_are_escaped(git_daemon: GitDaemon, tmp_path: Path,
                                                     figures: Figures) -> None:
    """A hook's output ("remote: ...") is the hub's text too: shown escaped when it refuses."""
    figures.add("security attacks")
    bare = make_bare_hub(git_daemon.base_path / "hub.git")
    root = tmp_path / "research"
    root.mkdir()
    assert memsync_cmd("init", "--name", "research", "--remote", git_daemon.url("hub.git"), cwd=root).returncode == 0
    write(root, "a.md", "a\n")
    assert memsync_cmd("push", cwd=root).returncode == 0
    hook = bare / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\ncat >/dev/null\n"
                    "printf 'ok\\033[2J\\033]0;pwned\\007\\rfake: pushed\\010\\302\\233\\342\\200\\256\\n' >&2\n"
                    "exit 1\n")
    hook.chmod(0o755)
    write(root, "b.md", "b\n")
    proc = memsync_cmd("push", cwd=root)
    assert proc.returncode == 5, proc.stderr
    assert "ok\\033[2J\\033]0;pwned\\a" in proc.stderr  # shown, escaped
    assert_safe("push stderr", proc.stderr)
    assert_safe("push stdout", proc.stdout)
    assert len([line for line in proc.stderr.splitlines() if line.startswith("error:")]) == 1
    figures.add("security attacks refused")


def test_paths_are_quoted_as_git_quotes_them(tmp_path: Path) -> None:
    """Byte for byte what `git ls-files` prints (core.quotePath=false) for names with controls,
    quotes and backslashes; C1 controls and bidi overrides, which git leaves alone, are quoted too."""
    from memsync.util.textsafe import clean, display_path

    repo = tmp_path / "names"
    repo.mkdir()
    git("init", "-q", cwd=repo)
    names = ["plain.md", "café.md", "tab\there", "esc\x1b[31m", 'quote"d', "back\\slash", "bell\x07\r\x08\x7f"]
    for name in names:
        (repo / name).write_text("x")
    git("add", "-A", cwd=repo)
    shown = git("-c", "core.quotePath=false", "ls-files", cwd=repo).splitlines()
    assert sorted(display_path(n) for n in names) == sorted(shown)
    assert display_path("a\x9bb\u202ec\u2066") == '"a\\302\\233b\\342\\200\\256c\\342\\201\\246"'
    assert clean("run\x1b]0;x\x07") == "run\\033]0;x\\a" and clean("[red]ok[/red]") == "[red]ok[/red]"
