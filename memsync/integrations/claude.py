"""A git-backed backend for Claude's memory tool (`memory_20250818`): `pip install "memsync[claude]"`.

    from anthropic import Anthropic
    from memsync.integrations.claude import MemsyncMemoryTool

    with MemsyncMemoryTool("research") as memory:        # pulls the memory (clones ./research)
        Anthropic().beta.messages.tool_runner(model=..., tools=[memory], messages=[...]).until_done()
    # every write was a version of the run; the last ones are pushed on exit

The tool's `/memories` directory is the memory's work tree. Each write (create, str_replace, insert,
delete, rename) is one commit with `Memsync-Actor: run` and the run id (MEMSYNC_RUN_ID inside
`memsync run`, else `run_id=`, else a new one). A write the integrity guard finds destructive is
refused once with an explanation; repeating the same command makes it (flagged in history). A
command may carry an extra `expected_sha256` (the file's hash it edits) and `confirm: true`; by
default a file the model viewed must not have changed since. A memory the hub does not have is
refused (naming those it has) unless `create=True`, as `memsync run` and `memsync mcp` refuse it
without `--create`. Errors reach the model as tool errors,
one line each (a wrong or unknown argument too). `report_versions=False` drops the ` (version
1a2b3c4d)` a write's result ends with, for the SDK reference tool's exact strings.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypedDict

from memsync.util.records import fields

try:
    from anthropic.lib.tools import (
        BetaAbstractMemoryTool,
        BetaAsyncAbstractMemoryTool,
        BetaFunctionToolResultType,
        ToolError,
    )
    from anthropic.types.beta import (
        BetaCacheControlEphemeralParam,
        BetaMemoryTool20250818Command,
        BetaMemoryTool20250818CreateCommand,
        BetaMemoryTool20250818DeleteCommand,
        BetaMemoryTool20250818InsertCommand,
        BetaMemoryTool20250818RenameCommand,
        BetaMemoryTool20250818StrReplaceCommand,
        BetaMemoryTool20250818ViewCommand,
    )
    from anyio.to_thread import run_sync
    from pydantic import ValidationError
    from typing_extensions import Unpack  # the SDK's own dependency (typing.Unpack is 3.11+)
except ModuleNotFoundError as exc:  # the extra is not installed
    raise ModuleNotFoundError(f'memsync.integrations.claude needs {exc.name}: pip install "memsync[claude]"',
                              name=exc.name) from exc

from memsync.errors import MemsyncError
from memsync.integrations import arguments
from memsync.integrations.files import FileOptions, MemoryFiles, Refused, Target, bound, failure_text
from memsync.integrations.session import MemorySession, SessionOptions, SessionReport

ROOT = "/memories"
TOOL = "memory_20250818"
EXTRA_ARGUMENTS = ("expected_sha256", "confirm")  # memsync's own, beside the SDK's command fields
_COMMANDS: dict[str, type[BetaMemoryTool20250818Command]] = {
    "view": BetaMemoryTool20250818ViewCommand, "create": BetaMemoryTool20250818CreateCommand,
    "str_replace": BetaMemoryTool20250818StrReplaceCommand, "insert": BetaMemoryTool20250818InsertCommand,
    "delete": BetaMemoryTool20250818DeleteCommand, "rename": BetaMemoryTool20250818RenameCommand,
}


class ToolOptions(TypedDict, total=False):
    """The keyword options of MemsyncMemoryTool and AsyncMemsyncMemoryTool: those of the session
    (SessionOptions: remote, run_id, read_only, offline, create, propose, checkpoint_writes,
    checkpoint_seconds) and of the file operations (FileOptions: check_seen, confirm_destructive,
    report_versions), with their defaults."""

    remote: str | None
    run_id: str | None
    read_only: bool
    offline: bool
    create: bool
    propose: bool
    checkpoint_writes: int
    checkpoint_seconds: float
    check_seen: bool
    confirm_destructive: bool
    report_versions: bool


_SESSION_FIELDS = tuple(f.name for f in fields(SessionOptions))
_FILE_FIELDS = tuple(f.name for f in fields(FileOptions))


class _Backend:
    """The memory behind both tool classes; every public method returns the model's text or
    raises ToolError."""

    def __init__(self, memory: str, path: Path | str | None, options: ToolOptions) -> None:
        unknown = set(options) - set(_SESSION_FIELDS) - set(_FILE_FIELDS)
        if unknown:
            raise TypeError(f"unknown option(s): {', '.join(sorted(unknown))}")
        session = SessionOptions(**{k: v for k, v in options.items() if k in _SESSION_FIELDS})  # type: ignore[arg-type]
        files = FileOptions(**{k: v for k, v in options.items() if k in _FILE_FIELDS})  # type: ignore[arg-type]
        self.session = MemorySession(memory, path, session, tool=TOOL)
        self.files = MemoryFiles(self.session, files, tool=TOOL, root_name=ROOT)
        self._opened = False

    def open(self) -> None:
        if not self._opened:
            self.session.open()
            self._opened = True

    def close(self) -> SessionReport | None:
        if not self._opened:
            return None
        self._opened = False
        return self.session.close()

    def target(self, path: str, *, follow: bool = True) -> Target:
        rest = path[len(ROOT):] if path.startswith(ROOT) else None
        if rest is None or (rest and not rest.startswith("/")):
            raise Refused(f"Path must start with {ROOT}, got: {path}")
        return self.files.target(rest.lstrip("/"), path, follow=follow)

    def command(self, raw: object) -> BetaMemoryTool20250818Command:
        """The model's input as a command, or a one-line ToolError (a wrong type, a missing or an
        unknown argument), where the SDK's own dispatch would fail with an AttributeError."""
        if not isinstance(raw, dict):
            raise ToolError("Invalid arguments for the memory tool: expected an object with a `command`")
        name = raw.get("command")
        model = _COMMANDS.get(name) if isinstance(name, str) else None
        if model is None or not isinstance(name, str):
            raise ToolError(f"Invalid arguments for the memory tool: command must be one of {', '.join(_COMMANDS)}")
        try:
            command = model.model_validate(raw)
        except ValidationError as exc:
            raise ToolError(arguments.invalid(name, exc.errors())) from None
        refusal = arguments.unknown(name, raw, {*model.model_fields, *EXTRA_ARGUMENTS})
        if refusal is not None:
            raise ToolError(refusal)
        return command

    def view(self, c: BetaMemoryTool20250818ViewCommand) -> str:
        return self._do(lambda: self.files.view(self.target(c.path), c.view_range))

    def create(self, c: BetaMemoryTool20250818CreateCommand) -> str:
        return self._do(lambda: self.files.create(self.target(c.path), c.file_text, confirm=_confirm(c)))

    def str_replace(self, c: BetaMemoryTool20250818StrReplaceCommand) -> str:
        return self._do(lambda: self.files.str_replace(self.target(c.path), c.old_str, c.new_str,
                                                       expected_sha256=_expected(c), confirm=_confirm(c)))

    def insert(self, c: BetaMemoryTool20250818InsertCommand) -> str:
        return self._do(lambda: self.files.insert(self.target(c.path), c.insert_line, c.insert_text,
                                                  expected_sha256=_expected(c), confirm=_confirm(c)))

    def delete(self, c: BetaMemoryTool20250818DeleteCommand) -> str:
        return self._do(lambda: self.files.delete(self.target(c.path, follow=False), expected_sha256=_expected(c),
                                                  confirm=_confirm(c)))

    def rename(self, c: BetaMemoryTool20250818RenameCommand) -> str:
        return self._do(lambda: self.files.rename(self.target(c.old_path, follow=False),
                                                  self.target(c.new_path, follow=False),
                                                  expected_sha256=_expected(c)))

    def _do(self, op: Callable[[], str]) -> str:
        try:
            self.open()
            return bound(op(), "view a smaller view_range")
        except (MemsyncError, OSError) as exc:
            raise ToolError(bound(failure_text(exc))) from None


