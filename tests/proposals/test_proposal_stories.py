"""Proposals meeting the rest of memsync: a memory that moved on, a redaction, the integrity
guard, a forge's merge, `mode: review` paths, consolidation and gc (embedded hub, in process)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memsync.core.attribution import Attribution
from memsync.core.memory import open_memory
from memsync.core.snapshot import take
from memsync.sync.exchange import converge
from tests.conftest import Cli, git, hub_path, hub_tree, write
from tests.proposals.conftest import agent, propose


@pytest.mark.slow
def test_accept_after_twenty_versions_moved_the_memory(research: Path, cli: Cli, tmp_path: Path) -> None:
    propose(cli, research, "late", "open('summary.md','a').write('proposed line\\n')")
    other = tmp_path / "other"
    assert cli("clone", "research", str(other)).code == 0
    mem = open_memory(other)
    for i in range(20):  # twenty runs' versions, made in process: each committed as its run's and pushed
        write(other, f"notes/run-{i:02}.md", f"run {i}\n")
        if i % 5 == 0:
            write(other, "summary.md", (other / "summary.md").read_text().replace("alpha fact", f"alpha fact {i}"))
        who = Attribution("run", f"Run r{i} (exit 0)", f"r{i}", (("Memsync-Exit-Code", "0"),))
        with mem.locked():
            take(mem, who)
            converge(mem, who, lambda: None)  # nothing writes here meanwhile
    assert git("log", "-1", "--format=%an", "memory/research", cwd=hub_path()).strip() == "memsync run r19"
    [p] = json.loads(cli("proposals", "--json", cwd=research).out)
    assert p["moved"] is True and p["state"] == "open"
    stat = cli("review", "late", "--stat", cwd=research)
    assert stat.out.count("summary.md") == 1 and "run-0" not in stat.out  # against the memory now
    done = cli("accept", "late", cwd=research)
    assert done.code == 0, done.err
    tree = hub_tree()
    assert tree["summary.md"].decode() == "# Summary\n\nalpha fact 15 10 5 0\nbeta fact\nproposed line\n"
    assert all(f"notes/run-{i:02}.md" in tree for i in range(20))
    parents = git("log", "-1", "--format=%P", "memory/research", cwd=hub_path()).split()
    assert len(parents) == 2  # a merge: the forge sees the proposal's branch as merged


@pytest.mark.slow
def test_a_proposal_whose_base_the_hub_redacted(research: Path, cli: Cli) -> None:
    secret = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    write(research, "keys.md", f"token {secret}\n")
    assert cli("push", cwd=research).code == 0
    propose(cli, research, "old-base", "open('notes/b.md','a').write('b grows\\n')")
    assert cli("redact", "--secret", "ghp_[A-Za-z0-9]{36}", "--yes", cwd=research).code == 0
    done = cli("accept", "old-base", "--json", cwd=research)
    assert done.code == 0, done.err
    assert json.loads(done.out)["moved_base"] is True
    tree = hub_tree()
    assert tree["notes/b.md"] == b"note b line one\nb grows\n" and secret.encode() not in tree["keys.md"]
    history = git("log", "-p", "memory/research", cwd=hub_path())
    assert secret not in history  # the proposal's pre-redaction history did not come back


@pytest.mark.slow
def test_a_flagged_proposal_says_so_and_the_accepted_version_keeps_the_flag(research: Path, cli: Cli) -> None:
    write(research, "big.md", "a line of notes worth keeping\n" * 100)
    assert cli("push", cwd=research).code == 0
    propose(cli, research, "shrinker", "open('big.md','w').write('short\\n')")
    [p] = json.loads(cli("proposals", "--json", cwd=research).out)
    assert p["flags"] == ["shrink big.md 3000->6"]
    shown = cli("review", "shrinker", "--stat", cwd=research)
    assert shown.out.splitlines()[1] == "  flag: shrink big.md 3000->6"  # flags first
    assert cli("accept", "shrinker", cwd=research).code == 0
    flagged = json.loads(cli("log", "--flagged", "--json", cwd=research).out)["versions"]
    accepted = [v for v in flagged if v["subject"] == "Accept proposal shrinker"]
    assert [(v["actor"], v["run_id"], v["flags"]) for v in accepted] == [
        ("operator", "shrinker", ["shrink big.md 3000->6"])]
    assert "Memsync-Flag: shrink big.md 3000->6" in git("log", "-1", "--format=%B", "memory/research",
                                                        cwd=hub_path())


def test_a_proposal_merged_on_a_forge_shows_as_accepted(research: Path, cli: Cli, tmp_path: Path) -> None:
    propose(cli, research, "forge", "open('notes/a.md','a').write('via a pull request\\n')")
    work = tmp_path / "forge-clone"
    git("clone", "-q", "-b", "memory/research", str(hub_path()), str(work), cwd=tmp_path)
    git("-c", "user.name=f", "-c", "user.email=f@x", "merge", "--no-ff", "-q", "-m", "Merge pull request",
        "origin/proposals/research/forge", cwd=work)
    git("push", "-q", "origin", "memory/research", cwd=work)
    assert json.loads(cli("proposals", "--json", cwd=research).out) == []
    [p] = json.loads(cli("proposals", "--all", "--json", cwd=research).out)
    assert (p["id"], p["state"]) == ("forge", "accepted")
    again = cli("accept", "forge", cwd=research)
    assert again.code == 2 and "already accepted" in again.err


def test_review_mode_paths_split_a_run(research: Path, cli: Cli) -> None:
    with open(research / ".vm0" / "storage.yaml", "a") as fh:
        fh.write("protect:\n  - {path: summary.md, mode: review}\n")
    done = cli("run", "--checkpoint", "0", "--run-id", "split", "--", *agent(
        "open('summary.md','w').write('# Summary\\n\\nrewritten\\n'); open('notes/new.md','w').write('n\\n')"),
        cwd=research)
    assert done.code == 0, done.err
    assert "Proposal: split" in done.err and "wait for review" in done.err
    tree = hub_tree()
    assert tree["notes/new.md"] == b"n\n"  # the rest committed and pushed as always
    assert tree["summary.md"] == b"# Summary\n\nalpha fact\nbeta fact\n"
    assert hub_tree("proposals/research/split")["summary.md"] == b"# Summary\n\nrewritten\n"
    assert (research / "summary.md").read_text() == "# Summary\n\nalpha fact\nbeta fact\n"
    assert git("status", "--porcelain", cwd=research) == ""
    [p] = json.loads(cli("proposals", "--json", cwd=research).out)
    assert p["files"] == ["summary.md"]
    assert "Proposals waiting: split" in cli("status", cwd=research).out
    assert cli("accept", "split", cwd=research).code == 0
    assert hub_tree()["summary.md"] == b"# Summary\n\nrewritten\n"
    assert json.loads(cli("status", "--json", cwd=research).out)["proposals"] == []


def test_consolidate_reports_what_it_would_forget(research: Path, cli: Cli) -> None:
    script = ("import os, shutil; assert os.environ['MEMSYNC_CONSOLIDATE'] == '1'; "
              "open('notes/all.md','w').write('note a line one\\nnote b line one\\n'); "
              "os.remove('notes/a.md'); os.remove('notes/b.md')")
    done = cli("consolidate", "--memory", f"research:{research}", "--run-id", "fold", "--json", "--", *agent(script))
    assert done.code == 0, done.err
    [entry] = json.loads(done.out)["proposals"]
    report = entry["forgetting"]
    assert entry["proposal"] == "fold" and report["lines"] == 1
    assert [(f["path"], f["count"], f["lines"], f["gone"]) for f in report["files"]] == [
        ("notes/a.md", 1, ["note a line two"], True)]
    assert report["inexact"] == []
    text = cli("review", "fold", "--forgotten", "--stat", cwd=research)
    assert "notes/a.md: 1 of 2 lines, file removed" in text.out and "- note a line two" in text.out


def test_gc_prunes_closed_proposals_after_their_age(research: Path, cli: Cli, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    propose(cli, research, "stale", "open('notes/z.md','w').write('z\\n')")
    propose(cli, research, "fresh", "open('notes/y.md','w').write('y\\n')")
    assert cli("reject", "stale", cwd=research).code == 0
    monkeypatch.setenv("MEMSYNC_PROPOSAL_DAYS", "0")
    assert cli("gc", cwd=research).code == 0
    refs = git("for-each-ref", "--format=%(refname)", cwd=hub_path())
    assert "refs/memsync/proposals/research/stale" not in refs
    assert "refs/heads/proposals/research/fresh" in refs  # open ones are never pruned


def test_review_mode_paths_without_a_push_stay_on_a_local_branch(research: Path, cli: Cli) -> None:
    with open(research / ".vm0" / "storage.yaml", "a") as fh:
        fh.write("protect:\n  - {path: summary.md, mode: review}\n")
    done = cli("run", "--no-push", "--checkpoint", "0", "--run-id", "offline-split", "--",
               *agent("open('summary.md','a').write('later\\n')"), cwd=research)
    assert done.code == 0, done.err
    assert "not pushed" in done.err
    assert git("show", "proposals/research/offline-split:summary.md", cwd=research).endswith("later\n")
    assert not (research / "summary.md").read_text().endswith("later\n")
    assert "proposals/research/offline-split" not in git("for-each-ref", cwd=hub_path())
    assert cli("push", cwd=research).code == 0  # the operator's push never takes the run's change
    assert not hub_tree()["summary.md"].endswith(b"later\n")
