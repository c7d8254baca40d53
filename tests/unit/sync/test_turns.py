"""sync/turns and converge's retry decisions (sync/exchange.py), in-process on a real bare hub
reached through file://: tickets are read strictly, numbered one past the highest, a writer waits
for the tickets ahead of it, passes over one that stays first past MEMSYNC_TURN_TIMEOUT and clears
it when right behind it, and releases its own; a hub on this machine never queues; the backoff
and the patience follow their documented bounds."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pygit2
import pytest

from memsync.core.memory import Memory, open_memory
from memsync.errors import UsageError
from memsync.git import remote
from memsync.git.hub import HubUrl
from memsync.git.remote import NetworkHub
from memsync.sync import exchange, turns
from tests.conftest import Cli, hub_path

QUEUE = turns.queue_of("memory/research")


def _network_like(memory: Path) -> Memory:
    """The memory, reaching its hub through a file:// URL: the same refs and pushes as a network
    hub, without a server."""
    mem = open_memory(memory)
    mem.hub = NetworkHub(HubUrl(f"file://{hub_path()}", "file"), mem.hub._keeper)
    return mem


def _queue() -> dict[str, str]:
    hub = pygit2.Repository(str(hub_path()))
    return {name: str(hub.references[name].target) for name in hub.references if name.startswith(QUEUE)}


def test_only_well_formed_tickets_count_lowest_first() -> None:
    found = {f"{QUEUE}000000000002": "b", f"{QUEUE}000000000001": "a", f"{QUEUE}12": "short",
             f"{QUEUE}00000000000x": "nondigit", f"{QUEUE}０００００００００００１": "wide digits",
             "refs/memsync/queue/memory/other/000000000001": "another memory's"}
    assert turns.tickets(found, QUEUE) == [(1, f"{QUEUE}000000000001"), (2, f"{QUEUE}000000000002")]


def test_tickets_are_numbered_in_order_and_the_first_goes_at_once(memory: Path) -> None:
    first, second = (turns.Turn(_network_like(memory), time.monotonic() + 60) for _ in range(2))
    assert first.after_loss() and first.ref == f"{QUEUE}000000000001"  # nobody ahead: its turn now
    second._take()
    assert second.ref == f"{QUEUE}000000000002"
    assert set(_queue()) == {first.ref, second.ref}
    first.release()
    second.release()
    assert _queue() == {} and first.ref is None
    assert turns.LOCAL_TICKET not in pygit2.Repository(str(memory)).references  # the local ref is gone too


def test_a_stale_ticket_ahead_is_passed_over_and_cleared(memory: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMSYNC_TURN_TIMEOUT", "0.5")
    dead = turns.Turn(_network_like(memory), time.monotonic() + 60)
    dead._take()  # its writer was killed mid-turn: the ticket stays
    waiting = turns.Turn(_network_like(memory), time.monotonic() + 60)
    assert waiting.after_loss()
    assert list(_queue()) == [waiting.ref]  # the stale one was deleted by the writer right behind it
    waiting.release()


def test_a_writer_that_runs_out_of_time_still_holds_only_its_own_ticket(memory: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMSYNC_TURN_TIMEOUT", "600")
    ahead = turns.Turn(_network_like(memory), time.monotonic() + 60)
    ahead._take()
    behind = turns.Turn(_network_like(memory), time.monotonic() + 0.3)
    assert behind.after_loss()  # the deadline ended the wait: the caller then gives up
    assert set(_queue()) == {ahead.ref, behind.ref}  # a live ticket ahead is never deleted
    behind.release()
    assert list(_queue()) == [ahead.ref]
    ahead.release()


def test_a_queue_the_hub_refuses_turns_queueing_off(memory: Path) -> None:
    mem = _network_like(memory)
    mem.hub = NetworkHub(HubUrl(f"file://{memory.parent / 'no-such-hub.git'}", "file"), mem.hub._keeper)
    turn = turns.Turn(mem, time.monotonic() + 60)
    assert not turn.after_loss() and turn.off
    assert not turn.after_loss()  # and stays off for the rest of the exchange


def test_a_hub_on_this_machine_or_a_switched_off_queue_never_queues(memory: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    places: list[turns.Turn] = []
    assert not exchange._take_turn(open_memory(memory), places, time.monotonic() + 60)  # it has a lock
    monkeypatch.setenv("MEMSYNC_PUSH_QUEUE", "0")
    mem = open_memory(memory)
    # never reached: the switch decides first
    mem.hub = NetworkHub(HubUrl("git://127.0.0.1:1/hub.git", "git"), mem.hub._keeper)
    assert not exchange._take_turn(mem, places, time.monotonic() + 60) and places == []


def test_the_backoff_is_jittered_under_a_doubling_ceiling() -> None:
    for lost in (0, 1, 3, 6, 40):
        ceiling = min(exchange.BACKOFF_CAP, exchange.BACKOFF_BASE * 2 ** min(lost, 16))
        waits = [exchange._backoff(lost) for _ in range(200)]
        assert all(0.0 <= w <= ceiling for w in waits)
        assert len(set(waits)) > 1  # writers that lost together do not come back together
    assert max(exchange._backoff(40) for _ in range(200)) > exchange.BACKOFF_CAP / 2


def test_patience_comes_from_the_environment_as_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    """A bad value is refused as util/envcheck.py refuses it at a command's start, never read as a
    silent default."""
    assert remote.push_patience() == remote.DEFAULT_PATIENCE
    monkeypatch.setenv("MEMSYNC_PUSH_PATIENCE", "2.5")
    assert remote.push_patience() == 2.5
    for bad in ("-3", "soon"):
        monkeypatch.setenv("MEMSYNC_PUSH_PATIENCE", bad)
        with pytest.raises(UsageError, match="MEMSYNC_PUSH_PATIENCE"):
            remote.push_patience()


def test_refs_of_the_queue_are_not_listed_as_memories(memory: Path, cli: Cli) -> None:
    turn = turns.Turn(_network_like(memory), time.monotonic() + 60)
    turn._take()
    listed = cli("list", "--json", cwd=memory)
    assert listed.code == 0
    assert [m["name"] for m in json.loads(listed.out)["memories"]] == ["research"]
    assert turn.mem.hub.refs_under(turn.mem.git, QUEUE) == _queue()
    turn.release()
