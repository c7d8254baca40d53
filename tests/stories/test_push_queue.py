"""Taking turns on a network hub (sync/turns.py): a writer that lost a race queues on the hub.

Every test runs against a real `git daemon`. Races are real: another writer's `git push` lands
between our push's ref advertisement and its update (Callbacks.push_negotiation patched to push
first), so our round loses exactly as it would to a concurrent sandbox.
"""

from __future__ import annotations

import subprocess
import threading
import time
from pathlib import Path

import pytest

from memsync.git.transport import Callbacks
from memsync.sync import turns
from tests.conftest import Cli, git, write
from tests.helpers.servers import GitDaemon

pytestmark = pytest.mark.server

BRANCH = "memory/research"
QUEUE = f"refs/memsync/queue/{BRANCH}/"


@pytest.fixture
def hub(daemon_hub: Path) -> Path:
    return daemon_hub


@pytest.fixture
def other(hub: Path, git_daemon: GitDaemon, tmp_path: Path) -> Path:
    """A plain git clone of the memory: the writer that wins the races."""
    work = tmp_path / "other-writer"
    git("clone", "-q", "-b", BRANCH, git_daemon.url("hub.git"), str(work), cwd=tmp_path)
    return work


def queue_refs(hub: Path) -> dict[str, str]:
    out = git("for-each-ref", "--format=%(refname) %(objectname)", "refs/memsync/", cwd=hub)
    return dict(line.split(" ") for line in out.splitlines())


def plant_ticket(hub: Path, number: int, name: str | None = None) -> str:
    blob = subprocess.run(["git", "hash-object", "-w", "--stdin"], cwd=hub, input="memsync queue ticket\nplanted\n",
                          check=True, capture_output=True, text=True).stdout.strip()
    ref = f"{QUEUE}{name if name is not None else f'{number:012d}'}"
    git("update-ref", ref, blob, cwd=hub)
    return ref


def race(monkeypatch: pytest.MonkeyPatch, other: Path, times: int,
         seen: list[tuple[str, dict[str, str]]] | None = None, hub: Path | None = None) -> list[str]:
    """Our next `times` pushes of the branch lose: the other writer's push lands first. Every
    push memsync makes is recorded in `seen` (its ref, and the hub's queue at that moment)."""
    checked = Callbacks.push_negotiation
    won: list[str] = []

    def racing(self: Callbacks, updates: list) -> None:  # type: ignore[type-arg]
        refs = [u.dst_refname for u in updates]
        if seen is not None and hub is not None:
            seen.append((refs[0], queue_refs(hub)))
        checked(self, updates)
        if f"refs/heads/{BRANCH}" in refs and len(won) < times:
            write(other, f"runs/other-{len(won)}.md", f"other writer, round {len(won)}\n")
            git("add", "-A", cwd=other)
            git("-c", "user.name=other", "-c", "user.email=o@example.invalid", "commit", "-qm", "other", cwd=other)
            git("pull", "-q", "--no-rebase", "--no-edit", "origin", BRANCH, cwd=other)
            git("push", "-q", "origin", f"HEAD:{BRANCH}", cwd=other)
            won.append(git("rev-parse", "HEAD", cwd=other).strip())

    monkeypatch.setattr(Callbacks, "push_negotiation", racing)
    return won


def assert_landed(hub: Path, root: Path, rel: str, text: str) -> None:
    assert git("show", f"{BRANCH}:{rel}", cwd=hub) == text
    assert git("rev-parse", BRANCH, cwd=hub).strip() == git("rev-parse", "HEAD", cwd=root).strip()


def test_tickets_are_read_strictly() -> None:
    found = {f"{QUEUE}000000000007": "a", f"{QUEUE}000000000002": "b", f"{QUEUE}abc": "c",
             f"{QUEUE}0000000000001": "d", f"{QUEUE}00000000000x": "e", f"{QUEUE}٠٠٠٠٠٠٠٠٠٠٠١": "f",
             "refs/memsync/queue/memory/other/000000000001": "g", f"{QUEUE}000000000003/x": "h"}
    assert turns.tickets(found, QUEUE) == [(2, f"{QUEUE}000000000002"), (7, f"{QUEUE}000000000007")]


