"""Serving the page: a socket on 127.0.0.1 (a free port unless one is given), uvicorn in the
foreground until Ctrl-C or SIGTERM, a browser opened on the URL where one is available."""

from __future__ import annotations

import contextlib
import secrets
import signal
import socket
import threading
from collections.abc import Callable, Iterator

import uvicorn

from memsync.errors import UsageError
from memsync.ui.app import build
from memsync.ui.hubview import HubView
from memsync.util.threads import helper_body


class Page:
    """One page: its socket, URL and server; `run` serves in the calling thread, `stop` ends it."""

    def __init__(self, remote: str | None, memories: list[str] | None, port: int = 0,
                 read_only: bool = False) -> None:
        self.view = HubView(remote, memories)
        self.sock = _listen(port)
        self.port = int(self.sock.getsockname()[1])
        self.token = secrets.token_urlsafe(32)
        self.url = f"http://127.0.0.1:{self.port}/?token={self.token}"
        config = uvicorn.Config(build(self.view, self.token, self.port, read_only), lifespan="off",
                                log_level="warning", access_log=False, server_header=False,
                                date_header=False, proxy_headers=False)
        self.server = uvicorn.Server(config)

    def run(self) -> None:
        try:
            self.server.run(sockets=[self.sock])
        finally:
            self.sock.close()

    def started(self) -> bool:
        return bool(self.server.started)

    def stop(self) -> None:
        self.server.should_exit = True


def _listen(port: int) -> socket.socket:
    if not 0 <= port <= 65535:
        raise UsageError(f"--port {port} is not a port", "give 1-65535, or leave it out for a free one")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(("127.0.0.1", port))
    except OSError as exc:
        sock.close()
        raise UsageError(f"cannot listen on 127.0.0.1:{port}: {exc.strerror}",
                         "leave --port out for a free port") from None
    sock.listen(64)
    sock.set_inheritable(True)
    return sock


def serve(remote: str | None, memories: list[str] | None, port: int, read_only: bool, open_browser: bool,
          say: Callable[[str], None], note: Callable[[str], None]) -> int:
    """Serve until Ctrl-C (or SIGTERM); 0 when stopped so. The URL goes to `say` (stdout), the
    rest to `note` (stderr)."""
    page = Page(remote, memories, port, read_only)
    note(f"memsync ui: {page.view.display}{' (read-only)' if read_only else ''}; Ctrl-C stops it")
    say(page.url)
    if open_browser:
        threading.Thread(target=helper_body(_open), args=(page,), daemon=True).start()
    with _stopped_by_signals():
        page.run()
    note("memsync ui: stopped")
    return 0


class _Stopped(Exception):
    """Ctrl-C or SIGTERM, once uvicorn has shut down (it raises the signal it caught again)."""


def _stop(signum: int, frame: object) -> None:
    raise _Stopped


@contextlib.contextmanager
def _stopped_by_signals() -> Iterator[None]:
    """While serving, Ctrl-C and SIGTERM stop the page and end the command with 0 (the CLI's own
    Ctrl-C handler would call the stop an interruption, exit 130)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, _stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        with contextlib.suppress(_Stopped, KeyboardInterrupt):
            yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _open(page: Page) -> None:
    import time
    import webbrowser

    deadline = time.monotonic() + 10
    while not page.started() and time.monotonic() < deadline:
        time.sleep(0.05)
    if not _graphical():
        return  # the printed URL is the way in
    try:
        webbrowser.get()
    except webbrowser.Error:
        return  # no browser on this machine
    webbrowser.open(page.url)


def _graphical() -> bool:
    """Whether a browser would open in a window: on Linux and the BSDs only with a display (or a
    $BROWSER the operator chose); else webbrowser falls back to a text browser (lynx, w3m) that
    would take over the terminal the page's URL and Ctrl-C are in."""
    import os
    import sys

    if sys.platform in ("darwin", "win32"):
        return True
    return any(os.environ.get(k) for k in ("DISPLAY", "WAYLAND_DISPLAY", "BROWSER"))