def _extra(command: Any, key: str) -> Any:
    extra = getattr(command, "model_extra", None) or {}
    return extra.get(key)


def _expected(command: Any) -> str | None:
    value = _extra(command, "expected_sha256")
    return value if isinstance(value, str) and value else None


def _confirm(command: Any) -> bool:
    return _extra(command, "confirm") is True


class MemsyncMemoryTool(BetaAbstractMemoryTool):
    """Claude's memory tool on a memsync memory. `open()` (or `with`) pulls it, `close()` pushes.
    Without `open()` the first command opens it (and an error doing so reaches the model)."""

    def __init__(self, memory: str, path: Path | str | None = None, *,
                 cache_control: BetaCacheControlEphemeralParam | None = None, **options: Unpack[ToolOptions]) -> None:
        super().__init__(cache_control=cache_control)
        self._backend = _Backend(memory, path, options)

    @property
    def session(self) -> MemorySession:
        return self._backend.session

    def open(self) -> MemsyncMemoryTool:
        self._backend.open()
        return self

    def close(self) -> SessionReport | None:
        return self._backend.close()

    def __enter__(self) -> MemsyncMemoryTool:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def call(self, input: object) -> BetaFunctionToolResultType:
        return self.execute(self._backend.command(input))

    def view(self, command: BetaMemoryTool20250818ViewCommand) -> str:
        return self._backend.view(command)

    def create(self, command: BetaMemoryTool20250818CreateCommand) -> str:
        return self._backend.create(command)

    def str_replace(self, command: BetaMemoryTool20250818StrReplaceCommand) -> str:
        return self._backend.str_replace(command)

    def insert(self, command: BetaMemoryTool20250818InsertCommand) -> str:
        return self._backend.insert(command)

    def delete(self, command: BetaMemoryTool20250818DeleteCommand) -> str:
        return self._backend.delete(command)

    def rename(self, command: BetaMemoryTool20250818RenameCommand) -> str:
        return self._backend.rename(command)