def test_a_loser_queues_pushes_in_its_turn_and_leaves_no_ticket(daemon_memory: Path, hub: Path, other: Path, cli: Cli,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[str, dict[str, str]]] = []
    won = race(monkeypatch, other, times=2, seen=seen, hub=hub)  # the first try and the first full round
    write(daemon_memory, "runs/mine.md", "mine\n")
    r = cli("push", cwd=daemon_memory)
    assert r.code == 0, r.err
    assert len(won) == 2
    tickets_pushed = [ref for ref, _ in seen if ref.startswith(QUEUE)]
    assert tickets_pushed == [f"{QUEUE}000000000001", f"{QUEUE}000000000001"]  # taken, then deleted
    branch_pushes = [queue for ref, queue in seen if ref == f"refs/heads/{BRANCH}"]
    assert list(branch_pushes[-1]) == [f"{QUEUE}000000000001"]  # the winning push held the ticket
    assert queue_refs(hub) == {}
    assert_landed(hub, daemon_memory, "runs/mine.md", "mine\n")
    for i in range(2):
        assert git("show", f"{BRANCH}:runs/other-{i}.md", cwd=hub) == f"other writer, round {i}\n"
    parents = git("rev-list", "--merges", "--count", f"{won[-1]}..{BRANCH}", cwd=hub).strip()
    assert parents == "1"  # one merge for our push however many rounds it lost
    assert git("for-each-ref", "refs/memsync/", cwd=daemon_memory) == ""  # the local ticket ref went too


