"""What every verb module shares with the app that registers it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

# Wraps a command so that its errors become `error:`/`hint:` lines and exit codes (app.handle_errors).
CommandWrapper = Callable[[Callable[..., Any]], Callable[..., Any]]

# `memsync serve`'s server, given by the entry point (the server is a layer above the CLI, which it
# runs commands with): (socket, idle seconds, log line, track) -> exit code. None when the CLI was
# not started as the `memsync` command (in-process callers, a served command).
ResidentServer = Callable[[Path, float, Callable[[str], None], bool], int]
resident_server: ResidentServer | None = None
