"""Limits on one network operation (ls-remote, fetch, push): a deadline, a minimum rate, and a cap
on what a server may send other than a fetched pack (its ref advertisement, HTTP headers, its
answer to a push), and on the refs it advertises.

libgit2's own timeouts (MEMSYNC_CONNECT_TIMEOUT, MEMSYNC_IO_TIMEOUT) limit silence only: a server
that sends one byte a second, or an endless ref advertisement, keeps a read going forever and
libgit2 holding every ref it has read (~40 MB/s of memory on loopback). libgit2 has no option for
either and does not hand out its socket, so while an operation runs a watcher thread looks at this
process's TCP sockets to the hub's port that the operation opened (as sockets.send_promptly finds
them), reads the kernel's byte counts (Linux TCP_INFO), and past a limit shuts the socket down:
libgit2's read returns at once, the operation fails, and the caller reports which limit it was.
The operation's own callbacks (progress, sideband, negotiation) also refuse to go on past a limit,
which covers what the watcher cannot see (a proxy's port, a system without /dev/fd or TCP_INFO).

  MEMSYNC_NET_DEADLINE       seconds one operation may take in all (default 600; 0: none)
  MEMSYNC_LOW_SPEED_LIMIT    bytes per second below which ...          (default 1000; 0: none)
  MEMSYNC_LOW_SPEED_TIME     ... for this many seconds the operation stops (default: MEMSYNC_IO_TIMEOUT, 60)
  MEMSYNC_MAX_ADVERTISEMENT  bytes a server may send other than a fetched pack (default 32 MiB)
  MEMSYNC_MAX_REFS           branches a hub may advertise (default 100,000): a listing past it is
                             refused; a read of named refs (a memory's branch) warns and goes on

Time the process spends on its own work (indexing a received pack, resolving deltas) counts as
progress for the minimum rate, not as a stall: libgit2 reports it through the progress callback.
"""

from __future__ import annotations

import contextlib
import math
import os
import socket
import stat
import struct
import threading
import time
from collections.abc import Iterator

from memsync.errors import RemoteError, UsageError
from memsync.git.sockets import peer_socket
from memsync.util.records import recordclass
from memsync.util.threads import helper_body

__all__ = ["AdvertisementTooLarge", "Limits", "NetLimitExceeded", "TooManyRefs", "Watch", "limits", "watch"]

_FD_DIR = "/dev/fd"
_TCP_INFO = getattr(socket, "TCP_INFO", None)  # Linux only
_BYTES_AT = 120  # struct tcp_info: tcpi_bytes_acked, tcpi_bytes_received (u64, Linux >= 4.2)
TICK = 0.2  # seconds between two looks at the sockets
SILENCE_GRACE = 2.0  # seconds a silent connection is left to libgit2's own timeout

# Sockets each running operation took as its own (inode -> the operation), so that operations in
# other threads of this process (a run's checkpoints of several memories on one hub) are not
# counted, or cut, as this one's: a socket belongs to the first operation that sees it.
_claims: dict[int, object] = {}
_claims_lock = threading.Lock()

SERVER_MESSAGE_MAX = 400  # characters of one server message (sideband line, rejection) kept
SERVER_LINES_MAX = 20  # sideband lines kept (the last ones)


@recordclass(frozen=True)
class Limits:
    deadline: float  # seconds; 0: none
    low_speed_limit: int  # bytes per second; 0: none
    low_speed_time: float  # seconds
    max_advertisement: int  # bytes
    max_refs: int


def _number(name: str, default: float, *, minimum: float, integer: bool = False) -> float:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw) if integer else float(raw)
    except ValueError:
        value = math.nan
    if not (value >= minimum and math.isfinite(value)):
        kind = "a whole number" if integer else "a number"
        raise UsageError(f"{name}={raw!r} is not {kind} of at least {minimum:g}",
                         f"unset it for the default ({default:g}), or see docs/RELIABILITY.md, Network limits")
    return value


def limits() -> Limits:
    """The limits from the environment, read anew for every operation."""
    _number("MEMSYNC_CONNECT_TIMEOUT", 10, minimum=1)  # applied by transport.apply_timeouts
    io_timeout = _number("MEMSYNC_IO_TIMEOUT", 60, minimum=1)
    return Limits(
        deadline=_number("MEMSYNC_NET_DEADLINE", 600, minimum=0),
        low_speed_limit=int(_number("MEMSYNC_LOW_SPEED_LIMIT", 1000, minimum=0, integer=True)),
        low_speed_time=_number("MEMSYNC_LOW_SPEED_TIME", io_timeout, minimum=1),
        max_advertisement=int(_number("MEMSYNC_MAX_ADVERTISEMENT", 32 * 2**20, minimum=4096, integer=True)),
        max_refs=int(_number("MEMSYNC_MAX_REFS", 100_000, minimum=1, integer=True)),
    )


class NetLimitExceeded(RemoteError):
    """A network operation passed one of its limits and was stopped. Not a RemoteUnreachable:
    a push does not retry it (a stalled or hostile server would take each try's full limit)."""