def test_a_loser_waits_for_the_ticket_ahead_of_it(daemon_memory: Path, hub: Path, other: Path, cli: Cli,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    ahead = plant_ticket(hub, 1)
    seen: list[tuple[str, dict[str, str]]] = []
    race(monkeypatch, other, times=2, seen=seen, hub=hub)
    monkeypatch.setenv("MEMSYNC_TURN_TIMEOUT", "120")

    def finish_its_turn() -> None:  # the writer ahead pushes and deletes its ticket a moment later
        time.sleep(1.5)
        git("update-ref", "-d", ahead, cwd=hub)

    helper = threading.Thread(target=finish_its_turn)
    helper.start()
    write(daemon_memory, "runs/mine.md", "mine\n")
    r = cli("push", cwd=daemon_memory)
    helper.join()
    assert r.code == 0, r.err
    ours = f"{QUEUE}000000000002"
    assert [ref for ref, _ in seen if ref.startswith(QUEUE)] == [ours, ours]
    last_branch_push = [queue for ref, queue in seen if ref == f"refs/heads/{BRANCH}"][-1]
    assert ahead not in last_branch_push and ours in last_branch_push  # it waited its turn
    assert queue_refs(hub) == {}
    assert_landed(hub, daemon_memory, "runs/mine.md", "mine\n")


def test_a_ticket_left_by_a_killed_writer_is_passed_over_and_cleared(daemon_memory: Path, hub: Path, other: Path,
                                                                     cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    stale = plant_ticket(hub, 5)
    race(monkeypatch, other, times=2)
    monkeypatch.setenv("MEMSYNC_TURN_TIMEOUT", "1")
    write(daemon_memory, "runs/mine.md", "mine\n")
    r = cli("push", cwd=daemon_memory)
    assert r.code == 0, r.err
    assert stale not in queue_refs(hub) and queue_refs(hub) == {}
    assert_landed(hub, daemon_memory, "runs/mine.md", "mine\n")


def test_a_hub_that_refuses_the_queue_gets_the_backoff(daemon_memory: Path, hub: Path, other: Path, cli: Cli,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A server rule that lets writers update memory branches only (as the multi-tenant recipe's
    does): the ticket is refused, and the exchange retries as it did before there was a queue."""
    hook = hub / "hooks" / "update"
    hook.parent.mkdir(exist_ok=True)
    hook.write_text("#!/bin/sh\ncase \"$1\" in refs/heads/memory/*) exit 0 ;; esac\n"
                    "echo \"$1: only memory branches may be written\" >&2\nexit 1\n")
    hook.chmod(0o755)
    seen: list[tuple[str, dict[str, str]]] = []
    race(monkeypatch, other, times=3, seen=seen, hub=hub)
    write(daemon_memory, "runs/mine.md", "mine\n")
    r = cli("push", cwd=daemon_memory)
    assert r.code == 0, r.err
    assert [ref for ref, _ in seen if ref.startswith(QUEUE)] == [f"{QUEUE}000000000001"]  # tried once
    assert queue_refs(hub) == {}
    assert_landed(hub, daemon_memory, "runs/mine.md", "mine\n")


def test_what_is_not_a_ticket_is_neither_waited_for_nor_touched(daemon_memory: Path, hub: Path, other: Path, cli: Cli,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    planted = {plant_ticket(hub, 0, name) for name in ("notes", "0000000000001", "000000000002/deeper")}
    before = queue_refs(hub)
    race(monkeypatch, other, times=2)
    monkeypatch.setenv("MEMSYNC_TURN_TIMEOUT", "120")  # waiting for any of them would time the test out
    write(daemon_memory, "runs/mine.md", "mine\n")
    r = cli("push", cwd=daemon_memory)
    assert r.code == 0, r.err
    assert queue_refs(hub) == before and set(before) == planted
    assert_landed(hub, daemon_memory, "runs/mine.md", "mine\n")


def test_a_full_queue_number_falls_back_to_the_backoff(daemon_memory: Path, hub: Path, other: Path, cli: Cli,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    last = plant_ticket(hub, 10**12 - 1)
    monkeypatch.setenv("MEMSYNC_TURN_TIMEOUT", "120")
    race(monkeypatch, other, times=2)
    write(daemon_memory, "runs/mine.md", "mine\n")
    r = cli("push", cwd=daemon_memory)
    assert r.code == 0, r.err
    assert queue_refs(hub) == {last: queue_refs(hub)[last]}
    assert_landed(hub, daemon_memory, "runs/mine.md", "mine\n")


def test_queueing_can_be_turned_off(daemon_memory: Path, hub: Path, other: Path, cli: Cli,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMSYNC_PUSH_QUEUE", "0")
    seen: list[tuple[str, dict[str, str]]] = []
    race(monkeypatch, other, times=3, seen=seen, hub=hub)
    write(daemon_memory, "runs/mine.md", "mine\n")
    r = cli("push", cwd=daemon_memory)
    assert r.code == 0, r.err
    assert not [ref for ref, _ in seen if ref.startswith(QUEUE)]
    assert_landed(hub, daemon_memory, "runs/mine.md", "mine\n")


def test_giving_up_while_queued_takes_the_ticket_away(daemon_memory: Path, hub: Path, other: Path, cli: Cli,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    ahead = plant_ticket(hub, 1)
    monkeypatch.setenv("MEMSYNC_TURN_TIMEOUT", "120")
    monkeypatch.setenv("MEMSYNC_PUSH_PATIENCE", "2")
    race(monkeypatch, other, times=100)
    write(daemon_memory, "runs/mine.md", "mine\n")
    r = cli("push", cwd=daemon_memory)
    assert r.code == 7, (r.code, r.err)  # the documented code of a push that kept losing
    assert "other writers won" in r.err
    assert list(queue_refs(hub)) == [ahead]  # ours is gone, the one ahead is not ours to touch
    assert git("show", "HEAD:runs/mine.md", cwd=daemon_memory) == "mine\n"  # committed locally, as documented


def test_a_hub_on_this_machine_never_queues(tmp_path: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    """A path hub serialises a loser's next round with its lock instead: no ticket is taken."""
    from memsync.core.memory import open_memory
    from memsync.sync.exchange import _take_turn

    hub_dir = tmp_path / "hub.git"
    git("init", "-q", "--bare", str(hub_dir), cwd=tmp_path)
    monkeypatch.setenv("MEMSYNC_REMOTE", str(hub_dir))
    root = tmp_path / "research"
    root.mkdir()
    assert cli("init", cwd=root).code == 0
    mem = open_memory(root)
    places: list[turns.Turn] = []
    assert _take_turn(mem, places, time.monotonic() + 60) is False
    assert places == [] and git("for-each-ref", "refs/memsync/", cwd=hub_dir) == ""


def test_tickets_are_not_memories(daemon_memory: Path, hub: Path, cli: Cli) -> None:
    plant_ticket(hub, 1)
    plant_ticket(hub, 0, "research")
    listed = cli("list", "--json", cwd=daemon_memory)
    assert listed.code == 0, listed.err
    assert '"research"' in listed.out and "queue" not in listed.out and "000000000001" not in listed.out


def test_a_ticket_ref_swapped_under_the_push_sends_nothing(daemon_memory: Path, hub: Path, other: Path, cli: Cli,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """An agent running beside a checkpoint re-points the local ref a ticket is pushed from at a
    commit of its own, between memsync setting it and the push reading it: the push sends
    nothing (the queue is then off for that exchange) and the agent's commit never reaches the hub."""
    from memsync.git.repo import GitRepo

    write(daemon_memory, "unchecked.md", "AKIA" + "Q" * 16 + "\n")
    git("add", "unchecked.md", cwd=daemon_memory)
    tree = git("write-tree", cwd=daemon_memory).strip()
    planted = git("-c", "user.name=agent", "-c", "user.email=a@example.invalid", "commit-tree", tree, "-m", "agent",
                  cwd=daemon_memory).strip()
    git("rm", "-q", "--cached", "unchecked.md", cwd=daemon_memory)
    (daemon_memory / "unchecked.md").unlink()
    real = GitRepo.set_ref

    def racing_agent(self: GitRepo, ref: str, oid: str, message: str) -> None:
        real(self, ref, planted if ref == turns.LOCAL_TICKET else oid, message)

    monkeypatch.setattr(GitRepo, "set_ref", racing_agent)
    race(monkeypatch, other, times=2)
    write(daemon_memory, "runs/mine.md", "mine\n")
    r = cli("push", cwd=daemon_memory)
    assert r.code == 0, r.err
    assert queue_refs(hub) == {}
    assert subprocess.run(["git", "cat-file", "-e", planted], cwd=hub).returncode != 0
    assert_landed(hub, daemon_memory, "runs/mine.md", "mine\n")
