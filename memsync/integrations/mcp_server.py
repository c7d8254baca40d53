"""`memsync mcp`: memories served over MCP (stdio) with the official SDK: `pip install "memsync[mcp]"`.

Tools: view, read, create, str_replace, insert, delete, rename (the Claude memory tool's operations, from
memsync.integrations.files), log, diff, restore and search. Every write is a version of the run
(MEMSYNC_RUN_ID or a new id); read-only memories refuse writes; memories are pulled when the
server starts and pushed at checkpoints and when the client disconnects.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from memsync.errors import MemsyncError
from memsync.integrations.files import MemoryFiles, Refused, Target, failure_text
from memsync.integrations.session import MemorySession, SessionReport
from memsync.run.execute import Mount

TOOL = "mcp"
MAX_DIFF_CHARS = 60_000
T = TypeVar("T")


class Memories:
    """The served memories by name; the first is the default."""

    def __init__(self, mounts: list[Mount], *, remote: str | None, run_id: str | None, offline: bool,
                 checkpoint_writes: int, checkpoint_seconds: float) -> None:
        self.files: dict[str, MemoryFiles] = {}
        for m in mounts:
            session = MemorySession(m.name, m.path, remote=remote, run_id=run_id, read_only=m.read_only,
                                    offline=offline, create=not m.read_only, checkpoint_writes=checkpoint_writes,
                                    checkpoint_seconds=checkpoint_seconds, tool=TOOL)
            self.files[m.name] = MemoryFiles(session, tool=TOOL, root_name=m.name)

    def open(self) -> None:
        for f in self.files.values():
            f.session.open()

    def close(self) -> list[SessionReport]:
        """Close every open memory; one failing does not keep the others from being pushed."""
        reports = []
        for f in self.files.values():
            if not f.session.is_open:
                continue
            try:
                reports.append(f.session.close())
            except MemsyncError as exc:
                s = f.session
                reports.append(SessionReport(s.name, s.run_id, None, s.writes, pushed=False, error=exc.message,
                                             read_only=s.read_only))
        return reports

    def get(self, name: str | None) -> MemoryFiles:
        if name is None or name == "":
            return next(iter(self.files.values()))
        if name not in self.files:
            raise Refused(f"no memory {name!r} is served here; served: {', '.join(self.files)}")
        return self.files[name]

    def describe(self) -> str:
        lines = []
        for name, f in self.files.items():
            mode = "read-only" if f.session.read_only else "read-write"
            lines.append(f"- {name} ({mode}) at {f.session.root}")
        return "\n".join(lines)


def _call(op: Callable[[], T]) -> T:
    try:
        return op()
    except (MemsyncError, OSError) as exc:
        raise ToolError(failure_text(exc)) from None


def _target(f: MemoryFiles, path: str) -> Target:
    return f.target(path.strip().lstrip("/") if path.strip() not in ("", "/", ".") else "", path or "/")


def build(memories: Memories) -> MCPServer:
    server = MCPServer(
        "memsync",
        log_level="WARNING",  # a refused write is the model's business, not a server log line
        instructions="Git-backed memories. Every write is a version attributed to this run; `log`, `diff` "
        "and `restore` reach any past version; `search` greps the files and, with history=true, what past "
        "versions held. Paths are relative to the memory. Served memories:\n" + memories.describe(),
    )

    @server.tool()
    def view(path: str = "", memory: str | None = None, view_range: list[int] | None = None) -> str:
        """A directory listing (2 levels) or a file with line numbers (view_range: [first, last], -1 = end).
        A file's view starts with its sha256, to pass as expected_sha256 to a later write."""
        def op() -> str:
            f = memories.get(memory)
            t = _target(f, path)
            text = f.view(t, view_range)
            return f"sha256: {f.seen[t.rel]}\n{text}" if t.rel in f.seen and t.full.is_file() else text
        return _call(op)

    @server.tool()
    def read(path: str, memory: str | None = None) -> str:
        """A file's text exactly as stored (no line numbers); `view` shows its sha256."""
        def op() -> str:
            f = memories.get(memory)
            t = _target(f, path)
            data = f.read(t)
            try:
                return data.decode("utf-8")
            except UnicodeDecodeError:
                raise Refused(f"{path} is not UTF-8 text") from None
        return _call(op)

    @server.tool()
    def create(path: str, file_text: str, memory: str | None = None, confirm: bool = False) -> str:
        """Create a new file (refused if it exists: edit it with str_replace or insert)."""
        return _call(lambda: (f := memories.get(memory)).create(_target(f, path), file_text, confirm=confirm))

    @server.tool()
    def str_replace(path: str, old_str: str, new_str: str, memory: str | None = None,
                    expected_sha256: str | None = None, confirm: bool = False) -> str:
        """Replace the one occurrence of old_str (it must appear exactly once) with new_str."""
        return _call(lambda: (f := memories.get(memory)).str_replace(
            _target(f, path), old_str, new_str, expected_sha256=expected_sha256, confirm=confirm))

    @server.tool()
    def insert(path: str, insert_line: int, insert_text: str, memory: str | None = None,
               expected_sha256: str | None = None, confirm: bool = False) -> str:
        """Insert text after line insert_line (0 = at the top)."""
        return _call(lambda: (f := memories.get(memory)).insert(
            _target(f, path), insert_line, insert_text, expected_sha256=expected_sha256, confirm=confirm))

    @server.tool()
    def delete(path: str, memory: str | None = None, expected_sha256: str | None = None,
               confirm: bool = False) -> str:
        """Delete a file or a directory (older versions stay in history)."""
        return _call(lambda: (f := memories.get(memory)).delete(
            _target(f, path), expected_sha256=expected_sha256, confirm=confirm))

    @server.tool()
    def rename(old_path: str, new_path: str, memory: str | None = None,
               expected_sha256: str | None = None) -> str:
        """Rename or move a file or directory (refused if the destination exists)."""
        return _call(lambda: (f := memories.get(memory)).rename(
            _target(f, old_path), _target(f, new_path), expected_sha256=expected_sha256))

    @server.tool()
    def log(path: str | None = None, memory: str | None = None, run_id: str | None = None,
            flagged: bool = False, limit: int = 20) -> str:
        """The memory's versions (or one file's), newest first: version, time, actor, run, subject, flags."""
        return _call(lambda: _log(memories.get(memory), path, run_id, flagged, limit))

    @server.tool()
    def diff(rev: str | None = None, rev2: str | None = None, path: str | None = None,
             memory: str | None = None) -> str:
        """What version `rev` changed (or from rev to rev2); a rev is a version, a ref or run:<id>."""
        return _call(lambda: _diff(memories.get(memory), [r for r in (rev, rev2) if r], path))

    @server.tool()
    def restore(path: str, at: str, memory: str | None = None) -> str:
        """Put a file (or directory) back byte for byte as it was at version `at`, as a new version."""
        return _call(lambda: _restore(memories.get(memory), path, at))

    @server.tool()
    def search(pattern: str, memory: str | None = None, path: str | None = None, history: bool = False,
               ignore_case: bool = False, limit: int = 50) -> str:
        """Lines matching a regular expression in the current files; history=true adds lines that past
        versions held and the current files no longer do (with the version that held them)."""
        return _call(lambda: _search(memories.get(memory), pattern, path, history, ignore_case, limit))

    return server


