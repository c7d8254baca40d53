"""`memsync mcp`: memories served over MCP (stdio) with the official SDK: `pip install "memsync[mcp]"`.

Tools: view, read, create, str_replace, insert, delete, rename (the Claude memory tool's operations, from
memsync.integrations.files), log, diff, restore and search. Every write is a version of the run
(MEMSYNC_RUN_ID or a new id); read-only memories refuse writes, and a server whose every memory is
read-only offers the read tools only; memories are pulled when the server starts and pushed at
checkpoints and when the client disconnects (the write tools say so with `openWorldHint`). A line
on stdin that is not JSON gets a JSON-RPC parse error (-32700), one that is JSON but no JSON-RPC
message an invalid-request error (-32600), never silence.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, TypeVar

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from mcp.types import (
    INVALID_REQUEST,
    PARSE_ERROR,
    CallToolResult,
    ErrorData,
    InputRequiredResult,
    JSONRPCError,
    ToolAnnotations,
)
from pydantic import ValidationError

from memsync import __version__
from memsync.errors import MemsyncError
from memsync.integrations import arguments as argcheck
from memsync.integrations.budget import MAX_RESULT_TOKENS, cut_to_tokens, tokens
from memsync.integrations.files import MemoryFiles, Refused, Target, bound, failure_text
from memsync.integrations.options import DEFAULT_CHECKPOINT_SECONDS, DEFAULT_CHECKPOINT_WRITES
from memsync.integrations.search import MAX_VERSIONS
from memsync.integrations.search import search as search_memory
from memsync.integrations.session import MemorySession, SessionOptions, SessionReport
from memsync.run.mounts import Mount

TOOL = "mcp"
F = TypeVar("F", bound=Callable[..., str])
READ_TOOLS = ("view", "read", "log", "diff", "search")
WRITE_TOOLS = ("create", "str_replace", "insert", "delete", "rename", "restore")

# What each tool may do, for a client deciding what to confirm with its user (MCP tool annotations).
# A write reaches the hub (pushed at a checkpoint, then pulled by every other machine): open world,
# unless the server runs offline.
READS = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)


def _writes(*, destructive: bool, idempotent: bool, hub: bool) -> ToolAnnotations:
    return ToolAnnotations(read_only_hint=False, destructive_hint=destructive, idempotent_hint=idempotent,
                           open_world_hint=hub)


class MemoryServer(MCPServer):
    """MCPServer whose tools refuse arguments they do not take, and say what is wrong with a bad
    one in one line (the SDK ignores unknown ones and answers a wrong type with pydantic's dump)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.accepted: dict[str, set[str]] = {}

    def memory_tool(self, annotations: ToolAnnotations, *, offered: bool = True) -> Callable[[F], F]:
        """Register a tool (not if `offered` is false: a read-only server has no write tools)."""
        def register(fn: F) -> F:
            if not offered:
                return fn
            self.accepted[fn.__name__] = set(inspect.signature(fn).parameters)
            # structured_output=False: the text once, not again as structuredContent
            self.add_tool(fn, annotations=annotations, structured_output=False)
            return fn
        return register

    async def run_stdio_async(self) -> None:
        """The SDK's stdio loop, with an answer to a line that is not a JSON-RPC message (the
        SDK's transport hands such a line on as an exception, and the server drops it)."""
        async with stdio_server() as (read_stream, write_stream):
            send, receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)

            async def answer_bad_lines() -> None:
                async with send:
                    async for item in read_stream:
                        if isinstance(item, Exception):
                            await write_stream.send(SessionMessage(bad_line_error(item)))
                        else:
                            await send.send(item)

            async with anyio.create_task_group() as tasks:
                tasks.start_soon(answer_bad_lines)
                await self._lowlevel_server.run(receive, write_stream,
                                                self._lowlevel_server.create_initialization_options())

    async def call_tool(self, name: str, arguments: dict[str, Any],
                        context: Context[Any, Any] | None = None) -> CallToolResult | InputRequiredResult:
        accepted = self.accepted.get(name)
        refusal = argcheck.unknown(name, arguments, accepted) if accepted is not None else None
        if refusal is not None:
            raise ToolError(refusal)
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if isinstance(exc.__cause__, ValidationError):
                raise ToolError(argcheck.invalid(name, exc.__cause__.errors())) from None
            raise


