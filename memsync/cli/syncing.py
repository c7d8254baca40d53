"""push, pull and status as they run and show their results: the typer commands and the hot
verbs' own dispatch (fastpath.py), both made from their declarations in options.py, call these
with the same options record, so both print the same. No typer here: a hot verb's start-up does
not pay for it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from memsync.cli.output import err, human_size, out, print_json, transfer_progress, warn
from memsync.util.names import where_kept
from memsync.util.textsafe import clean, display_path
from memsync.util.wording import count

if TYPE_CHECKING:
    from memsync.sync.options import CloneOptions, PullOptions, PushOptions, StatusOptions


def push(options: PushOptions) -> None:
    """Commit local changes as the operator and push them; merges if the remote moved on."""
    from memsync.sync import storage as sync

    with transfer_progress() as progress:
        result = sync.push(Path.cwd(), options, progress=progress)
    if result.adopted is not None:
        report_init(result.adopted)
    report_unverified(result.unverified)
    report_snapshot(result.snapshot)
    report_merges(result.exchange)
    if not result.committed and not result.exchange.pushed:
        left = result.snapshot.left_out  # never "No changes" while files stay uncommitted
        files = "1 file" if left == 1 else f"{left} files"
        out(f"Nothing committed: {files} left out (see the warnings above); the remote already has "
            "this version" if left else "No changes: the remote already has this version")
    if result.mirror_of is not None and result.exchange.pushed:
        from memsync.git.hub import safe_url

        out(f"Mirror push to {safe_url(options.remote or '')}: the memory's own hub stays {result.mirror_of}")
    print_version(result.version)
    if result.snapshot.blocked:
        from memsync.errors import Blocked

        raise Blocked("kept out of the commit (`secrets: block`, or a name no version may hold): "
                      + ", ".join(result.snapshot.blocked),
                      "remove the secret or rename the file (it is still on disk; the warnings above "
                      "say which), then `memsync push`")


def pull(options: PullOptions) -> None:
    """Fetch the remote memory and merge it in, keeping local changes."""
    from memsync.sync import storage as sync

    with transfer_progress() as progress:
        result = sync.pull_or_clone(Path.cwd(), options, progress=progress)
    report_snapshot(result.snapshot)
    report_merges(result.exchange)
    if result.remote_missing:
        out("The remote has no version of this memory yet (run `memsync push`)")
    print_version(result.version)


def clone(options: CloneOptions) -> None:
    """Create a working memory from the remote."""
    from memsync.sync import storage as sync

    dest = None if options.dest is None else Path(options.dest)
    with transfer_progress() as progress:
        result = sync.clone(options.name, dest, remote=options.remote, progress=progress,
                            full_history=options.full_history)
    out(f"Cloned {options.name} into {(dest or Path(options.name)).resolve()}")
    report_merges(result.exchange)
    print_version(result.version)


def status(options: StatusOptions, json: bool) -> None:
    """The remote's version and last run; local ahead/behind, uncommitted changes, conflicts."""
    from memsync.errors import RemoteError
    from memsync.sync import storage as sync

    report = sync.status(Path.cwd(), options)
    if json:
        print_json(report)
    else:
        print_status(report)
    if report.remote_error:
        raise RemoteError(report.remote_error, "the local part above is still accurate")


def report_snapshot(snap: Any) -> None:
    from memsync.core.snapshot import describe

    for line in describe(snap):
        warn(line)


def report_merges(exchange: Any) -> None:
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
            kept = where_kept(display_path(c.copy))
            warn(f"conflict in {display_path(c.path)}: kept yours there, the remote's {kept}")
    for path in exchange.rule_files:
        from memsync.checks.merge_policy import rule_file_line

        warn(rule_file_line(path))
    for held in exchange.held_back:
        warn(f"not checked out: {display_path(held.path)} ({human_size(held.size)}, larger than max_file_size); "
             "it stays in the memory's history and later versions keep it")


def report_unverified(found: Any) -> None:
    if found is None:
        return
    n = len(found.commits)
    if found.folded_into:
        what = f"{count(n, 'version')} memsync did not make ({found.shown}) and files" if n else "files"
        warn(f"run {found.folded_into} stopped before its final commit; the {what} it left were committed as "
             "that run's and checked")
        if found.snapshot is not None:
            report_snapshot(found.snapshot)
    elif not n:
        return
    else:
        warn(f"pushing {count(n, 'version')} memsync did not make as they are ({found.shown}): checked for secrets "
             "and protect rules; `memsync log` shows them as git, not as yours")


def print_version(version: Any) -> None:
    if version is None:
        out("Memory is empty")
        return
    out(f"Version: {version.short}")
    out(f"Files: {version.files}")
    out(f"Size: {human_size(version.size)}")


def report_init(result: Any) -> None:  # sync.InitResult (imported lazily)
    if result.created:
        out(f"Initialized {result.type} {result.name!r} in {result.root}")
    elif result.adopted:
        out(f"Adopted the existing storage.yaml: {result.type} {result.name!r} in {result.root}")
    else:
        out(f"Already a memory: {result.type} {result.name!r} in {result.root}")
    out(f"Remote: {result.hub}")
    for note in result.notes:
        out(f"Note: {note}")


def print_left_out(r: Any) -> None:
    for paths, title in ((r.too_large, "Too large to commit (over max_file_size)"),
                         (r.ignored, "Ignored by the operator's ignore rules (never committed)")):
        if not paths:
            continue
        from memsync.core.snapshot import SHOWN_PATHS  # (only then: a status imports no snapshot code)

        out(f"{title}: {len(paths)}")
        for path in paths[:SHOWN_PATHS]:
            out(f"  {display_path(path)}")
        if len(paths) > SHOWN_PATHS:
            out(f"  ... and {len(paths) - SHOWN_PATHS} more")


def print_status(r: Any) -> None:
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
    if r.proposals:
        out(f"Proposals waiting: {', '.join(clean(p) for p in r.proposals[:10])}; `memsync proposals` lists them, "
            "`memsync review ID` shows one")
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
    print_left_out(r)
    if r.to_fold:
        versions = sum(f.versions for f in r.to_fold)
        out(f"Conflicts: {count(versions, 'version')} from other writers to fold, in "
            f"{count(len(r.to_fold), 'file')}")
        for f in r.to_fold:
            of = ", ".join(display_path(p) for p in f.paths) or "?"
            out(f"  {display_path(f.file)}: {count(f.versions, 'version')} of {of}")
        out("  fold what is worth keeping into the file, then delete the conflict file; "
            "`memsync restore PATH --conflict ID` brings one version back whole")
    elif r.conflicts:
        out(f"Conflicts: {count(len(r.conflicts), 'file')} to review")
        for path in r.conflicts:
            out(f"  {display_path(path)}")
    else:
        out("Conflicts: none")