class AsyncMemsyncMemoryTool(BetaAsyncAbstractMemoryTool):
    """The async twin of MemsyncMemoryTool (git work runs on a worker thread)."""

    def __init__(self, memory: str, path: Path | str | None = None, *,
                 cache_control: BetaCacheControlEphemeralParam | None = None, **options: Unpack[ToolOptions]) -> None:
        super().__init__(cache_control=cache_control)
        self._backend = _Backend(memory, path, options)

    @property
    def session(self) -> MemorySession:
        return self._backend.session

    async def open(self) -> AsyncMemsyncMemoryTool:
        await run_sync(self._backend.open)
        return self

    async def close(self) -> SessionReport | None:
        return await run_sync(self._backend.close)

    async def __aenter__(self) -> AsyncMemsyncMemoryTool:
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def call(self, input: object) -> BetaFunctionToolResultType:
        return await self.execute(self._backend.command(input))

    async def view(self, command: BetaMemoryTool20250818ViewCommand) -> str:
        return await run_sync(self._backend.view, command)

    async def create(self, command: BetaMemoryTool20250818CreateCommand) -> str:
        return await run_sync(self._backend.create, command)

    async def str_replace(self, command: BetaMemoryTool20250818StrReplaceCommand) -> str:
        return await run_sync(self._backend.str_replace, command)

    async def insert(self, command: BetaMemoryTool20250818InsertCommand) -> str:
        return await run_sync(self._backend.insert, command)

    async def delete(self, command: BetaMemoryTool20250818DeleteCommand) -> str:
        return await run_sync(self._backend.delete, command)

    async def rename(self, command: BetaMemoryTool20250818RenameCommand) -> str:
        return await run_sync(self._backend.rename, command)


__all__ = ["AsyncMemsyncMemoryTool", "MemsyncMemoryTool", "SessionReport"]
