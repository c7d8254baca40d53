"""init, push, pull, clone, gc, status, list (push, pull, clone and status: declared in options.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from memsync.cli import options, syncing
from memsync.cli.base import CommandWrapper
from memsync.cli.hotverbs import hot_command
from memsync.cli.output import err, human_size, out, print_json, warn
from memsync.util.wording import count

RemoteOpt = Annotated[str | None, typer.Option(*options.REMOTE.spellings, help=options.REMOTE.help)]
JsonOpt = Annotated[bool, typer.Option(*options.JSON.spellings, help=options.JSON.help)]


def register(app: typer.Typer, wrap: CommandWrapper) -> None:
    app.command()(wrap(init))
    hot_command(app, wrap, "push")
    hot_command(app, wrap, "pull")
    hot_command(app, wrap, "clone")
    app.command()(wrap(gc))
    hot_command(app, wrap, "status")
    app.command("list")(wrap(list_))


def init(
    name: Annotated[str | None, typer.Option("--name", help="Memory name (default: the directory's).")] = None,
    kind: Annotated[str | None, typer.Option("--type", help="memory (default) or artifact.")] = None,
    remote: RemoteOpt = None,
) -> None:
    """Make the current directory a memory (.vm0/storage.yaml + a git repository)."""
    from memsync.sync import storage as sync

    result = sync.init(Path.cwd(), name, kind, remote)
    syncing.report_init(result)


def gc(json: JsonOpt = False, remote: RemoteOpt = None) -> None:
    """Repack the memory's repository (and its hub, if on this machine) into one pack each."""
    from memsync.sync.gc import gc as run_gc

    result = run_gc(Path.cwd(), remote=remote)
    done = [("memory " + repr(result.memory), result.local)]
    if result.hub_result is not None:
        done.append((f"hub {result.hub}", result.hub_result))
    if json:
        print_json({"memory": result.memory, "hub": result.hub, "repacked": [
            {"what": what, "objects": r.objects, "packs_before": r.packs_before,
             "loose_before": r.loose_before, "seconds": round(r.seconds, 3)} for what, r in done]})
        return
    for what, r in done:
        if r.objects == 0:
            out(f"Nothing to repack in {what}: it is one pack already")
            continue
        out(f"Repacked {what}: {count(r.objects, 'object')} from {count(r.packs_before, 'pack')} and "
            f"{count(r.loose_before, 'loose object')} into 1 pack in {r.seconds:.1f}s")
    if result.hub_result is None:
        out(f"The hub {result.hub} is not on this machine: its host keeps it compact")
    if result.pruned:
        out(f"Forgot {count(len(result.pruned), 'closed proposal')} on the hub: {', '.join(result.pruned[:10])}")


def list_(json: JsonOpt = False, remote: RemoteOpt = None,
          prefix: Annotated[str, typer.Option("--prefix", help="Only memories whose names start "
                                              "with this.")] = "",
          limit: Annotated[int | None, typer.Option("--limit", help="At most this many memories "
                                                    "(a page).")] = None,
          after: Annotated[str | None, typer.Option("--after", help="Start after this name (the "
                                                    "last of the previous page).")] = None) -> None:
    """Every memory on the remote: NAME TYPE SIZE FILES UPDATED LAST-RUN."""
    from memsync.cli.output import table
    from memsync.sync import listing

    page = listing.list_page(remote, prefix=prefix, after=after, limit=limit)
    where, found = page.hub, page.memories
    if json:
        print_json({"remote": where, "memories": found, "more_after": page.more})
        return
    if not found:
        if prefix or after:
            out(f"No memories on {where} match.")
        else:
            out(f"No memories on {where} yet. Create one with `memsync init` and `memsync push`.")
        return
    table(["NAME", "TYPE", "SIZE", "FILES", "UPDATED", "LAST-RUN"],
          [[m.name, m.type, "refused" if m.error else human_size(m.size), "-" if m.error else str(m.files),
            m.updated, m.last_run or "-"] for m in found])
    for m in found:
        if m.error:
            warn(f"{m.name}: {m.error}")
    if page.more is not None:
        again = " ".join(x for x in (f"--prefix {prefix}" if prefix else "", f"--limit {limit}") if x)
        err(f"more memories follow: memsync list {again} --after {page.more}")
