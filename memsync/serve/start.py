"""`memsync serve`'s start, handed to the CLI by the entry point: the server sits above the CLI
it runs commands with, so the CLI reaches it through this function, never by importing it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path


def resident_server(socket: Path, idle: float, log: Callable[[str], None], track: bool) -> int:
    from memsync.serve.server import serve

    return serve(socket, idle, log, track=track)
