"""Rendering: plain lines for results, rich for tables, progress and colour; --json as JSON.

rich is imported only where a table, a progress bar or colour is drawn, to keep start-up lean.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from memsync.util import records
from memsync.util.textsafe import clean, terminal

if TYPE_CHECKING:  # pygit2 stays out of start-up (`memsync --version`)
    from memsync.git.transport import ProgressFn


def human_size(n: int) -> str:
    size = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{int(size)} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GB"


_gone = False  # stdout's reader went away: the rest of the output goes nowhere


@contextmanager
def stdout_writes() -> Iterator[None]:
    """Around every write to stdout. A reader that went away (a closed pipe: `memsync log |
    head -1`) ends the output quietly: the command's work goes on, and its exit code is its own.
    Any other failure (`> file` on a full disk) is an error about the output (OutputFailed, exit
    7), never taken for the memory's disk; the output is dropped from there on."""
    try:
        yield
    except BrokenPipeError:
        _drop_stdout()
    except OSError as exc:
        _drop_stdout()
        from memsync.errors import OutputFailed

        raise OutputFailed(exc.strerror or str(exc)) from exc


def _drop_stdout() -> None:
    """Point stdout at /dev/null, so that later writes and the flush at exit succeed unseen."""
    global _gone
    _gone = True
    _to_devnull(sys.stdout)


def _to_devnull(stream: TextIO) -> None:
    import os

    try:
        null = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(null, stream.fileno())
        finally:
            os.close(null)
    except (OSError, ValueError, AttributeError):
        pass


_err_gone = False  # stderr's reader went away (`memsync push 2>&1 | head -1`): messages go nowhere


def out(line: str = "") -> None:
    """Results on stdout. Any control or bidi character a renderer left in (text from the hub)
    is escaped here, so nothing reaches the terminal raw (see textsafe)."""
    if _gone:
        return
    with stdout_writes():
        sys.stdout.write(terminal(line, newlines=True) + "\n")
        sys.stdout.flush()


def err(line: str) -> None:
    """memsync's own messages: whole lines on stderr, flushed at once (never mid-line); one line
    each, whatever the text inside holds."""
    global _err_gone
    if _err_gone:
        return
    try:
        sys.stderr.write(terminal(line) + "\n")
        sys.stderr.flush()
    except BrokenPipeError:  # the command's exit code stays its own, never "a bug" (exit 1)
        _err_gone = True
        _to_devnull(sys.stderr)


def warn(line: str) -> None:
    err(f"warning: {line}")


def _plain(obj: Any) -> Any:
    if records.is_recordclass(obj) and not isinstance(obj, type):
        return {k: _plain(v) for k, v in records.asdict(obj).items()}
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    if isinstance(obj, Path):
        return str(obj)
    return obj


def print_json(obj: Any, stream: TextIO | None = None) -> None:
    import json  # only --json output needs it

    text = json.dumps(_plain(obj), indent=2, sort_keys=False) + "\n"
    if stream is not None:
        stream.write(text)
    elif not _gone:
        with stdout_writes():
            sys.stdout.write(text)
            sys.stdout.flush()


def table(headers: list[str], rows: list[list[str]]) -> None:
    """Aligned columns, never truncated (scripts and logs read them), header in bold on a terminal."""
    rows = [[clean(cell) for cell in row] for row in rows]
    widths = [max(len(cell) for cell in column) for column in zip(headers, *rows, strict=True)]

    def line(cells: list[str]) -> str:
        return "  ".join(cell.ljust(width) for cell, width in zip(cells, widths, strict=True)).rstrip()

    head = line(headers)
    if sys.stdout.isatty():
        with stdout_writes():
            sys.stdout.write(f"\033[1m{head}\033[0m\n")  # memsync's own escape, written past out()
    else:
        out(head)
    for row in rows:
        out(line(row))


@contextmanager
def transfer_progress() -> Iterator[ProgressFn | None]:
    """A rich progress bar on a terminal; nothing when stderr is not one."""
    if not sys.stderr.isatty():
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), transient=True, console=Console(stderr=True)) as bar:
        tasks: dict[str, Any] = {}

        def update(phase: str, done: int, total: int, nbytes: int) -> None:
            if total <= 0:
                return
            label = f"{phase} objects, {human_size(nbytes)}"
            if phase not in tasks:
                tasks[phase] = bar.add_task(label, total=total)
            bar.update(tasks[phase], completed=done, total=total, description=label)

        yield update


Segment = tuple[str, str]  # (text, rich style); the style is used on a terminal only


def styled(parts: list[Segment]) -> None:
    """One line on stdout from styled parts: plain when stdout is not a terminal."""
    if not sys.stdout.isatty():
        out("".join(text for text, _ in parts))
        return
    from rich.console import Console
    from rich.text import Text

    # Text, never a markup string: `[red]` or `[link=...]` in a path is shown as written
    safe = [(terminal(text), style) for text, style in parts]
    with stdout_writes():
        Console(highlight=False, soft_wrap=True).print(Text.assemble(*safe))


def unified_diff(chunks: list[bytes]) -> None:
    """Patches as git prints them: the bytes as they are into a pipe, coloured on a terminal."""
    if not sys.stdout.isatty():
        with stdout_writes():
            for data in chunks:
                if _gone:
                    break
                sys.stdout.buffer.write(data)
            sys.stdout.flush()
        return
    from rich.console import Console
    from rich.text import Text

    console = Console(highlight=False, soft_wrap=True)
    with stdout_writes():
        for data in chunks:
            for line in data.decode("utf-8", "replace").splitlines():
                console.print(Text(terminal(line), style=_diff_style(line)))


def _diff_style(line: str) -> str:
    if line.startswith(("diff --git", "index ", "--- ", "+++ ", "new file", "deleted file")):
        return "bold"
    if line.startswith("@@"):
        return "cyan"
    if line.startswith("+"):
        return "green"
    if line.startswith("-"):
        return "red"
    return ""


class LiveLine:
    """A status line kept at the bottom of a terminal, with messages printed above it."""

    def __init__(self, live: Any) -> None:
        self._live = live

    def message(self, stamp: str, text: str, warning: bool) -> None:
        from rich.text import Text

        line = Text(f"{stamp} ", style="dim")
        line.append(terminal(text), style="yellow" if warning else "")
        self._live.console.print(line)

    def status(self, text: str) -> None:
        from rich.text import Text

        self._live.update(Text(terminal(text), no_wrap=True, overflow="ellipsis"), refresh=True)


@contextmanager
def live_line() -> Iterator[LiveLine]:
    """A LiveLine on stderr (the caller checks that stderr is a terminal)."""
    from rich.console import Console
    from rich.live import Live

    with Live(console=Console(stderr=True), auto_refresh=False, transient=True) as live:
        yield LiveLine(live)
