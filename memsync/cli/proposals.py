"""proposals, review, accept, reject, consolidate: changes waiting for review (sync/proposals.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from memsync.cli.base import CommandWrapper
from memsync.cli.output import err, out, print_json, table
from memsync.util.timefmt import age
from memsync.util.wording import count

if TYPE_CHECKING:  # imported by the commands when they run
    from memsync.history.forgetting import ForgettingReport
    from memsync.history.reviewing import Review
    from memsync.sync.proposals import Proposal

_JSON = typer.Option("--json", help="Print JSON instead of text.")
_REMOTE = typer.Option("--remote", help="Hub URL (default: the memory's).")


def register(app: typer.Typer, wrap: CommandWrapper) -> None:
    app.command()(wrap(proposals))
    app.command()(wrap(review))
    app.command()(wrap(accept))
    app.command()(wrap(reject))
    app.command(context_settings={"allow_interspersed_args": False})(wrap(consolidate))


def _consolidate(command: list[str], memory: str | None, run_id: str | None, remote: str | None,
                 json: bool) -> int:
    import os
    from pathlib import Path

    from memsync.core.memory import open_memory
    from memsync.history.reviewing import forgotten
    from memsync.run import execute as runner

    cwd = Path.cwd()
    mounts = [runner.parse_mount(memory, cwd)] if memory else []
    os.environ["MEMSYNC_CONSOLIDATE"] = "1"  # the command's environment is memsync's (less credentials)
    from memsync.run.options import RunOptions

    report = runner.execute(command, mounts, RunOptions(run_id=run_id, remote=remote, propose=True),
                            say=lambda m: err(f"memsync: {m}"))
    results: list[dict[str, Any]] = []
    for outcome in report.memories:
        if outcome.proposal is None:
            continue
        forgets = forgotten(open_memory(Path(outcome.root), remote), outcome.proposal)
        results.append({"memory": outcome.name, "proposal": outcome.proposal, "forgetting": forgets})
        if not json:
            out(f"Proposal: {outcome.proposal} ({outcome.name})")
            _show_forgetting(forgets)
            out(f"review: memsync review {outcome.proposal}; accept: memsync accept {outcome.proposal}")
    if json:
        print_json({"run_id": report.run_id, "exit_code": report.exit_code, "proposals": results})
    return int(report.status)


SHOWN_FLAGS = 20


def _flag_summary(flags: list[str]) -> str:
    """One flag as it is; several, counted by kind: "delete 200, shrink 1"."""
    if len(flags) <= 1:
        return flags[0] if flags else "-"
    kinds: dict[str, int] = {}
    for flag in flags:
        kind = flag.split(" ", 1)[0]
        kinds[kind] = kinds.get(kind, 0) + 1
    return ", ".join(f"{kind} {n}" for kind, n in sorted(kinds.items()))


def _show_proposal(p: Proposal) -> None:
    out(f"Proposal {p.id} ({p.state}) for {p.memory}, run {p.run_id}, base {(p.base or '-')[:8]}"
        + (", the memory moved since" if p.moved else ""))
    if p.reason:
        out(f"  reason: {p.reason}")


def _show_review(result: Review, stat: bool) -> None:
    _show_proposal(result.proposal)
    checked = result.checked
    for flag in checked.flags[:SHOWN_FLAGS]:
        out(f"  flag: {flag}")
    if len(checked.flags) > SHOWN_FLAGS:
        out(f"  ... {count(len(checked.flags) - SHOWN_FLAGS, 'more flag')} ({_flag_summary(checked.flags)}; "
            "`--json` lists all)")
    for secret in checked.secrets:
        out(f"  secret: {secret}")
    for violation in checked.violations:
        out(f"  protect: {violation}")
    for path in result.conflicts:
        out(f"  conflict (both kept): {path}")
    if not result.files:
        out("  accepting would change nothing now")
    for f in result.files:
        out(f"  {f.kind:<8} {f.path}  " + ("(binary)" if f.binary else f"+{f.added} -{f.removed}"))
    if not stat:
        from memsync.cli.output import unified_diff

        unified_diff([f.patch.encode() for f in result.files if f.patch])
    if result.forgotten is not None:
        _show_forgetting(result.forgotten)


def _show_forgetting(report: ForgettingReport) -> None:
    out(f"Forgotten: {count(report.lines, 'line')} of {report.total} in {count(len(report.files), 'file')} "
        f"({count(report.kept_files, 'file')} wholly kept)")
    for f in report.files:
        gone = ", file removed" if f.gone else ""
        if not f.exact:
            out(f"  {f.path}: not found byte for byte in the proposed tree (binary or large: not compared by line"
                f"{gone})")
            continue
        out(f"  {f.path}: {f.count} of {f.total} lines{gone}")
        for line in f.lines[:20]:
            out(f"    - {line}")
        if f.count > 20:
            out(f"    ... {f.count - 20} more (`--json` lists up to 200)")
    out("exact for text files" + (f"; judged as whole files: {', '.join(report.inexact[:10])}"
                                  if report.inexact else ""))


def proposals(
    memory: Annotated[str | None, typer.Option("--memory", help="Another memory of the same hub "
                                               "(default: the memory in the current directory).")] = None,
    all_: Annotated[bool, typer.Option("--all", help="Accepted and rejected ones too.")] = False,
    json: Annotated[bool, _JSON] = False,
    remote: Annotated[str | None, _REMOTE] = None,
) -> None:
    """The proposals waiting for review: id, run, base version, age, files, lines, flags,
    and whether the memory moved since the base. In a memory's directory: that memory's;
    elsewhere: every memory's on the hub (or NAME's)."""
    from pathlib import Path

    from memsync.core.config import find_root
    from memsync.core.memory import open_memory
    from memsync.sync.proposals import hub_wide, list_proposals, on_hub
    from memsync.util.names import check_name

    if memory is not None:
        check_name(memory)
    if find_root(Path.cwd()) is not None:
        found = list_proposals(open_memory(Path.cwd(), remote), all_, memory)
    elif memory is not None:  # no clone here: the hub's own word, through a cache
        found = list_proposals(on_hub(memory, remote), all_)
    else:
        found = hub_wide(remote, all_)
    if json:
        print_json(found)
        return
    if not found:
        err("no proposals" + ("" if all_ else " waiting (`--all`: closed ones too)"))
        return
    table(["ID", "MEMORY", "STATE", "BASE", "AGE", "FILES", "+/-", "MOVED", "FLAGS"],
          [[p.id, p.memory, p.state, (p.base or "-")[:8], age(p.created), str(len(p.files)),
            f"+{p.added}/-{p.removed}", "yes" if p.moved else "no", _flag_summary(p.flags)] for p in found])


def review(
    pid: Annotated[str, typer.Argument(metavar="ID", help="The proposal (its run's id).")],
    paths: Annotated[list[str] | None, typer.Argument(help="Only these paths, after --.")] = None,
    stat: Annotated[bool, typer.Option("--stat", help="Files and line counts, no patch.")] = False,
    forgotten: Annotated[bool, typer.Option("--forgotten", help="Also every line of the memory's "
                                            "current version the proposal has nowhere.")] = False,
    json: Annotated[bool, _JSON] = False,
    remote: Annotated[str | None, _REMOTE] = None,
) -> None:
    """What accepting the proposal would change now, against the memory's current version
    (what others wrote since its base included), flags first."""
    from pathlib import Path

    from memsync.core.memory import open_memory
    from memsync.history.reviewing import review as core

    result = core(open_memory(Path.cwd(), remote), pid, list(paths or []), patch=not stat,
                  with_forgotten=forgotten)
    if json:
        print_json(result)
        return
    _show_review(result, stat)


def accept(
    pid: Annotated[str, typer.Argument(metavar="ID", help="The proposal (its run's id).")],
    paths: Annotated[list[str] | None, typer.Argument(help="Accept only these paths, after --; the "
                                                      "rest stays open.")] = None,
    json: Annotated[bool, _JSON] = False,
    remote: Annotated[str | None, _REMOTE] = None,
) -> None:
    """Merge the proposal into the memory as a new version (memsync's merge rules: what others
    wrote meanwhile is kept, a conflict keeps both), and push it.

    Exit code: 9 if its files hold likely secrets (secrets: block) or break a protect rule;
    6 while a run owns the memory."""
    from pathlib import Path

    from memsync.core.memory import open_memory
    from memsync.sync.accepting import accept as core

    done = core(open_memory(Path.cwd(), remote), pid, list(paths or []))
    if json:
        print_json(done)
        return
    what = f"{count(len(done.paths), 'path')} of proposal {pid}" if done.paths else f"proposal {pid}"
    out(f"Accepted {what}: version {(done.version or '')[:8]}" + (" (pushed)" if done.pushed else ""))
    for line in done.conflicts:
        out(f"  conflict kept both: {line}")
    if done.flags:
        out(f"  flags: {_flag_summary(done.flags)}")
    if not done.closed:
        out(f"  the rest stays open: `memsync review {pid}`")


def reject(
    pid: Annotated[str, typer.Argument(metavar="ID", help="The proposal (its run's id).")],
    reason: Annotated[str | None, typer.Option("--reason", help="Why, kept with the proposal.")] = None,
    json: Annotated[bool, _JSON] = False,
    remote: Annotated[str | None, _REMOTE] = None,
) -> None:
    """Close the proposal unaccepted; its history stays on the hub and it can be accepted later."""
    from pathlib import Path

    from memsync.core.memory import open_memory
    from memsync.sync.accepting import reject as core

    closed = core(open_memory(Path.cwd(), remote), pid, reason)
    if json:
        print_json(closed)
        return
    out(f"Rejected proposal {pid}; kept on the hub as refs/memsync/proposals/{closed.memory}/{pid}")


def consolidate(
    command: Annotated[list[str] | None, typer.Argument(help="The consolidating command, after --.")] = None,
    memory: Annotated[str | None, typer.Option("--memory", help="NAME[:PATH] (default: the memory in the "
                                               "current directory).")] = None,
    run_id: Annotated[str | None, typer.Option("--run-id", help="Run id (default: UTC time + random).")] = None,
    remote: Annotated[str | None, _REMOTE] = None,
    json: Annotated[bool, _JSON] = False,
) -> None:
    """Run CMD as a proposal (MEMSYNC_CONSOLIDATE=1 in its environment) and report what it
    would forget: every line of the current memory found nowhere in the proposed tree.

    Exit code: as `memsync run`."""
    raise typer.Exit(_consolidate(list(command or []), memory, run_id, remote, json))
