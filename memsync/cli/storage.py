"""init, push, pull, clone, status, list."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from memsync.checks.merge_policy import rule_file_line
from memsync.cli import completing
from memsync.cli.base import CommandWrapper
from memsync.cli.output import err, human_size, out, print_json, warn
from memsync.util.textsafe import clean, display_path
from memsync.util.wording import count

RemoteOpt = Annotated[str | None, typer.Option("--remote", help="Hub URL: a path, file://, git://, "
                                               "http(s)://, ssh:// or user@host:path.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]


def _report_snapshot(snap: Any) -> None:
    from memsync.core.snapshot import describe

    for line in describe(snap):
        warn(line)


def _report_merges(exchange: Any) -> None:
    if exchange.redaction is not None:
        r = exchange.redaction
        replayed = f"; replayed {count(r.replayed, 'local version')} on it" if r.replayed else ""
        why = {"secrets only": "it replaces only what the secret scanner recognises as secrets",
               "trust_redactions": "trust_redactions is set in storage.yaml"}.get(r.why, "accepted")
        warn(f"the hub's history was redacted: followed it ({why}): {r.incoming.summary()}; "
             f"{r.old_head[:8]} is now {r.new_head[:8]}{replayed}")
        warn(f"the history before it is kept as {r.backup}; `memsync redact --drop-backups` deletes it")
    for merge in exchange.merges:
        err(f"merged remote version {merge.head[:8]}" if merge.head else "merged")
    for c in exchange.conflicts:
        if c.reason == "file/directory clash":
            warn(f"conflict at {display_path(c.path)}: a file and a directory; the directory stays there, the file "
                 f"is kept as {display_path(c.copy)}")
        else:
            warn(f"conflict in {display_path(c.path)}: kept yours there, the remote's as {display_path(c.copy)}")
    for path in exchange.rule_files:
        warn(rule_file_line(path))
    for held in exchange.held_back:
        warn(f"not checked out: {display_path(held.path)} ({human_size(held.size)}, larger than max_file_size); "
             "it stays in the memory's history and later versions keep it")


def _report_unverified(found: Any) -> None:
    if found is None:
        return
    n = len(found.commits)
    if found.folded_into:
        what = f"{count(n, 'version')} memsync did not make ({found.shown}) and files" if n else "files"
        warn(f"run {found.folded_into} stopped before its final commit; the {what} it left were committed as "
             "that run's and checked")
        if found.snapshot is not None:
            _report_snapshot(found.snapshot)
    elif not n:
        return
    else:
        warn(f"pushing {count(n, 'version')} memsync did not make as they are ({found.shown}): checked for secrets "
             "and protect rules; `memsync log` shows them as git, not as yours")


def _print_version(version: Any) -> None:
    if version is None:
        out("Memory is empty")
        return
    out(f"Version: {version.short}")
    out(f"Files: {version.files}")
    out(f"Size: {human_size(version.size)}")


def _report_init(result: Any) -> None:  # sync.InitResult (imported lazily)
    if result.created:
        out(f"Initialized {result.type} {result.name!r} in {result.root}")
    elif result.adopted:
        out(f"Adopted the existing storage.yaml: {result.type} {result.name!r} in {result.root}")
    else:
        out(f"Already a memory: {result.type} {result.name!r} in {result.root}")
    out(f"Remote: {result.hub}")
    for note in result.notes:
        out(f"Note: {note}")


def register(app: typer.Typer, guard: CommandWrapper) -> None:
    @app.command()
    @guard
    def init(
        name: Annotated[str | None, typer.Option("--name", help="Memory name (default: the directory's).")] = None,
        kind: Annotated[str | None, typer.Option("--type", help="memory (default) or artifact.")] = None,
        remote: RemoteOpt = None,
    ) -> None:
        """Make the current directory a memory (.vm0/storage.yaml + a git repository)."""
        from memsync.sync import storage as sync

        result = sync.init(Path.cwd(), name, kind, remote)
        _report_init(result)

    @app.command()
    @guard
    def push(
        force: Annotated[bool, typer.Option("-f", "--force", help="Make a new version even if nothing changed "
                                            "(never rewrites remote history).")] = False,
        message: Annotated[str | None, typer.Option("-m", "--message", help="Commit message.")] = None,
        remote: RemoteOpt = None,
    ) -> None:
        """Commit local changes as the operator and push them; merges if the remote moved on."""
        from memsync.cli.output import transfer_progress
        from memsync.sync import storage as sync

        with transfer_progress() as progress:
            result = sync.push(Path.cwd(), force=force, message=message, remote=remote, progress=progress)
        if result.adopted is not None:
            _report_init(result.adopted)
        _report_unverified(result.unverified)
        _report_snapshot(result.snapshot)
        _report_merges(result.exchange)
        if not result.committed and not result.exchange.pushed:
            left = result.snapshot.left_out  # never "No changes" while files stay uncommitted
            files = "1 file" if left == 1 else f"{left} files"
            out(f"Nothing committed: {files} left out (see the warnings above); the remote already has "
                "this version" if left else "No changes: the remote already has this version")
        if result.mirror_of is not None and result.exchange.pushed:
            from memsync.git.hub import safe_url

            out(f"Mirror push to {safe_url(remote or '')}: the memory's own hub stays {result.mirror_of}")
        _print_version(result.version)
        if result.snapshot.blocked:
            from memsync.errors import Blocked

            raise Blocked(f"kept out of the commit by `secrets: block`: {', '.join(result.snapshot.blocked)}",
                          "remove the secret from the file (it is still on disk), then `memsync push`")

    @app.command()
    @guard
    def pull(
        name: Annotated[str | None, typer.Argument(help="Outside a memory: clone NAME into ./NAME.",
                                                   autocompletion=completing.memory_names)] = None,
        remote: RemoteOpt = None,
    ) -> None:
        """Fetch the remote memory and merge it in, keeping local changes."""
        from memsync.cli.output import transfer_progress
        from memsync.sync import storage as sync

        with transfer_progress() as progress:
            result = sync.pull_or_clone(name, Path.cwd(), remote=remote, progress=progress)
        _report_snapshot(result.snapshot)
        _report_merges(result.exchange)
        if result.remote_missing:
            out("The remote has no version of this memory yet (run `memsync push`)")
        _print_version(result.version)

    @app.command()
    @guard
    def clone(
        name: Annotated[str, typer.Argument(help="The memory's name on the remote.",
                                            autocompletion=completing.memory_names)],
        dest: Annotated[Path | None, typer.Argument(help="Directory to create (default: ./NAME).")] = None,
        remote: RemoteOpt = None,
        full_history: Annotated[bool, typer.Option(
            "--full-history",
            help="Fetch every version now. By default a network hub sends the newest one and older "
                 "ones come the first time something reads them (log, diff, restore, revert).")] = False,
    ) -> None:
        """Create a working memory from the remote."""
        from memsync.cli.output import transfer_progress
        from memsync.sync import storage as sync

        with transfer_progress() as progress:
            result = sync.clone(name, dest, remote=remote, progress=progress, full_history=full_history)
        out(f"Cloned {name} into {(dest or Path(name)).resolve()}")
        _report_merges(result.exchange)
        _print_version(result.version)

    @app.command()
    @guard
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

    @app.command()
    @guard
    def status(json: JsonOpt = False, remote: RemoteOpt = None) -> None:
        """The remote's version and last run; local ahead/behind, uncommitted changes, conflicts."""
        from memsync.errors import RemoteError
        from memsync.sync import storage as sync

        report = sync.status(Path.cwd(), remote=remote)
        if json:
            print_json(report)
        else:
            _print_status(report)
        if report.remote_error:
            raise RemoteError(report.remote_error, "the local part above is still accurate")

    @app.command("list")
    @guard
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


