"""`memsync redact`: the one deliberate exception to "history is never rewritten".

For a secret or personal data that reached the hub: the content is replaced by a placeholder in
every version that holds it, each version keeping its message, author, committer, trailers and
dates; the hub's branch is moved with a lease (refused if the hub moved since we looked); a record
of what was rewritten is committed on top, from which other clones follow (redaction.py says when
they do by themselves); and the old objects are purged from this clone and a hub on this machine.
A pattern that wipes whole files or more than a small share of one needs a second confirmation
(redaction_spans.py). Nothing runs while a `memsync run` owns the memory.

Also here, for a clone that refused a hub's redaction: `follow` (show it, accept it) and
`drop_backups` (delete the histories kept when following one, and purge their objects).
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

from memsync.checks.redaction_spans import WIDE_SHARE, is_wide, replaced
from memsync.core.attribution import operator
from memsync.core.memory import Memory, open_memory, refuse_during_run
from memsync.core.snapshot import take
from memsync.errors import PushRejected, RepoError, UsageError
from memsync.git import hub as hubmod
from memsync.git import rewrite, transport
from memsync.git.trailers import compose
from memsync.history import forensics
from memsync.sync.exchange import converge
from memsync.sync.redaction import BASE, BLOB, REWRITTEN, Decide
from memsync.sync.redaction_log import Incoming
from memsync.util.records import field, recordclass
from memsync.util.wording import count


@recordclass
class Plan:
    what: str  # "notes/keys.md at 3f9a1c2b" | "text matching the pattern"
    versions: int  # versions that will be rewritten
    blobs: int  # distinct file contents replaced
    hub: str
    wide: list[str] = field(default_factory=list)  # files wiped whole or beyond the share: confirm twice


@recordclass
class RedactResult:
    plan: Plan
    old_head: str
    new_head: str  # the redaction record
    rewritten: dict[str, str] = field(default_factory=dict)
    purged: list[str] = field(default_factory=list)
    not_purged: list[str] = field(default_factory=list)
    hub_keeps_objects: bool = False  # a hub not on this machine: its old objects stay until its owner prunes
    kept: list[str] = field(default_factory=list)  # histories kept after following redactions: not purged


def placeholder(now: datetime | None = None) -> str:
    return f"[REDACTED by memsync {(now or datetime.now(timezone.utc)):%Y-%m-%d}]"


def may_act(start: Path, remote: str | None = None) -> None:
    """Refuse (RunInProgress, exit 6) while a run owns the memory; checked again under the lock."""
    refuse_during_run(open_memory(start, remote), "redact")


def redact(start: Path, path: str | None, at: str | None, secret: str | None,
           confirm: Callable[[Plan], bool], remote: str | None = None,
           confirm_wide: Callable[[Plan], bool] | None = None) -> RedactResult:
    """`confirm`: the operator's word on the plan; `confirm_wide`: the second one, needed when a
    pattern wipes whole files or more than WIDE_SHARE of one (None: refused)."""
    if (secret is None) == (path is None):
        raise UsageError("give either PATH --at REV or --secret PATTERN",
                         "e.g. `memsync redact notes/keys.md --at 3f9a1c2b --yes`")
    if path is not None and at is None:
        raise UsageError("PATH needs --at REV: the version whose content of PATH is redacted",
                         "find it with `memsync log PATH`")
    mem = open_memory(start, remote)
    refuse_during_run(mem, "redact")  # before anything is fetched; again under the lock
    mem.git.narrow = False  # it rewrites the work tree: every local change must be seen, and saved first
    from memsync.sync import shallow

    if not shallow.complete(mem):  # rewriting a history with a hole would push the hole
        raise RepoError("cannot redact: this memory's versions before "
                        f"{(shallow.roots(mem) or ['?'])[0][:8]} are not here (see the warning above)",
                        "redact from a full clone: `memsync clone NAME --full-history`")
    with mem.locked():
        refuse_during_run(mem, "redact")
        mem.git.check_state(mem.branch)
        mem.git.ensure_layout(mem.branch, None)
        from memsync.sync.hubs import ensure_hub

        ensure_hub(mem.hub)
        who = operator("Save local changes before redacting")
        take(mem, who)
        exchange = converge(mem, operator("Merge the remote memory before redacting"), lambda: _save(mem))
        head = mem.git.head_oid()
        if head is None or exchange.remote_head != head:
            raise RepoError("the memory has no version on the hub to redact", "push it first")
        label, blob_fn = _rule(mem, start, path, at, secret)
        done = rewrite.rewrite(mem.git, head, blob_fn)
        if not done.commits:
            raise UsageError(f"nothing to redact: no version holds {label}")
        oldest = next(old for old in reversed(list(_history(mem, head))) if old in done.commits)
        plan = Plan(label, len(done.commits), len(done.blobs), mem.hub.display,
                    _wide(mem, done) if secret is not None else [])
        if not confirm(plan):
            raise UsageError("redaction not confirmed: nothing was changed")
        if plan.wide and (confirm_wide is None or not confirm_wide(plan)):
            raise UsageError(f"the pattern wipes whole files or more than {WIDE_SHARE:.0%} of a file "
                             f"({_names(plan.wide)}): nothing was changed",
                             "check the pattern; if wiping them is meant, confirm it a second time with "
                             "--allow-wide")
        subject = f"Redact {label} from history ({count(len(done.commits), 'version')} rewritten)"
        extra = [("Memsync-Redacted", f"{_short_label(label)} {oldest[:8]}..{head[:8]}"), (BASE, head)]
        extra += [(BLOB, f"{o} {n}") for o, n in done.blobs.items()]
        extra += [(REWRITTEN, f"{o} {n}") for o, n in done.commits.items()]
        message = compose(subject, operator(subject, *extra).trailers([]))
        record = rewrite.record(mem.git, done.tip, message)
        mem.git.note_made(record)
        _push_with_lease(mem, head, record)
        rewrite.move_to(mem.git, mem.branch, record, mem.name, mem.config.max_file_size)
        mem.git.set_ref(mem.tracking_ref, record, "memsync: redact")
        from memsync.sync import redaction_log

        result = RedactResult(plan, head, record, done.commits, hub_keeps_objects=mem.hub.keeps_unreachable,
                              kept=[ref for ref, _ in redaction_log.backups(mem)])
        for where in _purge_targets(mem):
            (result.purged if rewrite.purge(where) else result.not_purged).append(str(where))
        return result


def _wide(mem: Memory, done: rewrite.Rewritten) -> list[str]:
    """Files the rewrite leaves as nothing but placeholders, or in which it replaces more than
    WIDE_SHARE with anything but recognised secrets: a wiped memory, not a removed secret."""
    wide = set()
    for old, new in done.blobs.items():
        before, after = rewrite.blob_data(mem.git, old), rewrite.blob_data(mem.git, new)
        found = replaced(before, after) if before is not None and after is not None else None
        if found is None or before is None or is_wide(before, found):
            wide.add(old)
    return rewrite.paths_holding(mem.git, list(done.commits), wide) if wide else []


def _names(paths: list[str]) -> str:
    return ", ".join(paths[:3]) + (f" and {len(paths) - 3} more" if len(paths) > 3 else "")


@recordclass
class Followed:
    incoming: Incoming
    backup: str
    new_head: str
    asked: bool  # False: it needed no one's word (secrets only, or trust_redactions)


def follow(start: Path, decide: Decide, remote: str | None = None) -> Followed:
    """Follow the hub's redaction that this clone refused: `decide` sees what it removes (files,
    bytes, versions) and says yes or no (no: UsageError, nothing changed). Local changes are saved
    first; the history this clone had is kept under a backup ref."""
    mem = open_memory(start, remote)
    refuse_during_run(mem, "redact")
    with mem.locked():
        refuse_during_run(mem, "redact")
        mem.git.check_state(mem.branch)
        mem.git.ensure_layout(mem.branch, None)
        from memsync.sync.hubs import ensure_hub

        ensure_hub(mem.hub)
        take(mem, operator("Save local changes before following a redaction"))

        asked: list[bool] = []

        def ask(incoming: Incoming) -> bool:
            asked.append(True)
            if not decide(incoming):
                raise UsageError("redaction not followed: nothing was changed",
                                 "run `memsync redact --follow --yes` to accept it")
            return True

        exchange = converge(mem, operator("Merge the remote memory"), lambda: _save(mem), push=False, follow=ask)
        if exchange.redaction is None:
            raise UsageError("no redaction to follow: this memory's history is not rewritten on the hub",
                             "`memsync status` says whether one was refused")
        r = exchange.redaction
        return Followed(r.incoming, r.backup, r.new_head, bool(asked))


@recordclass
class Dropped:
    refs: list[str]
    purged: bool


def drop_backups(start: Path, confirm: Callable[[list[str]], bool]) -> Dropped:
    """Delete the histories kept when following redactions, then purge the objects nothing else
    reaches (`git gc --prune=now`): what the hub's redaction removed is then gone from here too."""
    from memsync.sync import redaction_log

    mem = open_memory(start)
    refuse_during_run(mem, "redact")
    with mem.locked():
        refuse_during_run(mem, "redact")
        refs = [ref for ref, _ in redaction_log.backups(mem)]
        if not refs:
            return Dropped([], False)
        if not confirm(refs):
            raise UsageError("not confirmed: nothing was deleted")
        redaction_log.drop_backups(mem)
        return Dropped(refs, rewrite.purge(mem.git.git_dir))


