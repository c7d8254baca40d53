"""Taking turns on a network hub: after a lost race, writers queue on the hub and push in order.

On a hub on this machine a writer that lost a race takes the hub's lock for its next
fetch-merge-push (exchange.converge), so it cannot lose again. A network hub has no lock: only
the branch's compare-and-swap orders the pushes, and with many writers on one memory most rounds
lose. Each loser backing off on its own favours the newest (a run that has lost once retries
sooner than one that has lost ten times): with 128 writers over `git daemon`, 102 of 640 runs
lost for ten minutes and gave up while newer ones went through.

So a writer that lost takes a *ticket*: a ref `refs/memsync/queue/<branch>/<number>`, the number
one past the highest ticket there, created only if absent (two writers never hold one number),
pointing at a small blob that names nothing but the memory. It then fetches, merges and pushes
only when its ticket is the lowest live one, polling the queue (one connection, no fetch) more
slowly the further back it is, and deletes its ticket once its push landed or it gives up.

The queue orders attempts, never correctness: every push is still a compare-and-swap on the
branch, so a writer that ignores the queue (git, an older memsync, anyone's first try) can only
make the turn's push lose, and the writer whose turn it is retries at once. Liveness: a ticket
that stays first for MEMSYNC_TURN_TIMEOUT seconds (default 30: its writer was killed mid-turn) is
passed over, and the writer right behind it deletes it. A hub that refuses the queue's refs (a
server rule that allows writes to memory branches only), or any failure to reach the queue, gives
the exchange back its jittered backoff. MEMSYNC_PUSH_QUEUE=0 turns queueing off. A hub on this
machine never queues: it has its lock.
"""

from __future__ import annotations

import contextlib
import os
import random
import time
from typing import TYPE_CHECKING

from memsync.errors import MemsyncError, PushRejected
from memsync.git import transport
from memsync.util import envcheck

if TYPE_CHECKING:
    from memsync.core.memory import Memory

PREFIX = "refs/memsync/queue/"
LOCAL_TICKET = "refs/memsync/ticket"  # the local ref a ticket is pushed from
DIGITS = 12
DEFAULT_TURN_TIMEOUT = 30.0
POLL_STEP, POLL_MAX = 0.25, 5.0  # seconds between two looks at the queue, per writer ahead
TAKE_TRIES = 5  # numbers tried when others take the same one meanwhile


def enabled() -> bool:
    """MEMSYNC_PUSH_QUEUE=0 turns the queue off (checked by util/envcheck.py: 0 or 1)."""
    return envcheck.switch("MEMSYNC_PUSH_QUEUE")


def turn_timeout() -> float:
    """MEMSYNC_TURN_TIMEOUT, as util/envcheck.py checked it (a bad value is a usage error)."""
    return envcheck.number("MEMSYNC_TURN_TIMEOUT", DEFAULT_TURN_TIMEOUT)


def queue_of(branch: str) -> str:
    return f"{PREFIX}{branch}/"


def tickets(found: dict[str, str], queue: str) -> list[tuple[int, str]]:
    """(number, ref) of the well-formed tickets in `found`, lowest first; anything else a hub
    advertises under the queue (another name, another length) is not a ticket and is ignored."""
    out = []
    for ref in found:
        number = ref[len(queue):] if ref.startswith(queue) else ""
        if len(number) == DIGITS and number.isascii() and number.isdigit():
            out.append((int(number), ref))
    return sorted(out)


class Turn:
    """One exchange's place in its memory's queue on a network hub."""

    def __init__(self, mem: Memory, deadline: float) -> None:
        self.mem = mem
        self.deadline = deadline
        self.queue = queue_of(mem.branch)
        self.ref: str | None = None  # our ticket on the hub
        self.oid: str | None = None  # the blob it points at
        self.off = False  # the hub refused the queue, or could not be reached for it

    def after_loss(self) -> bool:
        """Called after a lost race: take a ticket if we have none, then wait for our turn.
        False when the queue cannot be used (the caller backs off as before)."""
        if self.off:
            return False
        try:
            if self.ref is None:
                self._take()
            self._wait()
        except MemsyncError:
            self.off = True  # a refused or unreachable queue: the exchange goes on without it
            self.release()
            return False
        return True

    def _list(self) -> dict[str, str]:
        return self.mem.hub.refs_under(self.mem.git, self.queue)

    def _take(self) -> None:
        git = self.mem.git
        text = f"memsync queue ticket\nmemory {self.mem.name}\nnonce {os.urandom(8).hex()}\n"
        blob = git.store_blob("a queue ticket", text.encode())
        git.set_ref(LOCAL_TICKET, blob, "memsync: queue ticket")
        try:
            for _ in range(TAKE_TRIES):
                taken = tickets(self._list(), self.queue)
                number = (taken[-1][0] + 1) if taken else 1
                if number >= 10 ** DIGITS:
                    raise PushRejected("the hub's queue is full")
                ref = f"{self.queue}{number:0{DIGITS}d}"
                try:
                    self.mem.hub.push_leased(git, LOCAL_TICKET, ref, None, sending=blob)
                except transport.NotFastForward:
                    continue  # another writer took that number meanwhile
                self.ref, self.oid = ref, blob
                return
            raise PushRejected("the queue kept moving")
        finally:
            git.delete_ref(LOCAL_TICKET)

    def _wait(self) -> None:
        """Until our ticket is the lowest live one (or the deadline: the caller gives up then)."""
        assert self.ref is not None
        first_seen: dict[str, float] = {}  # ticket -> when we first saw it first in the queue
        passed: set[str] = set()
        while time.monotonic() < self.deadline:
            found = self._list()
            if self.ref not in found:  # passed over as stale by the writer behind us: queue again
                self.ref = self.oid = None
                self._take()
                continue
            mine = int(self.ref[len(self.queue):])
            ahead = [(n, ref) for n, ref in tickets(found, self.queue) if n < mine and ref not in passed]
            if not ahead:
                return
            now = time.monotonic()
            head = ahead[0][1]
            if now - first_seen.setdefault(head, now) >= turn_timeout():
                passed.add(head)  # its writer is gone (killed mid-turn): not waited for again
                if len(ahead) == 1:  # we are right behind it: clear it away, on its exact blob
                    with contextlib.suppress(MemsyncError):
                        self.mem.hub.push_leased(self.mem.git, "", head, found[head])
                continue
            time.sleep(min(POLL_MAX, POLL_STEP * len(ahead)) * random.uniform(0.75, 1.25))

    def release(self) -> None:
        """Delete our ticket (best effort: a ticket left behind is passed over after the timeout)."""
        ref, oid = self.ref, self.oid
        self.ref = self.oid = None
        if ref is None or oid is None:
            return
        with contextlib.suppress(MemsyncError):
            self.mem.hub.push_leased(self.mem.git, "", ref, oid)
