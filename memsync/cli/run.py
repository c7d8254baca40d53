"""run, contract."""

from __future__ import annotations

from typing import Annotated

import typer

from memsync.cli import completing, running
from memsync.cli.base import CommandWrapper
from memsync.cli.output import out


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
        propose: Annotated[bool, typer.Option("--propose", help="Make the run's changes a proposal "
                                              "(proposals/<name>/<run-id> on the hub) for review; the memory "
                                              "does not move until `memsync accept`.")] = False,
    ) -> None:
        """Pull the memories, run CMD, checkpoint while it runs, commit with the run's id, push.

        Exit code: the command's own; 8 if it succeeded but a memory could not be pushed; 9 if a
        policy kept files out of the commit or the command changed a read-only memory."""
        raise typer.Exit(running.run(command, memory, run_id, offline, no_push, checkpoint, remote, keep_ssh_agent,
                                     as_user, max_push_rate, create, propose))

    @app.command()
    @guard
    def contract(
        path: Annotated[str | None, typer.Option("--path", help="Where the agent sees its memory "
                                                 "(default: $MEMSYNC_MEMORY_DIR).")] = None,
    ) -> None:
        """Print memory instructions to paste into an agent's AGENTS.md / CLAUDE.md."""
        from memsync.run.contract import render

        out(render(path))
