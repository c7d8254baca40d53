"""Proposals made by `run --propose`, reviewed, accepted and rejected, on the embedded hub."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import Cli, git, hub_path, hub_tree, write
from tests.proposals.conftest import propose


def test_a_proposal_leaves_the_memory_until_accepted(research: Path, cli: Cli) -> None:
    before = hub_tree()
    propose(cli, research, "p1", "open('summary.md','a').write('gamma fact\\n')")
    assert hub_tree() == before  # memory/research did not move
    assert (research / "summary.md").read_text() == "# Summary\n\nalpha fact\nbeta fact\n"
    assert git("symbolic-ref", "HEAD", cwd=research).strip() == "refs/heads/memory/research"
    assert "gamma fact" in hub_tree("proposals/research/p1")["summary.md"].decode()
    listed = cli("proposals", "--json", cwd=research)
    assert listed.code == 0, listed.err
    [p] = json.loads(listed.out)
    assert set(p) == {"id", "memory", "run_id", "state", "base", "tip", "created", "files", "added", "removed",
                      "flags", "moved", "reason", "closed_by", "accepted_as", "record"}
    assert (p["id"], p["memory"], p["run_id"], p["state"], p["files"]) == ("p1", "research", "p1", "open",
                                                                           ["summary.md"])
    assert p["added"] == 1 and p["removed"] == 0 and p["moved"] is False
    shown = cli("review", "p1", cwd=research)
    assert shown.code == 0, shown.err
    assert "+gamma fact" in shown.out
    done = cli("accept", "p1", cwd=research)
    assert done.code == 0, done.err
    assert "gamma fact" in hub_tree()["summary.md"].decode()
    trailers = git("log", "-1", "--format=%(trailers)", "memory/research", cwd=hub_path())
    assert "Memsync-Accepted-Proposal: p1" in trailers and "Memsync-Run-Id: p1" in trailers
    assert "Memsync-Actor: operator" in trailers
    assert json.loads(cli("proposals", "--json", cwd=research).out) == []
    [closed] = json.loads(cli("proposals", "--all", "--json", cwd=research).out)
    assert closed["state"] == "accepted"
    assert "refs/heads/proposals/research/p1" not in git("for-each-ref", cwd=hub_path())


def test_reject_keeps_it_readable_and_acceptable_later(research: Path, cli: Cli) -> None:
    propose(cli, research, "p2", "open('notes/c.md','w').write('a new note\\n')")
    assert cli("reject", "p2", "--reason", "not now", cwd=research).code == 0
    refs = git("for-each-ref", "--format=%(refname)", cwd=hub_path())
    assert "refs/memsync/proposals/research/p2" in refs and "refs/heads/proposals/research/p2" not in refs
    [p] = json.loads(cli("proposals", "--all", "--json", cwd=research).out)
    assert (p["state"], p["reason"]) == ("rejected", "not now")
    assert "a new note" in cli("review", "p2", cwd=research).out
    assert cli("reject", "p2", cwd=research).code == 2  # already closed
    assert cli("accept", "p2", cwd=research).code == 0
    assert hub_tree()["notes/c.md"] == b"a new note\n"
    [p] = json.loads(cli("proposals", "--all", "--json", cwd=research).out)
    assert p["state"] == "accepted"


@pytest.mark.parametrize("order", [("one", "two"), ("two", "one")])
@pytest.mark.slow
def test_two_proposals_accepted_in_either_order(research: Path, cli: Cli, order: tuple[str, str]) -> None:
    propose(cli, research, "one", "open('summary.md','w').write('# Summary\\n\\nalpha fact by one\\nbeta fact\\n')")
    propose(cli, research, "two", "open('summary.md','w').write('# Summary\\n\\nalpha fact by two\\nbeta fact\\n')")
    first, second = order
    assert cli("accept", first, cwd=research).code == 0
    shown = cli("review", second, "--stat", cwd=research)
    assert "conflict (both kept): summary.md" in shown.out
    done = cli("accept", second, cwd=research)
    assert done.code == 0, done.err
    assert "conflict kept both: summary.md -> summary.conflicts.md" in done.out
    tree = hub_tree()
    assert f"alpha fact by {first}".encode() in tree["summary.md"]  # the memory's version stays at the path
    assert f"alpha fact by {second}".encode() in tree["summary.conflicts.md"]  # the other is gathered, not lost
    assert {p["state"] for p in json.loads(cli("proposals", "--all", "--json", cwd=research).out)} == {"accepted"}


def test_partial_accept_leaves_the_rest_open(research: Path, cli: Cli) -> None:
    propose(cli, research, "part", "open('summary.md','a').write('s\\n'); open('notes/a.md','a').write('n\\n')")
    done = cli("accept", "part", "--", "notes/", cwd=research)  # a folder: its files
    assert done.code == 0, done.err
    tree = hub_tree()
    assert tree["notes/a.md"].endswith(b"n\n") and not tree["summary.md"].endswith(b"s\n")
    [p] = json.loads(cli("proposals", "--json", cwd=research).out)
    assert p["state"] == "open"
    stat = cli("review", "part", "--stat", cwd=research)
    assert "summary.md" in stat.out and "notes/a.md" not in stat.out
    assert cli("accept", "part", cwd=research).code == 0
    assert hub_tree()["summary.md"].endswith(b"s\n")


def test_accept_refuses_local_changes_and_unknown_ids(research: Path, cli: Cli) -> None:
    propose(cli, research, "p3", "open('summary.md','a').write('x\\n')")
    missing = cli("accept", "nope", cwd=research)
    assert missing.code == 2 and "p3" in missing.err
    write(research, "summary.md", "mine\n")
    dirty = cli("accept", "p3", cwd=research)
    assert dirty.code == 2 and "local changes" in dirty.err
    assert (research / "summary.md").read_text() == "mine\n"


def test_another_memorys_proposals_on_the_same_hub(research: Path, cli: Cli, tmp_path: Path) -> None:
    other = tmp_path / "notebook"
    other.mkdir()
    assert cli("init", cwd=other).code == 0
    write(other, "n.md", "n\n")
    assert cli("push", cwd=other).code == 0
    propose(cli, other, "nb1", "open('n.md','a').write('more\\n')")
    listed = json.loads(cli("proposals", "--memory", "notebook", "--json", cwd=research).out)
    assert [(p["id"], p["memory"], p["files"], p["moved"]) for p in listed] == [("nb1", "notebook", ["n.md"], False)]
    assert json.loads(cli("proposals", "--json", cwd=research).out) == []


def test_proposals_listed_outside_any_memory(research: Path, cli: Cli, tmp_path: Path) -> None:
    propose(cli, research, "far", "open('summary.md','a').write('far away\\n')")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    listed = json.loads(cli("proposals", "--json", cwd=elsewhere).out)
    assert [(p["id"], p["memory"], p["files"], p["state"]) for p in listed] == [("far", "research", ["summary.md"],
                                                                                 "open")]
    assert [p["id"] for p in json.loads(cli("proposals", "--memory", "research", "--json", cwd=elsewhere).out)] == \
        ["far"]
    assert cli("accept", "far", cwd=research).code == 0
    [done] = json.loads(cli("proposals", "--all", "--json", cwd=elsewhere).out)
    assert done["state"] == "accepted" and not (elsewhere / ".git").exists()
