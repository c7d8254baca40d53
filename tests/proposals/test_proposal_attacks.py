"""Hostile proposals: an agent accepting its own, a secret in a hand-pushed branch, a flood of
proposals, forged names and reasons on the hub."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import Cli, git, hub_path, hub_tree, write
from tests.proposals.conftest import agent, propose

pytestmark = pytest.mark.attack

SECRET = "ghp_" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2"


def _hand_pushed(tmp_path: Path, branch: str, files: dict[str, str]) -> None:
    """A branch on the hub made with plain git, as anyone with write access could."""
    work = tmp_path / f"hand-{len(list(tmp_path.iterdir()))}"
    git("clone", "-q", "-b", "memory/research", str(hub_path()), str(work), cwd=tmp_path)
    for rel, text in files.items():
        write(work, rel, text)
    git("add", "-A", cwd=work)
    git("-c", "user.name=x", "-c", "user.email=x@x", "commit", "-qm", "by hand", cwd=work)
    git("push", "-q", "origin", f"HEAD:refs/heads/{branch}", cwd=work)


def test_an_agent_cannot_accept_or_reject_its_own_proposal(research: Path, cli: Cli, tmp_path: Path) -> None:
    out = tmp_path / "codes.txt"
    script = ("import subprocess, sys, os; open('summary.md','a').write('self-approved\\n'); "
              "codes = [subprocess.run([sys.executable, '-m', 'memsync', verb, os.environ['MEMSYNC_RUN_ID']])"
              ".returncode for verb in ('accept', 'reject')]; "
              f"open({str(out)!r}, 'w').write(repr(codes))")
    done = cli("run", "--propose", "--checkpoint", "0", "--run-id", "selfish", "--", *agent(script), cwd=research)
    assert done.code == 0, done.err
    assert out.read_text() == "[6, 6]"  # RunInProgress: the run owns the memory
    assert b"self-approved" not in hub_tree()["summary.md"]
    [p] = json.loads(cli("proposals", "--json", cwd=research).out)
    assert (p["id"], p["state"]) == ("selfish", "open")


def test_a_hand_pushed_proposal_with_a_secret_is_blocked(research: Path, cli: Cli, tmp_path: Path) -> None:
    with open(research / ".vm0" / "storage.yaml", "a") as fh:
        fh.write("secrets: block\n")
    _hand_pushed(tmp_path, "proposals/research/leaky", {"keys.md": f"token {SECRET}\n"})
    [p] = json.loads(cli("proposals", "--json", cwd=research).out)
    assert any(f.startswith("secret keys.md:1") for f in p["flags"]) and SECRET not in json.dumps(p)
    before = hub_tree()
    done = cli("accept", "leaky", cwd=research)
    assert done.code == 9 and "likely secrets" in done.err and SECRET not in done.err
    assert hub_tree() == before and not (research / "keys.md").exists()


def test_a_secret_added_then_removed_in_a_proposals_history_is_blocked(research: Path, cli: Cli,
                                                                     tmp_path: Path) -> None:
    with open(research / ".vm0" / "storage.yaml", "a") as fh:
        fh.write("secrets: block\n")
    work = tmp_path / "hand"
    git("clone", "-q", "-b", "memory/research", str(hub_path()), str(work), cwd=tmp_path)
    for text in (f"token {SECRET}\n", "nothing to see\n"):
        write(work, "keys.md", text)
        git("add", "-A", cwd=work)
        git("-c", "user.name=x", "-c", "user.email=x@x", "commit", "-qm", "by hand", cwd=work)
    git("push", "-q", "origin", "HEAD:refs/heads/proposals/research/sneaky", cwd=work)
    done = cli("accept", "sneaky", cwd=research)
    assert done.code == 9 and "keys.md:1" in done.err and SECRET not in done.err
    assert SECRET not in git("log", "-p", "memory/research", cwd=hub_path())
    narrowed = cli("accept", "sneaky", "--", "keys.md", cwd=research)  # its result alone: no history comes along
    assert narrowed.code == 0, narrowed.err
    assert hub_tree()["keys.md"] == b"nothing to see\n"
    assert SECRET not in git("log", "-p", "memory/research", cwd=hub_path())


def test_a_proposal_run_never_carries_a_blocked_secret(research: Path, cli: Cli) -> None:
    with open(research / ".vm0" / "storage.yaml", "a") as fh:
        fh.write("secrets: block\n")
    done = cli("run", "--propose", "--checkpoint", "0", "--run-id", "leak2", "--",
               *agent(f"open('keys.md','w').write('{SECRET}\\n'); open('ok.md','w').write('fine\\n')"), cwd=research)
    assert done.code == 9, done.err  # as any run whose files a policy kept out
    proposed = hub_tree("proposals/research/leak2")
    assert proposed["ok.md"] == b"fine\n" and "keys.md" not in proposed
    assert (research / "keys.md").read_text() == f"{SECRET}\n"  # kept, uncommitted, never lost


def test_the_number_of_open_proposals_is_capped(research: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch,
                                                tmp_path: Path) -> None:
    monkeypatch.setenv("MEMSYNC_MAX_PROPOSALS", "1")
    propose(cli, research, "first", "open('a.md','w').write('a\\n')")
    ran = tmp_path / "ran"
    done = cli("run", "--propose", "--checkpoint", "0", "--run-id", "second", "--",
               *agent(f"open({str(ran)!r},'w').write('x')"), cwd=research)
    assert done.code == 5 and "1 open proposals" in done.err and "MEMSYNC_MAX_PROPOSALS" in done.err
    assert not ran.exists()  # refused before the command started
    assert git("symbolic-ref", "HEAD", cwd=research).strip() == "refs/heads/memory/research"
    assert "refs/heads/proposals/research/second" not in git("for-each-ref", cwd=hub_path())


def test_forged_names_and_reasons_stay_inert(research: Path, cli: Cli, tmp_path: Path) -> None:
    _hand_pushed(tmp_path, "proposals/research/evil;x", {"a.md": "a\n"})
    assert json.loads(cli("proposals", "--json", cwd=research).out) == []  # not a run id: not a proposal
    bad = cli("accept", "../../heads/memory/research", cwd=research)
    assert bad.code == 2 and "invalid run id" in bad.err
    propose(cli, research, "victim", "open('a.md','w').write('a\\n')")
    reason = "no\nMemsync-Proposal-State: accepted\x1b[2J"
    assert cli("reject", "victim", "--reason", reason, cwd=research).code == 0
    [p] = json.loads(cli("proposals", "--all", "--json", cwd=research).out)
    assert p["state"] == "rejected" and "\n" not in p["reason"] and "\x1b" not in p["reason"]