class AdvertisementTooLarge(NetLimitExceeded):
    pass


class TooManyRefs(RemoteError):
    pass


def server_text(text: str) -> str:
    """A server's message as memsync keeps it: one line, at most SERVER_MESSAGE_MAX characters."""
    line = " ".join(text.split())
    return line if len(line) <= SERVER_MESSAGE_MAX else line[:SERVER_MESSAGE_MAX - 1] + "…"


def check_refs(count: int, where: str, doing: str, limit: int, named: bool = False) -> None:
    """Refuse an advertisement of more than `limit` refs; `named`: the operation read only refs
    it named (a memory's branch), never a Python object per advertised ref, and its memory is
    bounded by MEMSYNC_MAX_ADVERTISEMENT: a warning, and it goes on."""
    if count > limit and named:
        from memsync.util import notices

        notices.warn(f"{where}: the hub advertises {count:,} refs, more than MEMSYNC_MAX_REFS ({limit:,}); "
                     "only the memory's own refs were read, and commands that list the hub's refs "
                     "(list, proposals) refuse it until MEMSYNC_MAX_REFS is raised")
        return
    if count > limit:
        raise TooManyRefs(f"{doing} {where}: the hub advertises {count:,} refs, more than MEMSYNC_MAX_REFS "
                          f"({limit:,})",
                          "a hub holds one branch per memory; if this one is trusted and that big, raise "
                          "MEMSYNC_MAX_REFS")


class Watch:
    """One operation under watch: `advertised()` when the server's data begins, `busy()` when the
    process itself makes progress, `check()` from a callback (raises past a limit)."""

    def __init__(self, port: int | None, limits: Limits, where: str, doing: str, expects_pack: bool = False) -> None:
        self.port = port
        self.expects_pack = expects_pack  # a fetch: after the advertisement, a pack of any size
        self.limits = limits
        self.where = where
        self.doing = doing
        self.started = time.monotonic()
        self.tripped: NetLimitExceeded | None = None
        self._in_advertisement = True
        self._advertisement_bytes = 0  # bytes received when the advertisement ended
        self._baseline = _socket_ids() if port is not None else set()
        self._counts: dict[int, tuple[int, int]] = {}  # socket inode -> (sent, received)
        self._samples: list[tuple[float, int]] = [(self.started, 0)]  # (time, bytes both ways)
        self._busy_at = self.started
        self._working = False  # the process works on what it received (working())
        self._moved_at = self.started  # when the byte counts last changed
        self._first_seen: float | None = None  # when a socket of this operation was first seen
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._thread: threading.Thread | None = None

    # -- called by the operation's callbacks (libgit2's thread); the watcher judges -------------

    def advertised(self) -> None:
        """The server's data begins: what it sent so far was its advertisement."""
        if self._in_advertisement:
            with self._lock:
                self._in_advertisement = False
                self._advertisement_bytes = self._received()
        self.check()

    def busy(self) -> None:
        """The process itself made progress (libgit2 calls this per object: kept cheap)."""
        self._busy_at = time.monotonic()
        if self.tripped is not None:
            raise self.tripped

    @contextlib.contextmanager
    def working(self) -> Iterator[None]:
        """The process works on what it has received (an indexer's commit, with no callback to
        call `busy`): a silent socket meanwhile is not a stalled hub. The deadline still applies,
        raised when the work is done."""
        self._working = True
        try:
            yield
        finally:
            self._working = False
            self.busy()

    def check(self) -> None:
        if self.tripped is not None:
            raise self.tripped

    # -- the watcher ----------------------------------------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(target=helper_body(self._run), name="memsync-netlimits", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._done.set()
        if self._thread is not None:
            self._thread.join()
        with _claims_lock:
            for ident in [i for i, owner in _claims.items() if owner is self]:
                del _claims[ident]

    def _run(self) -> None:
        while not self._done.wait(TICK):
            sockets = self._sockets()
            try:
                with self._lock:
                    self._sample(sockets)
                    if self.tripped is None:
                        self._judge(time.monotonic())
                if self.tripped is not None:
                    for sock in sockets.values():
                        with contextlib.suppress(OSError):
                            sock.shutdown(socket.SHUT_RDWR)  # libgit2's read returns; its descriptor stays
            finally:
                for sock in sockets.values():
                    sock.close()  # the duplicate only

    def _sockets(self) -> dict[int, socket.socket]:
        """Duplicates of the TCP sockets to the hub's port this operation opened, by inode."""
        found: dict[int, socket.socket] = {}
        if self.port is None:
            return found
        for ident, fd in _socket_fds():
            if ident in self._baseline or ident in found:
                continue
            sock = peer_socket(fd, self.port)
            if sock is None:
                continue
            with _claims_lock:
                mine = _claims.setdefault(ident, self) is self
            if mine:
                found[ident] = sock
            else:  # another operation's
                sock.close()
        return found

    def _sample(self, sockets: dict[int, socket.socket]) -> None:
        for ident, sock in sockets.items():
            counts = _byte_counts(sock)
            if counts is not None:
                self._counts[ident] = counts
        now = time.monotonic()
        if self._first_seen is None and self._counts:
            self._first_seen = now
        total = sum(s + r for s, r in self._counts.values())
        if total != self._samples[-1][1]:
            self._moved_at = now
        self._samples.append((now, total))
        horizon = now - self.limits.low_speed_time - 2 * TICK
        while len(self._samples) > 2 and self._samples[1][0] < horizon:
            self._samples.pop(0)

    def _received(self) -> int:
        return sum(r for _s, r in self._counts.values())

    def _judge(self, now: float) -> None:
        lim = self.limits
        elapsed = now - self.started
        if lim.deadline and elapsed > lim.deadline:
            self.tripped = NetLimitExceeded(
                f"{self.doing} {self.where}: stopped after {elapsed:.0f} s, the limit for one network "
                f"operation (MEMSYNC_NET_DEADLINE={lim.deadline:g})",
                "the server is stalled or the link too slow for this transfer; for a big transfer over a "
                "slow link raise MEMSYNC_NET_DEADLINE (seconds, 0: no limit)")
            return
        received = self._received()
        if (self._in_advertisement or not self.expects_pack) and received > lim.max_advertisement:
            what = "before any data (ref advertisement, headers)" if self._in_advertisement else "in answer to a push"
            self.tripped = AdvertisementTooLarge(
                f"{self.doing} {self.where}: the server sent more than {_size(lim.max_advertisement)} {what}; "
                "stopped reading (MEMSYNC_MAX_ADVERTISEMENT)",
                "a hub advertises one branch per memory, ~100 bytes each; if this hub is trusted and that "
                "big, raise MEMSYNC_MAX_ADVERTISEMENT (bytes)")
            return
        if not lim.low_speed_limit or elapsed < lim.low_speed_time or now - self._busy_at < lim.low_speed_time \
                or self._working:
            return
        if self._first_seen is None or now - self._first_seen < lim.low_speed_time:
            return  # no byte counts on this system, no socket seen yet, or not seen for long enough
        since = now - lim.low_speed_time
        past = [b for t, b in self._samples if t <= since]
        if not past:
            return
        moved = self._samples[-1][1] - past[-1]
        if moved == 0 and now - self._moved_at < lim.low_speed_time + SILENCE_GRACE:
            return  # plain silence: libgit2's timeout (MEMSYNC_IO_TIMEOUT) says so more clearly
        if moved < lim.low_speed_limit * lim.low_speed_time:
            self.tripped = NetLimitExceeded(
                f"{self.doing} {self.where}: the server moved {moved:,} bytes in the last "
                f"{lim.low_speed_time:g} s, below the minimum rate of {lim.low_speed_limit:,} bytes/s "
                "(MEMSYNC_LOW_SPEED_LIMIT, MEMSYNC_LOW_SPEED_TIME)",
                "the server is stalled or trickling; check it, or lower MEMSYNC_LOW_SPEED_LIMIT for a very "
                "slow link (0: no minimum)")

    @property
    def advertisement_bytes(self) -> int:
        return self._advertisement_bytes if not self._in_advertisement else self._received()


