"""The agent inside `memsync run` is untrusted: its own git commands (commit, amend, reset,
checkout, forged trailers), its edits of the policy file and its file names cannot make its work
appear as the operator's, slip past the secret scan, protect policies and guard, or lose versions.

Each attack counts in the reliability figures as "agent attacks" / "agent attacks stopped"."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from memsync.git.trailers import parse, quote_path, unquote_path
from tests.conftest import Cli, git, hub_path, hub_tree, memsync_cmd, write
from tests.helpers.figures import Figures, figures

pytestmark = pytest.mark.attack

__all__ = ["figures"]

TOKEN = "ghp_" + "a1B2c3D4e5" * 3 + "f6G7h8"  # well-formed, fake, built at run time
AGENT_GIT = "git -c user.name=agent -c user.email=agent@sandbox"
FAST = {"MEMSYNC_QUIET": "0.3", "MEMSYNC_SETTLE": "0.2"}
# Shell helper for agents: wait until memsync's next checkpoint has landed on the branch.
WAIT_CHECKPOINT = """
wait_checkpoint() {
  n=$(git rev-list --count HEAD); i=0
  while [ "$(git rev-list --count HEAD)" = "$n" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done
  sleep 0.3
}
"""


def run(memory: Path, rid: str, script: str, *args: str, env: dict[str, str] | None = None
        ) -> subprocess.CompletedProcess[str]:
    return memsync_cmd("run", "--run-id", rid, *args, "--", "sh", "-c", WAIT_CHECKPOINT + script, cwd=memory,
                       env=dict(os.environ, **(env or {})))


def hub_messages(since: str | None = None) -> list[str]:
    span = f"{since}..memory/research" if since else "memory/research"
    out = git("log", "--format=%B%x00", span, cwd=hub_path())
    return [m.strip() for m in out.split("\0") if m.strip()]


def hub_tip() -> str:
    return git("rev-parse", "memory/research", cwd=hub_path()).strip()


def newest(memory: Path) -> dict[str, Any]:
    proc = memsync_cmd("log", "--json", "-n", "1", cwd=memory)
    assert proc.returncode == 0, proc.stderr
    entries = json.loads(proc.stdout)
    entries = entries.get("versions", entries) if isinstance(entries, dict) else entries
    return dict(entries[0])


def attack(figures: Figures) -> None:
    figures.add("agent attacks")


def stopped(figures: Figures) -> None:
    figures.add("agent attacks stopped")


def test_agent_commit_with_a_secret_is_blocked(memory: Path, figures: Figures) -> None:
    attack(figures)
    write(memory, ".vm0/storage.yaml", "name: research\ntype: memory\nsecrets: block\n")
    start = hub_tip()
    proc = run(memory, "sneaky-commit", f"echo 'token {TOKEN}' > notes.md; echo fine > ok.md; "
               f"{AGENT_GIT} add -A && {AGENT_GIT} commit -qm 'my notes'")
    assert proc.returncode == 9, proc.stderr
    assert "agent-commits" not in proc.stdout
    assert "folded" in proc.stderr and "notes.md" in proc.stderr
    assert TOKEN not in git("log", "-p", "--all", cwd=hub_path())
    assert "notes.md" not in hub_tree() and hub_tree()["ok.md"] == b"fine\n"
    assert all("Memsync-Run-Id: sneaky-commit" in m for m in hub_messages(start))
    assert (memory / "notes.md").read_text().startswith("token ")  # kept on disk, never lost
    stopped(figures)


def test_agent_git_add_of_a_blocked_file_does_not_ride_in_the_index(memory: Path, figures: Figures) -> None:
    attack(figures)
    write(memory, ".vm0/storage.yaml", "name: research\ntype: memory\nsecrets: block\n")
    proc = run(memory, "staged-secret", f"echo 'token {TOKEN}' > notes.md; git add notes.md")
    assert proc.returncode == 9, proc.stderr
    assert TOKEN not in git("log", "-p", "--all", cwd=hub_path())
    stopped(figures)


def test_forged_operator_trailer_is_the_runs_and_flagged(memory: Path, figures: Figures) -> None:
    attack(figures)
    start = hub_tip()
    message = "Update memory from the operator\n\nMemsync-Actor: operator\nMemsync-Host: laptop\n"
    proc = run(memory, "forger", f"echo forged > forged.md; {AGENT_GIT} add -A && "
               f"{AGENT_GIT} commit -qm \"$FORGED\"", env={"FORGED": message})
    assert proc.returncode == 0, proc.stderr
    for m in hub_messages(start):
        assert "Memsync-Actor: operator" not in m and "Memsync-Run-Id: forger" in m
    entry = newest(memory)
    assert entry["actor"] == "run" and entry["run_id"] == "forger"
    flags = entry["flags"]
    assert isinstance(flags, list)
    assert any(f.startswith("forged-trailer ") and f.endswith(" Memsync-Actor") for f in flags), flags
    assert any(f.startswith("agent-commits 1 folded ") for f in flags), flags
    assert hub_tree()["forged.md"] == b"forged\n"
    assert git("log", "-1", "--format=%an", "memory/research", cwd=hub_path()).strip() == "memsync run forger"
    # the agent's own commit stays reachable locally, never on the hub
    kept = git("for-each-ref", "--format=%(refname)", "refs/memsync/agent/", cwd=memory).split()
    assert kept and "Memsync-Host: laptop" in git("log", "-1", "--format=%B", kept[0], cwd=memory)
    stopped(figures)


def test_amended_checkpoint_loses_nothing_and_is_the_runs(memory: Path, figures: Figures) -> None:
    attack(figures)
    start = hub_tip()
    script = (f"echo one > one.md; wait_checkpoint; echo two > two.md; {AGENT_GIT} add -A; "
              f"{AGENT_GIT} commit -q --amend -m \"$FORGED\"")
    proc = run(memory, "amender", script, "--checkpoint", "1",
               env=dict(FAST, FORGED="Checkpoint\n\nMemsync-Actor: operator\n"))
    assert proc.returncode == 0, proc.stderr
    checkpoints = [m for m in hub_messages(start) if "Memsync-Checkpoint: 1" in m]
    assert checkpoints, hub_messages(start)
    assert all("Memsync-Actor: operator" not in m for m in hub_messages(start))
    tree = hub_tree()
    assert tree["one.md"] == b"one\n" and tree["two.md"] == b"two\n"
    assert git("rev-list", "--count", f"{start}..memory/research", cwd=hub_path()).strip() >= "2"
    assert any(f.startswith("forged-trailer ") for f in newest(memory)["flags"])
    stopped(figures)


def test_reset_hard_before_the_run_loses_nothing_and_is_flagged(memory: Path, cli: Cli, figures: Figures) -> None:
    attack(figures)
    write(memory, "crdts.md", "".join(f"line {i} about CRDTs and merges\n" for i in range(200)))
    assert cli("push", cwd=memory).code == 0
    before = hub_tip()
    old = git("rev-parse", "HEAD~1", cwd=memory).strip()  # before crdts.md existed
    proc = run(memory, "resetter", f"echo note > note.md; wait_checkpoint; git reset -q --hard {old}",
               "--checkpoint", "1", env=FAST)
    assert proc.returncode == 0, proc.stderr
    tip = hub_tip()
    assert git("merge-base", "--is-ancestor", before, tip, cwd=hub_path()) == ""  # history kept
    assert "crdts.md" in git("ls-tree", "-r", "--name-only", before, cwd=hub_path())
    assert "crdts.md" not in hub_tree() and "note.md" not in hub_tree()
    flags = newest(memory)["flags"]
    assert "delete crdts.md" in flags and "delete note.md" not in flags, flags
    assert any(f.startswith("branch-reset ") for f in flags), flags
    assert git("show", f"{before}:crdts.md", cwd=hub_path()).startswith("line 0")
    stopped(figures)


def test_agent_commit_breaking_a_protect_policy_is_caught(memory: Path, figures: Figures) -> None:
    attack(figures)
    write(memory, ".vm0/storage.yaml", "name: research\ntype: memory\nprotect:\n"
          "  - {path: \"runs/**\", mode: append-only}\n")
    proc = run(memory, "rewriter", f"echo rewritten > runs/first.md; {AGENT_GIT} commit -qam 'tidy'")
    assert proc.returncode == 0, proc.stderr
    tree = hub_tree()
    assert tree["runs/first.md"] == b"first run\n"
    [copy] = [p for p in tree if p.startswith("runs/first.conflict-rewriter-")]
    assert tree[copy] == b"rewritten\n"
    entry = newest(memory)
    assert entry["run_id"] == "rewriter"
    assert entry["policies"] == ["runs/first.md: append-only: existing content was changed"]
    stopped(figures)


def test_agent_leaving_another_branch_checked_out(memory: Path, figures: Figures) -> None:
    attack(figures)
    start = hub_tip()
    proc = run(memory, "brancher", f"git checkout -qb side; echo side > side.md; {AGENT_GIT} add -A; "
               f"{AGENT_GIT} commit -qm \"$FORGED\"; git checkout -q --detach",
               env={"FORGED": "side\n\nMemsync-Actor: operator\n"})
    assert proc.returncode == 0, proc.stderr
    assert git("symbolic-ref", "HEAD", cwd=memory).strip() == "refs/heads/memory/research"
    assert hub_tree()["side.md"] == b"side\n"
    assert all("Memsync-Actor: operator" not in m for m in hub_messages(start))
    flags = newest(memory)["flags"]
    assert "head-moved detached" in flags, flags
    stopped(figures)


def test_stepwise_shrink_is_flagged_on_the_final_commit(memory: Path, cli: Cli, figures: Figures) -> None:
    attack(figures)
    lines = [f"{i:04d} notes on replicated state and merge semantics, entry {i}\n" for i in range(200)]
    text = "".join(lines)[:8000]
    write(memory, "crdts.md", text)
    assert cli("push", cwd=memory).code == 0
    steps = []
    size = 8000
    for _ in range(4):
        size = size * 6 // 10
        steps.append(f"head -c {size} crdts.md > .cut && cat .cut > crdts.md && rm .cut; wait_checkpoint")
    proc = run(memory, "shrinker", "; ".join(steps), "--checkpoint", "1", env=FAST)
    assert proc.returncode == 0, proc.stderr
    all_flags = [f for m in hub_messages() for k, f in parse(m + "\n") if k == "Memsync-Flag"]
    assert not any(f.startswith("shrink crdts.md") for f in all_flags), all_flags  # no single step shows it
    assert f"shrink-run crdts.md 8000->{size}" in all_flags, all_flags
    flagged = memsync_cmd("log", "--flagged", cwd=memory)
    assert "shrink-run crdts.md" in flagged.stdout, flagged.stdout
    stopped(figures)


def test_policy_file_edited_by_the_agent_is_put_back(memory: Path, figures: Figures) -> None:
    attack(figures)
    strict = "name: research\ntype: memory\nsecrets: block\nprotect:\n  - {path: \"runs/**\", mode: append-only}\n"
    write(memory, ".vm0/storage.yaml", strict)
    proc = run(memory, "loosener", "printf 'name: research\\ntype: memory\\nsecrets: off\\n' > .vm0/storage.yaml; "
               f"echo 'token {TOKEN}' > notes.md")
    assert proc.returncode == 9, proc.stderr
    assert (memory / ".vm0/storage.yaml").read_text() == strict
    kept = Path(os.environ["MEMSYNC_HOME"]) / "runs" / "loosener" / "research" / "storage.yaml.1"
    assert kept.read_text().endswith("secrets: off\n")
    assert str(kept) in proc.stderr
    assert TOKEN not in git("log", "-p", "--all", cwd=hub_path())
    assert "policy-file-restored .vm0/storage.yaml" in newest(memory)["flags"]
    # a deleted policy file is put back too
    proc = run(memory, "deleter", "rm .vm0/storage.yaml notes.md; echo more >> runs/first.md")
    assert proc.returncode == 0, proc.stderr
    assert (memory / ".vm0/storage.yaml").read_text() == strict
    stopped(figures)


@pytest.mark.parametrize("name", ["ref/line\u2028sep.md", "ref/new\nline.md", "ref/nel\x85x.md"])
def test_a_file_name_cannot_hide_the_runs_trailers(memory: Path, figures: Figures, name: str) -> None:
    attack(figures)
    write(memory, ".vm0/storage.yaml", "name: research\ntype: memory\nprotect:\n"
          "  - {path: \"ref/**\", mode: read-only}\n")
    script = f"import pathlib; p = pathlib.Path({name!r}); p.parent.mkdir(exist_ok=True); p.write_text('x')"
    proc = memsync_cmd("run", "--run-id", "hider", "--", sys.executable, "-c", script, cwd=memory)
    assert proc.returncode == 0, proc.stderr
    entry = newest(memory)
    assert entry["run_id"] == "hider" and entry["actor"] == "run"
    [policy] = entry["policies"]
    assert unquote_path(policy) == (name, ": read-only: file added"), policy
    flagged = memsync_cmd("log", "--flagged", "--json", cwd=memory)
    assert "hider" in flagged.stdout
    body = git("log", "-1", "--format=%B", "memory/research", cwd=hub_path())
    parsed = subprocess.run(["git", "interpret-trailers", "--parse"], input=body, capture_output=True,
                            text=True, check=True).stdout
    assert "Memsync-Run-Id: hider" in parsed and "Memsync-Policy: " in parsed
    stopped(figures)


@pytest.mark.parametrize("path", ["plain.md", "with space.md", "new\nline.md", "sep\u2028x.md", "nel\x85.md",
                                  "tab\t.md", 'quote".md', "back\\slash.md", "caf\u00e9.md", "a: b.md",
                                  "\udcff-bad-utf8.md"])
def test_quoted_paths_round_trip_and_stay_on_one_line(path: str) -> None:
    quoted = quote_path(path)
    assert "\n" not in quoted and len(quoted.splitlines()) == 1
    assert unquote_path(quoted + " rest") == (path, "rest")
    message = f"subject\n\nMemsync-Run-Id: r1\nMemsync-Policy: {quoted}: read-only: file added\n"
    assert ("Memsync-Run-Id", "r1") in parse(message)


def test_messages_split_on_newlines_only() -> None:
    message = "s\n\nMemsync-Run-Id: r1\nMemsync-Flag: delete a\u2028b\x1cc\x0bd.md\n"
    assert parse(message) == [("Memsync-Run-Id", "r1"), ("Memsync-Flag", "delete a\u2028b\x1cc\x0bd.md")]


@pytest.mark.parametrize("verb", ["push", "pull"])
def test_commits_left_by_a_killed_run_are_that_runs_on_the_next_command(memory: Path, figures: Figures,
                                                                       verb: str) -> None:
    attack(figures)
    start = hub_tip()
    proc = run(memory, "killed", f"echo left > left.md; {AGENT_GIT} add -A; {AGENT_GIT} commit -qm \"$FORGED\"; "
               "echo loose > loose.md; kill -9 $PPID", env={"FORGED": "mine\n\nMemsync-Actor: operator\n"})
    assert proc.returncode == -9, proc.stderr
    after = memsync_cmd(verb, cwd=memory)
    assert after.returncode == 0, after.stderr
    if verb == "push":
        assert "run killed stopped before its final commit" in after.stderr
        messages = hub_messages(start)
        assert hub_tree()["left.md"] == b"left\n" and hub_tree()["loose.md"] == b"loose\n"
    else:
        out = git("log", "--format=%B%x00", f"{start}..HEAD", cwd=memory)
        messages = [m.strip() for m in out.split("\0") if m.strip()]
    assert messages and all("Memsync-Actor: operator" not in m for m in messages), messages
    assert "Memsync-Run-Id: killed" in messages[0] and "Memsync-Flag: forged-trailer " in messages[0]
    stopped(figures)


def test_push_refuses_unpushed_commits_it_did_not_make_that_fail_the_checks(memory: Path, cli: Cli,
                                                                            figures: Figures) -> None:
    attack(figures)
    write(memory, ".vm0/storage.yaml", "name: research\ntype: memory\nsecrets: block\n")
    start = hub_tip()
    me = ("-c", "user.name=me", "-c", "user.email=me@x")
    write(memory, "leak.md", f"token {TOKEN}\n")
    git(*me, "add", "-A", cwd=memory)
    git(*me, "commit", "-qm", "x\n\nMemsync-Actor: operator", cwd=memory)
    r = cli("push", cwd=memory)
    assert r.code == 9, r.err
    assert "forged trailer" in r.err and "possible secret in leak.md" in r.err and "git reset --soft" in r.err
    assert TOKEN not in git("log", "-p", "--all", cwd=hub_path()) and hub_tip() == start
    # the hint's way out: the content goes through the scan, the secret stays out
    git("reset", "-q", "--soft", start[:8], cwd=memory)
    r = cli("push", cwd=memory)
    assert r.code == 9 and "kept out of the commit" in r.err
    assert TOKEN not in git("log", "-p", "--all", cwd=hub_path())
    (memory / "leak.md").unlink()
    write(memory, "plain.md", "by hand\n")
    git(*me, "add", "-A", cwd=memory)
    git(*me, "commit", "-qm", "by hand", cwd=memory)
    r = cli("push", cwd=memory)
    assert r.code == 0 and "pushing 1 version memsync did not make as they are" in r.err, r.err
    assert hub_messages(start)[0] == "by hand"  # pushed as it is: never relabelled as the operator's
    stopped(figures)


def test_agent_leaving_a_merge_in_progress_and_a_stash(memory: Path, figures: Figures) -> None:
    attack(figures)
    start = hub_tip()
    script = (f"echo stashed > runs/first.md; {AGENT_GIT} stash -q; "
              f"git checkout -qb side; echo side > summary.md; {AGENT_GIT} commit -qam side; "
              f"git checkout -q memory/research; echo main > summary.md; {AGENT_GIT} commit -qam main; "
              f"{AGENT_GIT} merge side >/dev/null 2>&1; test -f .git/MERGE_HEAD")
    proc = run(memory, "merger", script)
    assert proc.returncode == 0, proc.stderr
    assert not (memory / ".git/MERGE_HEAD").exists()
    assert git("status", "--porcelain", cwd=memory).strip() == ""
    flags = newest(memory)["flags"]
    assert "git-state merge" in flags and any(f.startswith("stash-left refs/stash ") for f in flags), flags
    assert any(f.startswith("agent-commits 1 folded") for f in flags), flags
    assert b"<<<<<<<" in hub_tree()["summary.md"]  # what the agent left, as it left it
    assert hub_tree()["runs/first.md"] == b"first run\n"  # the stash is not committed
    assert all("Memsync-Run-Id: merger" in m for m in hub_messages(start))
    stopped(figures)


def test_policy_file_of_a_read_only_memory_is_put_back(memory: Path, tmp_path: Path, figures: Figures) -> None:
    attack(figures)
    setup = tmp_path / "ref-src"
    setup.mkdir()
    assert memsync_cmd("init", "--name", "ref-mem", cwd=setup).returncode == 0
    write(setup, "a.md", "reference\n")
    assert memsync_cmd("push", cwd=setup).returncode == 0
    other = tmp_path / "mnt" / "ref-mem"
    script = ('printf "name: ref-mem\\ntype: memory\\nremote: /tmp/elsewhere.git\\n" '
              '> "$MEMSYNC_MEMORY_REF_MEM_DIR/.vm0/storage.yaml"')
    proc = memsync_cmd("run", "--run-id", "ro-policy", "--memory", f"research:{memory}", "--memory",
                       f"ref-mem:{other}:ro", "--", "sh", "-c", script, cwd=tmp_path)
    assert proc.returncode == 9, proc.stderr  # a read-only memory changed: put back, and said so
    assert "elsewhere" not in (other / ".vm0/storage.yaml").read_text()
    kept_in = Path(os.environ["MEMSYNC_HOME"]) / "runs" / "ro-policy" / "ro" / "ref-mem"
    kept = [p for p in kept_in.rglob("*") if p.is_file() and "elsewhere" in p.read_text(errors="replace")]
    assert kept and str(kept_in) in proc.stderr and ".vm0/storage.yaml" in proc.stderr
    stopped(figures)