def _print_left_out(r: Any) -> None:
    for paths, title in ((r.too_large, "Too large to commit (over max_file_size)"),
                         (r.ignored, "Ignored by .gitignore rules (never committed)")):
        if not paths:
            continue
        from memsync.core.snapshot import SHOWN_PATHS  # (only then: a status imports no snapshot code)

        out(f"{title}: {len(paths)}")
        for path in paths[:SHOWN_PATHS]:
            out(f"  {display_path(path)}")
        if len(paths) > SHOWN_PATHS:
            out(f"  ... and {len(paths) - SHOWN_PATHS} more")


def _print_status(r: Any) -> None:
    out(f"Memory: {r.name} ({r.type}) at {r.root}")
    out(f"Remote: {r.remote} [{r.branch}]")
    if r.remote_version is not None:
        v = r.remote_version
        out(f"Version: {v.short}")
        out(f"Files: {v.files}")
        out(f"Size: {human_size(v.size)}")
        out(f"Updated: {v.updated}")
        if r.remote_cached:
            out("(as of the last successful fetch: the remote could not be reached)")
        if r.last_run is not None:
            code = f", exit {r.last_run.exit_code}" if r.last_run.exit_code is not None else ""
            out(f"Last run: {clean(r.last_run.run_id)} (version {r.last_run.version}{clean(code)})")
        else:
            out("Last run: none")
    elif r.remote_error is None:
        out("Version: none (not pushed yet)")
    if r.running is not None:
        out(f"Run in progress: {r.running.run_id} (pid {r.running.pid}); verbs that commit, push or rewrite "
            "are refused (exit 6) until it ends")
    for note in r.redactions:
        if note.state == "refused":
            out(f"Redaction: refused the hub's {note.version[:8]} ({clean(note.detail)}); "
                "`memsync redact --follow` shows and accepts it")
        else:
            out(f"Redaction: followed; the history before it is kept as {note.ref} ({note.version[:8]}); "
                "`memsync redact --drop-backups` deletes it")
    local = r.local_version[:8] if r.local_version else "none"
    out(f"Local: {local}, {r.ahead} ahead, {r.behind} behind")
    if r.uncommitted:
        out(f"Uncommitted: {count(len(r.uncommitted), 'change')}")
        for c in r.uncommitted[:20]:
            out(f"  {c.kind:<8} {display_path(c.path)}")
        if len(r.uncommitted) > 20:
            out(f"  ... and {len(r.uncommitted) - 20} more")
    else:
        out("Uncommitted: none")
    _print_left_out(r)
    if r.conflicts:
        copies = "conflict copy" if len(r.conflicts) == 1 else "conflict copies"
        out(f"Conflicts: {len(r.conflicts)} {copies} to review")
        for path in r.conflicts:
            out(f"  {display_path(path)}")
    else:
        out("Conflicts: none")