def bad_line_error(exc: Exception) -> JSONRPCError:
    """-32700 for a line that is not JSON, -32600 for JSON that is no JSON-RPC message (id null:
    the request's id could not be read)."""
    parse = isinstance(exc, ValidationError) and any(e.get("type") == "json_invalid" for e in exc.errors())
    error = (ErrorData(code=PARSE_ERROR, message="Parse error: the line is not valid JSON") if parse else
             ErrorData(code=INVALID_REQUEST, message="Invalid Request: not a JSON-RPC 2.0 message"))
    return JSONRPCError(jsonrpc="2.0", id=None, error=error)


class Memories:
    """The served memories by name; the first is the default."""

    def __init__(self, mounts: list[Mount], *, remote: str | None, run_id: str | None, offline: bool,
                 checkpoint_writes: int, checkpoint_seconds: float, create: bool = False,
                 propose: bool = False) -> None:
        self.files: dict[str, MemoryFiles] = {}
        for m in mounts:
            options = SessionOptions(remote=remote, run_id=run_id, read_only=m.read_only, offline=offline,
                                     create=create, checkpoint_writes=checkpoint_writes,
                                     checkpoint_seconds=checkpoint_seconds, propose=propose)
            session = MemorySession(m.name, m.path, options, tool=TOOL)
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

    @property
    def writable(self) -> bool:
        """Some memory takes writes (else only the read tools are offered)."""
        return any(not f.session.read_only for f in self.files.values())

    @property
    def reaches_hub(self) -> bool:
        """A write is pushed to a hub (not an offline server)."""
        return any(not f.session.read_only and not f.session.offline for f in self.files.values())

    def describe(self) -> str:
        lines = []
        for name, f in self.files.items():
            mode = "read-only" if f.session.read_only else "read-write"
            lines.append(f"- {name} ({mode}) at {f.session.root}")
        return "\n".join(lines)


def _call(op: Callable[[], str]) -> str:
    """A tool's result, or its failure as a ToolError; either bounded to MAX_RESULT_TOKENS."""
    try:
        return bound(op(), "ask for less (a path, a smaller limit, view_range, read's offset and length)")
    except (MemsyncError, OSError) as exc:
        raise ToolError(bound(failure_text(exc))) from None


def _target(f: MemoryFiles, path: str, *, follow: bool = True) -> Target:
    if path.strip() in ("", "/", "."):
        return f.target("", "/")  # the memory's root, shown as "/" (its files as "/a.md")
    return f.target(path.strip().lstrip("/"), path, follow=follow)


def build(memories: Memories, *, search_versions: int = MAX_VERSIONS) -> MemoryServer:
    """The MCP server over `memories`. `search_versions`: how many past versions a history search
    looks at (the newest; the answer names what it left out)."""
    server = MemoryServer(
        "memsync",
        version=__version__,
        log_level="WARNING",  # a refused write is the model's business, not a server log line
        instructions="Git-backed memories. Every write is a version attributed to this run; `log`, `diff` "
        "and `restore` reach any past version; `search` greps the files and, with history=true, what past "
        "versions held. Paths are relative to the memory. Served memories:\n" + memories.describe(),
    )
    _file_tools(server, memories)
    _history_tools(server, memories, search_versions)
    return server


