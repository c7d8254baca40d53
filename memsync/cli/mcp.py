"""mcp: memories served to an agent over the Model Context Protocol (stdio)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from memsync.cli.base import CommandWrapper
from memsync.cli.output import err
from memsync.integrations.options import DEFAULT_CHECKPOINT_SECONDS, DEFAULT_CHECKPOINT_WRITES


def register(app: typer.Typer, wrap: CommandWrapper) -> None:
    app.command()(wrap(mcp))


def mcp(
    memory: Annotated[list[str] | None, typer.Option(
        "--memory", help="NAME[:PATH][:ro]; repeatable (the first is the default). PATH defaults to "
        "./NAME; cloned if absent, pulled if present; :ro = read-only.")] = None,
    run_id: Annotated[str | None, typer.Option("--run-id", help="Run id for the versions written "
                                               "(default: $MEMSYNC_RUN_ID, else UTC time + random).")] = None,
    offline: Annotated[bool, typer.Option("--offline", help="Do not pull or push; local copies only.")] = False,
    checkpoint: Annotated[float, typer.Option("--checkpoint", help="Push unpushed versions this many "
                                              "seconds after the first; 0 = only at the end.")]
    = DEFAULT_CHECKPOINT_SECONDS,
    checkpoint_writes: Annotated[int, typer.Option("--checkpoint-writes", help="Also push after this many "
                                                   "writes; 0 = off.")] = DEFAULT_CHECKPOINT_WRITES,
    remote: Annotated[str | None, typer.Option("--remote", help="Hub URL for memories cloned here.")] = None,
    create: Annotated[bool, typer.Option("--create", help="Start a --memory the hub does not have (empty); "
                                         "without it such a memory is refused, naming those the hub has.")]
    = False,
    propose: Annotated[bool, typer.Option("--propose", help="Make the session's writes a proposal "
                                          "(proposals/NAME/RUN-ID) for an operator to accept or reject; "
                                          "the memory does not move.")] = False,
) -> None:
    """Serve memories over MCP on stdin/stdout: view, read, create, str_replace, insert, delete, rename,
    log, diff, restore, search. Each write is a version of the run; pushed at checkpoints and
    when the client disconnects. Needs `pip install "memsync[mcp]"`."""
    from memsync.errors import UsageError
    from memsync.run.mounts import parse_mount

    if not memory:
        raise UsageError("name the memories to serve", "memsync mcp --memory NAME[:PATH][:ro]")
    if checkpoint < 0 or checkpoint_writes < 0:
        raise UsageError("--checkpoint and --checkpoint-writes must be 0 or more")
    try:
        from memsync.integrations.mcp_server import serve
    except ModuleNotFoundError as exc:
        raise UsageError(f"the MCP server needs the {exc.name or 'mcp'} package",
                         'pip install "memsync[mcp]"') from None
    cwd = Path.cwd()
    mounts = [parse_mount(spec, cwd) for spec in memory]
    names = [m.name for m in mounts]
    if len(set(names)) != len(names):
        raise UsageError("a memory is named twice", "give each --memory once")
    reports = serve(mounts, remote=remote, run_id=run_id, offline=offline, checkpoint_writes=checkpoint_writes,
                    checkpoint_seconds=checkpoint, create=create, propose=propose)
    failed = False
    for r in reports:
        for notice in r.notices:
            err(f"memsync: {r.name}: {notice}")
        if r.read_only:
            state = "read-only"
        else:
            state = "pushed" if r.pushed else ("committed locally" if offline else f"NOT PUSHED: {r.error}")
        version = f" {r.version[:8]}" if r.version else ""
        if r.proposal:
            state += f"; proposal {r.proposal} waits for review (`memsync review {r.proposal}`)"
        err(f"memsync: {r.name}{version}: {r.writes} writes, {state}")
        failed = failed or r.error is not None
    if failed:
        from memsync.errors import EXIT_UNSAVED

        raise typer.Exit(EXIT_UNSAVED)