@contextlib.contextmanager
def watch(port: int | None, where: str, doing: str, expects_pack: bool = False) -> Iterator[Watch]:
    """Watch one network operation on a hub reached on `port` (None: a hub on this machine,
    which is not watched). Only a fetch `expects_pack`: anything else a server sends is capped
    by MEMSYNC_MAX_ADVERTISEMENT."""
    watcher = Watch(port, limits(), where, doing, expects_pack)
    if port is not None:
        watcher.start()
    try:
        yield watcher
    finally:
        watcher.stop()


def _size(n: int) -> str:
    return f"{n / 2**20:g} MiB" if n >= 2**20 else f"{n:,} bytes"


def _socket_fds() -> Iterator[tuple[int, int]]:
    """(inode, descriptor) of this process's sockets."""
    try:
        names = os.listdir(_FD_DIR)
    except OSError:
        return
    for name in names:
        if not name.isdigit():
            continue
        fd = int(name)
        try:
            info = os.fstat(fd)
        except OSError:
            continue
        if stat.S_ISSOCK(info.st_mode):
            yield info.st_ino, fd


def _socket_ids() -> set[int]:
    return {ident for ident, _fd in _socket_fds()}


def _byte_counts(sock: socket.socket) -> tuple[int, int] | None:
    """(bytes sent and acknowledged, bytes received) on a TCP socket, or None where the kernel
    does not say."""
    if _TCP_INFO is None:
        return None
    try:
        info = sock.getsockopt(socket.IPPROTO_TCP, _TCP_INFO, 256)
    except OSError:
        return None
    if len(info) < _BYTES_AT + 16:
        return None
    acked, received = struct.unpack_from("=QQ", info, _BYTES_AT)
    return acked, received
