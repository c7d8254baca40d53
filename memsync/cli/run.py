"""run, contract."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from memsync.cli import completing
from memsync.cli.base import CommandWrapper
from memsync.cli.output import err, out


def register(app: typer.Typer, guard: CommandWrapper) -> None:
    @app.command(context_settings={"allow_interspersed_args": False})
    @guard
    def run(
        command: Annotated[list[str] | None, typer.Argument(help="The agent command, after --.")] = None,
        memory: Annotated[list[str] | None, typer.Option(
            "--memory", help="NAME[:PATH][:ro]; repeatable. Default: the memory in the current directory. "
            "PATH defaults to ./NAME; cloned if absent, pulled if present; :ro = read-only.",
            autocompletion=completing.memory_specs)] = None,
        run_id: Annotated[str | None, typer.Option("--run-id", help="Run id (default: UTC time + random).")] = None,
        offline: Annotated[bool, typer.Option("--offline", help="Do not pull first; run on the local copies.")] = False,
        no_push: Annotated[bool, typer.Option("--no-push", help="Commit locally only.")] = False,
        checkpoint: Annotated[float, typer.Option("--checkpoint", help="Commit and push settled changes at "
                                                  "least this often while the command runs; 0 = off.")] = 30.0,
        remote: Annotated[str | None, typer.Option("--remote", help="Hub URL for memories cloned by this run.")] = None,
        keep_ssh_agent: Annotated[bool, typer.Option("--keep-ssh-agent", help="Leave SSH_AUTH_SOCK in the "
                                                     "command's environment (removed by default).")] = False,
        as_user: Annotated[str | None, typer.Option("--as-user", help="Run CMD as this user (memsync must run "
                                                    "as root); writable memories are lent to it for the run.")] = None,
        max_push_rate: Annotated[str | None, typer.Option(
            "--max-push-rate", help="Push checkpoints at most this often, e.g. 6/min (also /s, /h); the others "
            "wait for the next push, the final push always happens. Default: $MEMSYNC_MAX_PUSH_RATE, "
            "else storage.yaml max_push_rate, else no limit.")] = None,
        create: Annotated[bool, typer.Option("--create", help="Start a --memory the hub does not have (empty); "
                                             "without it such a memory is refused, naming those the hub has.")]
        = False,
    ) -> None:
        """Pull the memories, run CMD, checkpoint while it runs, commit with the run's id, push.

        Exit code: the command's own; 8 if it succeeded but a memory could not be pushed; 9 if a
        policy kept files out of the commit or the command changed a read-only memory."""
        from memsync.run import execute as runner

        cwd = Path.cwd()
        mounts = [runner.parse_mount(spec, cwd) for spec in memory or []]
        report = runner.execute(list(command or []), mounts, run_id=run_id, offline=offline, no_push=no_push,
                                checkpoint=checkpoint, remote=remote, say=lambda m: err(f"memsync: {m}"),
                                keep_ssh_agent=keep_ssh_agent, as_user=as_user, max_push_rate=max_push_rate,
                                create=create)
        _summarise(report, no_push)
        raise typer.Exit(report.status)

    @app.command()
    @guard
    def contract(
        path: Annotated[str | None, typer.Option("--path", help="Where the agent sees its memory "
                                                 "(default: $MEMSYNC_MEMORY_DIR).")] = None,
    ) -> None:
        """Print memory instructions to paste into an agent's AGENTS.md / CLAUDE.md."""
        from memsync.run.contract import render

        out(render(path))


def _summarise(report: Any, no_push: bool) -> None:
    for m in report.memories:
        if m.read_only:
            state = "read-only, changed by the command: put back, not saved" if m.read_only_changes \
                else "read-only, unchanged"
        elif getattr(m, "unrecorded", False):
            state = (f"NOT SAVED: {m.error}; once there is room, the next memsync command there commits what "
                     f"the run left as run {report.run_id}'s")
        elif m.error:
            state = f"NOT PUSHED: {m.error}"
        elif no_push:
            state = "committed locally (--no-push)"
        else:
            state = "pushed"
        if not m.read_only and not m.files_changed and not m.checkpoints:
            what = (f"nothing committed, {_n(m.left_out, 'file', 'files')} left out (see the warnings)"
                    if m.left_out else "no changes")
            state = f"{what}, run recorded; {state}"
        head = m.version if m.final_commit or m.merged or m.checkpoints else None
        version = f" {head[:8]}" if head else ""
        extra = f", {_n(m.checkpoints, 'checkpoint', 'checkpoints')}" if m.checkpoints else ""
        merged = f", merged {_n(m.merged, 'remote version', 'remote versions')}" if m.merged else ""
        conflicts = (f", {_n(len(m.conflicts), 'losing version', 'losing versions')} kept to fold"
                     if m.conflicts else "")
        err(f"memsync: {m.name}{version}: {state}{extra}{merged}{conflicts}")
        if m.unpushed:
            err(f"memsync: {m.name}: unpushed versions kept locally: {', '.join(m.unpushed)}; "
                f"`memsync push` in {m.root} delivers them")
    own = f"; memsync exits {report.status}" if report.status != report.exit_code else ""
    err(f"memsync: run {report.run_id} finished: exit {report.exit_code} after {report.duration:.1f}s{own}")


def _n(count: int, one: str, many: str) -> str:
    return f"{count} {one if count == 1 else many}"