def _file_tools(server: MemoryServer, memories: Memories) -> None:
    """The memory tool's file commands: view, read, create, str_replace, insert, delete, rename."""
    hub, writable = memories.reaches_hub, memories.writable
    adds = _writes(destructive=False, idempotent=False, hub=hub)
    changes = _writes(destructive=True, idempotent=False, hub=hub)

    @server.memory_tool(READS)
    def view(path: str = "", memory: str | None = None, view_range: list[int] | None = None) -> str:
        """A directory listing (2 levels) or a file with line numbers (view_range: [first, last], -1 = end).
        A file's view starts with its sha256, to pass as expected_sha256 to a later write. A result holds
        about 15,000 tokens (60,000 characters of English, 15,000 of CJK): a longer file's view ends saying
        which view_range shows the rest."""
        def op() -> str:
            f = memories.get(memory)
            t = _target(f, path)
            text = f.view(t, view_range)
            return f"sha256: {f.seen[t.rel]}\n{text}" if f.viewed_file and t.rel in f.seen else text
        return _call(op)

    @server.memory_tool(READS)
    def read(path: str, memory: str | None = None, offset: int = 0, length: int | None = None) -> str:
        """A file's text exactly as stored (no line numbers); `view` shows its sha256. At most about 15,000
        tokens a call (60,000 characters of English, 15,000 of CJK): read a longer file in parts with offset
        and length (in characters)."""
        def op() -> str:
            f = memories.get(memory)
            t = _target(f, path)
            data = f.read(t)
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                raise Refused(f"{path} is not UTF-8 text") from None
            return _part(path, text, offset, length)
        return _call(op)

    @server.memory_tool(adds, offered=writable)
    def create(path: str, file_text: str, memory: str | None = None, confirm: bool = False) -> str:
        """Create a new file (refused if it exists: edit it with str_replace or insert)."""
        return _call(lambda: (f := memories.get(memory)).create(_target(f, path), file_text, confirm=confirm))

    @server.memory_tool(changes, offered=writable)
    def str_replace(path: str, old_str: str, new_str: str, memory: str | None = None,
                    expected_sha256: str | None = None, confirm: bool = False) -> str:
        """Replace the one occurrence of old_str (it must appear exactly once) with new_str."""
        return _call(lambda: (f := memories.get(memory)).str_replace(
            _target(f, path), old_str, new_str, expected_sha256=expected_sha256, confirm=confirm))

    @server.memory_tool(adds, offered=writable)
    def insert(path: str, insert_line: int, insert_text: str, memory: str | None = None,
               expected_sha256: str | None = None, confirm: bool = False) -> str:
        """Insert text after line insert_line (0 = at the top)."""
        return _call(lambda: (f := memories.get(memory)).insert(
            _target(f, path), insert_line, insert_text, expected_sha256=expected_sha256, confirm=confirm))

    @server.memory_tool(changes, offered=writable)
    def delete(path: str, memory: str | None = None, expected_sha256: str | None = None,
               confirm: bool = False) -> str:
        """Delete a file or a directory (older versions stay in history); a symlink is removed itself,
        never what it points at."""
        return _call(lambda: (f := memories.get(memory)).delete(
            _target(f, path, follow=False), expected_sha256=expected_sha256, confirm=confirm))

    @server.memory_tool(changes, offered=writable)
    def rename(old_path: str, new_path: str, memory: str | None = None,
               expected_sha256: str | None = None) -> str:
        """Rename or move a file or directory (refused if the destination exists)."""
        return _call(lambda: (f := memories.get(memory)).rename(
            _target(f, old_path, follow=False), _target(f, new_path, follow=False), expected_sha256=expected_sha256))