def _save(mem: Memory) -> None:
    take(mem, operator("Save local changes before redacting"))


def _history(mem: Memory, tip: str) -> list[str]:
    return [info.oid for info in mem.git.walk(tip)]


def _short_label(label: str) -> str:
    return label.split(" at ")[0]


def _rule(mem: Memory, start: Path, path: str | None, at: str | None,
          secret: str | None) -> tuple[str, rewrite.BlobFn]:
    mark = placeholder()
    repo = mem.git
    if secret is not None:
        if not secret:
            raise UsageError("--secret needs a pattern", "a regular expression, e.g. 'sk-[A-Za-z0-9]{20,}'")
        try:
            pattern = re.compile(secret.encode())
        except re.error as exc:
            raise UsageError(f"--secret is not a valid regular expression: {exc}",
                             "escape special characters, e.g. 'token\\.txt'") from None

        def rule(data: bytes) -> bytes | None:
            if not pattern.search(data):
                return None
            return pattern.sub(lambda _m: mark.encode(), data)

        digest = hashlib.sha256(secret.encode()).hexdigest()[:16]
        return f"pattern:sha256:{digest}", rewrite.blob_replacer(repo, rule)  # never the pattern itself
    assert path is not None and at is not None
    rel = forensics.relative(mem, start, path)
    version = forensics._point(mem, at)
    old = rewrite.blob_id_at(repo, version, rel)
    if old is None:
        raise UsageError(f"{rel} is not a file at version {version[:8]}", f"see `memsync log {rel}`")
    new = rewrite.create_blob(repo, (mark + "\n").encode())
    return f"{rel} at {version[:8]}", lambda blob: new if blob == old else None