def _log(f: MemoryFiles, path: str | None, run_id: str | None, flagged: bool, limit: int) -> str:
    from memsync.history import forensics

    rel = _target(f, path).rel if path else None
    result = forensics.log(f.session.root, rel, run_id=run_id, flagged=flagged, limit=max(0, min(limit, 500)))
    lines = []
    for e in result.versions:
        who = e.actor + (f" {e.run_id}" if e.run_id else "")
        line = f"{e.version} {e.time} {who}: {e.subject} (+{e.bytes_added}/-{e.bytes_removed} bytes)"
        line += "".join(f" [flag: {x}]" for x in e.flags) + "".join(f" [policy: {x}]" for x in e.policies)
        lines.append(line)
    return "\n".join(lines) or "no versions"


def _diff(f: MemoryFiles, revs: list[str], path: str | None) -> str:
    from memsync.history import forensics

    paths = [_target(f, path).rel] if path else None
    result = forensics.diff(f.session.root, revs, paths)
    text = b"".join(p.data for p in result.patches).decode("utf-8", errors="replace")
    if len(text) > MAX_DIFF_CHARS:
        text = text[:MAX_DIFF_CHARS] + f"\n… cut at {MAX_DIFF_CHARS} characters; name a path to see one file"
    return f"{result.old} -> {result.new}\n{text}" if text else f"{result.old} -> {result.new}: no changes"


def _restore(f: MemoryFiles, path: str, at: str) -> str:
    from memsync.history import forensics

    session = f.session
    t = _target(f, path)
    f._writable(t)
    with session.serialised():
        outcome = forensics.restore(session.root, [t.rel], at, remote=session.remote, run_id=session.run_id)
    for state in outcome.files:
        f.seen.pop(state.path, None)
    if outcome.version is None:
        return f"{path} is already as it was at {outcome.source[:8]}; nothing changed"
    names = ", ".join(s.path for s in outcome.files)
    pushed = "pushed" if outcome.pushed else "committed locally (push pending)"
    return f"restored {names} as at {outcome.source[:8]}: version {outcome.version[:8]}, {pushed}"


def _search(f: MemoryFiles, pattern: str, path: str | None, past: bool, ignore_case: bool, limit: int) -> str:
    from memsync.integrations.search import search

    under = _target(f, path).rel if path else ""
    hits, cut = search(f.session.memory, pattern, under=under, past=past, ignore_case=ignore_case,
                       limit=max(1, min(limit, 500)))
    lines = [(f"{h.version} " if h.version else "") + f"{h.path}:{h.line}: {h.text}" for h in hits]
    if cut:
        lines.append(f"… more matches; only the first {len(hits)} are shown")
    return "\n".join(lines) or "no matches"


def serve(mounts: list[Mount], *, remote: str | None = None, run_id: str | None = None, offline: bool = False,
          checkpoint_writes: int = 20, checkpoint_seconds: float = 30.0) -> list[SessionReport]:
    """Open the memories, serve MCP on stdin/stdout until the client leaves, then push."""
    memories = Memories(mounts, remote=remote, run_id=run_id, offline=offline,
                        checkpoint_writes=checkpoint_writes, checkpoint_seconds=checkpoint_seconds)
    try:
        memories.open()
        build(memories).run("stdio")
    finally:
        reports = memories.close()
    return reports


__all__ = ["Memories", "build", "serve"]