def _history_tools(server: MemoryServer, memories: Memories, search_versions: int) -> None:
    """What versions give: log, diff, restore and search (history=true reads past versions)."""
    puts_back = _writes(destructive=True, idempotent=True, hub=memories.reaches_hub)

    @server.memory_tool(READS)
    def log(path: str | None = None, memory: str | None = None, run_id: str | None = None,
            flagged: bool = False, limit: int = 20) -> str:
        """The memory's versions (or one file's), newest first: version, time, actor, run, subject, flags."""
        return _call(lambda: _log(memories.get(memory), path, run_id, flagged, limit))

    @server.memory_tool(READS)
    def diff(rev: str | None = None, rev2: str | None = None, path: str | None = None,
             memory: str | None = None) -> str:
        """What version `rev` changed (or from rev to rev2); a rev is a version, a ref or run:<id>."""
        return _call(lambda: _diff(memories.get(memory), [r for r in (rev, rev2) if r], path))

    @server.memory_tool(puts_back, offered=memories.writable)
    def restore(path: str, at: str, memory: str | None = None) -> str:
        """Put a file (or directory) back byte for byte as it was at version `at`, as a new version."""
        return _call(lambda: _restore(memories.get(memory), path, at))

    @server.memory_tool(READS)
    def search(pattern: str, memory: str | None = None, path: str | None = None, history: bool = False,
               ignore_case: bool = False, limit: int = 50) -> str:
        """Lines matching a regular expression in the current files; history=true adds lines that past
        versions held and the current files no longer do (with the version that held them)."""
        return _call(lambda: _search(memories.get(memory), pattern, path, history, ignore_case, limit,
                                     search_versions))


def _part(path: str, text: str, offset: int, length: int | None) -> str:
    """`read`'s text from `offset`, whole or refused: a cut text could be mistaken for the file."""
    if offset < 0 or (length is not None and length < 0):
        raise Refused("offset and length are 0 or more")
    rest = text[offset:] if length is None else text[offset:offset + length]
    if tokens(rest) <= MAX_RESULT_TOKENS:
        return rest
    fits = len(cut_to_tokens(text[offset:], MAX_RESULT_TOKENS))
    if length is None:
        raise Refused(f"{path} is {len(text):,} characters long, more than one result holds (about "
                      f"{MAX_RESULT_TOKENS:,} tokens); read it in parts: offset={offset} length={fits}, then "
                      f"offset={offset + fits} and so on (or view it with a view_range)")
    raise Refused(f"length is at most {fits:,} characters of this text from offset {offset} (one result holds "
                  f"about {MAX_RESULT_TOKENS:,} tokens); read the rest in another call")


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
    if tokens(text) > MAX_RESULT_TOKENS - 200:
        text = cut_to_tokens(text, MAX_RESULT_TOKENS - 200) + (
            f"\n… cut at about {MAX_RESULT_TOKENS - 200:,} tokens; name a path to see one file")
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


def _search(f: MemoryFiles, pattern: str, path: str | None, past: bool, ignore_case: bool, limit: int,
            versions: int) -> str:
    under = _target(f, path).rel if path else ""
    found = search_memory(f.session.memory, pattern, under=under, past=past, ignore_case=ignore_case,
                          limit=max(1, min(limit, 500)), max_versions=versions, root_id=f.session.root_id)
    lines = [(f"{h.version} " if h.version else "") + f"{h.path}:{h.line}: {h.text}" for h in found.hits]
    if found.cut:
        lines.append(f"… more matches; only the first {len(found.hits)} are shown")
    # "no matches" only when everything was searched: an agent told its notes do not exist is seed 004
    lines += [f"… not searched: {what}" for what in found.unsearched]
    return "\n".join(lines) or "no matches"


def serve(mounts: list[Mount], *, remote: str | None = None, run_id: str | None = None, offline: bool = False,
          checkpoint_writes: int = DEFAULT_CHECKPOINT_WRITES,
          checkpoint_seconds: float = DEFAULT_CHECKPOINT_SECONDS, create: bool = False,
          propose: bool = False) -> list[SessionReport]:
    """Open the memories, serve MCP on stdin/stdout until the client leaves, then push. A memory the
    hub does not have is refused unless `create`; with `propose`, each writable memory's versions
    go to the proposal `proposals/<name>/<run-id>` and the memory does not move."""
    memories = Memories(mounts, remote=remote, run_id=run_id, offline=offline,
                        checkpoint_writes=checkpoint_writes, checkpoint_seconds=checkpoint_seconds, create=create,
                        propose=propose)
    try:
        memories.open()
        build(memories).run("stdio")
    finally:
        reports = memories.close()
    return reports


__all__ = ["Memories", "build", "serve"]