def _push_with_lease(mem: Memory, expected: str, new: str) -> None:
    """Move the hub's branch from `expected` to `new`, refusing if it is anywhere else."""
    hub, ref = mem.hub, f"refs/heads/{mem.branch}"
    temp = f"refs/memsync/redact-{os.getpid()}"
    mem.git.set_ref(temp, new, "memsync: redact")
    try:
        try:
            hub.replace_branch(mem.git, temp, ref, new, expected)
        except (PushRejected, transport.NotFastForward) as exc:
            _check_tip(mem, ref, expected)  # refused because someone pushed: say that instead
            raise PushRejected(f"{hub.display} refused the rewritten history ({exc.message})",
                               "the server refuses history rewrites on this branch (a protected branch, or "
                               "receive.denyNonFastForwards): allow a force push to "
                               f"{mem.branch} once, run `memsync redact` again, then protect it again") from exc
        after = hub.tips(mem.git, [ref]).get(ref)  # the one ref, not every memory's on the hub
        if after != new:
            raise RepoError(f"the hub's {mem.branch} is at {str(after)[:8]} after the redaction push, not "
                            f"{new[:8]}: another push landed at the same moment",
                            "run `memsync pull`, then `memsync redact` again if the content is back")
    finally:
        mem.git.delete_ref(temp)


def _check_tip(mem: Memory, ref: str, expected: str) -> None:
    tip = mem.hub.tips(mem.git, [ref]).get(ref)
    if tip != expected:
        raise PushRejected(f"the hub moved since the redaction was prepared ({expected[:8]} -> "
                           f"{str(tip)[:8]}): nothing was changed on the hub",
                           "run `memsync redact` again: it merges the new versions first")


def _purge_targets(mem: Memory) -> list[Path]:
    """This clone, a hub on this machine, and memsync's listing caches (copies of network hubs)."""
    targets = [mem.git.git_dir, *mem.hub.places_here()]
    targets += sorted((hubmod.memsync_home() / "cache").glob("*.git"))
    return targets
