"""What a coding agent's hooks run: pull its memory at session start, commit and push it when a
turn or the session ends, with the session as the run.

A hook must never block or break the agent: the CLI turns every failure into one line on stderr
and exit 0, and network waits are short (the agent cancels a hook after its timeout anyway; a
cancelled hook leaves a state the next one recovers from, as any killed memsync does).
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memsync.agents import dream
from memsync.agents import registry as agents
from memsync.agents.dream import dream_attribution, dream_since_last_version
from memsync.agents.registry import Agent
from memsync.core import config as cfgmod
from memsync.core.attribution import Attribution, operator
from memsync.core.memory import Memory, open_memory, refuse_during_run
from memsync.errors import UsageError
from memsync.git.trailers import compose
from memsync.util.fs import atomic_write, remove_dead_stagings
from memsync.util.names import check_name, check_run_id, conflict_copy_name, host_name, new_run_id
from memsync.util.records import field, recordclass

if TYPE_CHECKING:
    from memsync.core.snapshot import Snapshot

HOOK_VERBS = ("session-start", "stop", "session-end")
EXCLUDE_MARK = "# memsync hooks: in the agent's home only its memory files are synced"
NEVER_MARK = "# memsync hooks: never an agent's memory file (a lock, a live database)"


def short_network() -> None:
    """Hooks wait seconds, not minutes, for a hub (set before the transport is imported)."""
    os.environ.setdefault("MEMSYNC_CONNECT_TIMEOUT", "5")
    os.environ.setdefault("MEMSYNC_IO_TIMEOUT", "15")
    os.environ.setdefault("MEMSYNC_LOCK_TIMEOUT", "5")
    os.environ.setdefault("MEMSYNC_NETWORK_TRIES", "2")  # one retry: the agent is waiting


@recordclass
class HookResult:
    event: str
    memory: str
    run_id: str | None = None
    version: str | None = None
    committed: bool = False
    pulled: bool = False  # the hub's newer versions were merged in
    pushed: bool = False
    adopted: str | None = None  # "initialized" | "cloned" | "adopted"
    conflicts: int = 0
    warnings: list[str] = field(default_factory=list)  # what the snapshot found (secrets, size...)
    dreamt: bool = False  # Auto Dream's rewrite was committed on its own
    dream_proposal: str | None = None  # ... or made this proposal (`--dream propose`)
    joined: bool = False  # the hub's unrelated history was joined with ours


def run_id_for(a: Agent, payload: dict[str, Any]) -> str:
    """The session as the run: `claude-code-<session id>` (any unsafe character becomes `-`)."""
    session = re.sub(r"[^A-Za-z0-9._-]+", "-", str(payload.get("session_id") or "")).strip("-.")
    if not session:
        return new_run_id()
    return check_run_id(f"{a.key}-{session}"[:128].replace("..", "-"))


def handle(verb: str, a: Agent, name: str, directory: Path, remote: str | None,
           payload: dict[str, Any], dream_mode: str = "commit") -> HookResult:
    if verb not in HOOK_VERBS:
        raise UsageError(f"unknown hook {verb!r}", f"use one of: {', '.join(HOOK_VERBS)}")
    if dream_mode not in dream.MODES:
        raise UsageError(f"unknown --dream {dream_mode!r}", f"use one of: {', '.join(dream.MODES)}")
    check_name(name)
    short_network()
    result = HookResult(verb, name)
    mem, result.adopted = ensure_memory(a, name, directory.expanduser(), remote)
    whole_home = mem.root.resolve() == a.home.resolve()
    who = _attribution(verb, a, payload, result)
    with mem.locked():
        _sync(mem, a, verb, who, whole_home, result, dream_mode)
    return result


def _attribution(verb: str, a: Agent, payload: dict[str, Any], result: HookResult) -> Attribution:
    if verb == "session-start":
        return operator("Save local changes before the session")  # a previous session's last edits
    result.run_id = run_id_for(a, payload)
    event = str(payload.get("hook_event_name") or verb)
    session = str(payload.get("session_id") or result.run_id)
    return Attribution("run", f"{a.label} session {session} ({event})", result.run_id,
                       (("Memsync-Command", a.key), ("Memsync-Hook", event)))


def _sync(mem: Memory, a: Agent, verb: str, who: Attribution, whole_home: bool, result: HookResult,
          dream_mode: str = "commit") -> None:
    """Commit what is new (a dream's rewrite on its own), join a history the hub started apart,
    then fetch, merge and push; caller holds the memory's lock."""
    from memsync.core.snapshot import take
    from memsync.sync import exchange
    from memsync.sync.hubs import ensure_hub

    refuse_during_run(mem, "hooks run")
    mem.git.check_state(mem.branch)
    mem.git.ensure_layout(mem.branch, None)
    ensure_hub(mem.hub, mem)
    dreamt = dream_since_last_version(mem, whole_home) if a is agents.CLAUDE_CODE else None
    if dreamt is not None and dream_mode == "propose":  # the user reviews the dream's rewrite first
        result.dream_proposal, warning = dream.propose(mem, dream_attribution(a.key, dreamt))
        dream.handled(mem, whole_home)
        result.warnings += [warning] if warning else []
    elif dreamt is not None:  # Auto Dream rewrote the memory since its last version: its own commit
        snap = take(mem, dream_attribution(a.key, dreamt))
        dream.handled(mem, whole_home)
        result.warnings += _warnings(snap, a, whole_home)
        result.dreamt = snap.commit is not None
    snap = take(mem, who)
    mine = mem.git.head_oid()
    result.committed = snap.commit is not None or result.dreamt
    result.warnings += _warnings(snap, a, whole_home)

    def resnap() -> None:
        take(mem, who)

    merge_as = operator("Merge the remote memory") if verb == "session-start" else who
    accept = _only_memory_files(mem, a) if whole_home else None
    result.joined = _join_unrelated(mem, merge_as, resnap, accept)
    done = exchange.converge(mem, merge_as, resnap, accept=accept)
    result.pushed = done.pushed
    result.pulled = mem.git.head_oid() != mine  # pushing never moves the local head
    result.conflicts = len(done.conflicts)
    result.version = mem.git.head_oid()


def _warnings(snap: Snapshot, a: Agent, whole_home: bool) -> list[str]:
    """What the snapshot has to say, less the files memsync's own exclusions keep out (the
    agent's settings and credentials in its home, the dream's lock): those are by design."""
    from memsync.core.snapshot import describe
    from memsync.util.records import replace

    def expected(path: str) -> bool:
        name = path.rstrip("/").rsplit("/", 1)[-1]
        return agents.never_synced(name) or (
            whole_home and not agents.allowed_path(a, path.rstrip("/")))

    return describe(replace(snap, ignored=[p for p in snap.ignored if not expected(p)]))


def _join_unrelated(mem: Memory, who: Attribution, resnap: Callable[[], None],
                    accept: Callable[[str], None] | None) -> bool:
    """Two machines (or clones) that each started the memory before either pushed: the hub's
    history and ours share no version. Joined once, keeping both sides' files (git/join.py),
    then the exchange goes on as between any two versions."""
    from memsync.git.join import join_unrelated
    from memsync.sync import exchange

    ours = mem.git.head_oid()
    known = mem.git.ref_oid(mem.tracking_ref)
    if ours is None or (known is not None and mem.git.merge_base(ours, known) is not None):
        return False  # met before (the hub only moves on from there): no extra fetch
    theirs = exchange.fetch(mem)
    if theirs is None or mem.git.merge_base(ours, theirs) is not None or _redacted(mem, theirs, ours):
        return False  # a redacted history is followed by the exchange (sync/redaction.py), never joined
    if accept is not None:
        accept(theirs)  # the hub's version is checked before any of it reaches the work tree
    tag = exchange.their_tag(mem, theirs)
    message = compose(f"Join the hub's history of {mem.name} with this one (they started apart)",
                      who.trailers([]))
    joined = join_unrelated(mem.git, ours, theirs, tag, message, who.author())
    exchange.merge_in(mem, joined, who, resnap)  # a fast-forward: the work tree only gains files
    return True


def _redacted(mem: Memory, theirs: str, ours: str) -> bool:
    """The hub's history holds a redaction record: it may be ours rewritten, not another start."""
    from memsync.git.trailers import first, parse
    from memsync.sync.redaction import BASE

    return any(first(parse(info.message), BASE) is not None for info in mem.git.walk(theirs, hide=ours))


def _only_memory_files(mem: Memory, a: Agent) -> Callable[[str], None]:
    """In the agent's home a version from the hub may hold its memory files and nothing else: a
    settings.json from the hub would be the agent's configuration (its hooks run commands)."""
    from memsync.errors import RepoError

    def check(theirs: str) -> None:
        changed = mem.git.tree_changes(mem.git.head_oid(), theirs)
        bad = sorted(p for p, blob in changed.items() if blob is not None
                     and (not agents.allowed_path(a, p) or mem.git.is_link(theirs, p)))
        if bad:
            raise RepoError(f"refused version {theirs[:8]} of {mem.name!r}: it holds {bad[0]!r}, which is not "
                            f"one of {a.label}'s memory files (or is a symbolic link)",
                            "nothing was written; remove it on the hub")

    return check


# -- the memory directory -------------------------------------------------------------------------
def ensure_memory(a: Agent, name: str, directory: Path, remote: str | None) -> tuple[Memory, str | None]:
    """The memory at `directory`, made one if needed: cloned when the hub has it, adopted in place
    when the directory already holds files (the hub's versions of files that differ are kept
    beside them as conflict copies), else initialised."""
    from memsync.sync import storage as sync

    done = None
    whole_home = directory.resolve() == a.home.resolve()
    if cfgmod.find_root(directory) != directory.resolve():
        directory.mkdir(parents=True, exist_ok=True)
        remove_dead_stagings(directory.parent, f".memsync-adopt-{name}-")
        if (directory / ".git").exists() or not _on_hub(name, remote):
            sync.init(directory, name, None, remote)  # an existing repository is adopted as it is
            done = "initialized"
        elif any(directory.iterdir()) or whole_home:
            _adopt(name, directory, remote, a if whole_home else None)
            done = "adopted"
        else:
            directory.rmdir()
            sync.clone(name, directory, remote=remote)
            done = "cloned"
    if whole_home:  # every time: a kill may have come before it
        _exclude_all_but_memory(directory, a)
    else:
        _exclude(directory, NEVER_MARK, agents.NEVER_SYNCED)
    mem = open_memory(directory, remote)
    if mem.name != name:
        raise UsageError(f"{directory} holds the memory {mem.name!r}, not {name!r}",
                         "reinstall the hooks with the right --memory or --dir")
    return mem, done


def _on_hub(name: str, remote: str | None) -> bool:
    from memsync.core.hubbind import bind
    from memsync.git import hub as hubmod
    from memsync.sync.hubs import ensure_hub
    from memsync.sync.listing import _cache_repo

    url = hubmod.resolve(remote, None, name)
    hub = bind(url)
    ensure_hub(hub)
    return bool(hub.tips(_cache_repo(url), [f"refs/heads/{k}/{name}" for k in ("memory", "artifact")]))


def _adopt(name: str, directory: Path, remote: str | None, home_of: Agent | None) -> None:
    """Clone beside the directory, then move the clone's files in where none exists, its .git and
    .vm0 last. A file present in both with other bytes stays; the hub's version goes beside it.
    `home_of`: the directory is that agent's home, where only its memory files may arrive."""
    from memsync.errors import RepoError
    from memsync.sync import storage as sync

    staging = directory.parent / f".memsync-adopt-{name}-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    try:
        sync.clone(name, staging, remote=remote)
        clone = open_memory(staging).git
        git_files = clone.tracked_paths()
        tip = clone.head_oid()
        bad = [p for p in git_files if home_of is not None and
               (not agents.allowed_path(home_of, p) or (tip is not None and clone.is_link(tip, p)))]
        if bad:
            raise RepoError(f"refused the memory {name!r} from the hub: it holds {bad[0]!r}, which is not one "
                            f"of {home_of.label if home_of else ''}'s memory files (or is a symbolic link)",
                            f"nothing was written to {directory}; remove it on the hub")
        for rel in git_files:
            src, dst = staging / rel, directory / rel
            if not os.path.lexists(dst):
                dst.parent.mkdir(parents=True, exist_ok=True)
                os.replace(src, dst)
            elif not dst.is_file() or dst.read_bytes() != src.read_bytes():
                os.replace(src, _free_copy(dst, rel, set(git_files)))
        os.replace(staging / ".git", directory / ".git")  # killed after this: the next hook adopts it
        os.replace(staging / cfgmod.CONFIG_DIR, directory / cfgmod.CONFIG_DIR)  # the marker, last
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _free_copy(dst: Path, rel: str, taken: set[str]) -> Path:
    """Where the hub's version of `rel` goes beside ours: a conflict copy's name nothing holds,
    on disk or in the hub's tree (two clones adopting in one second would pick the same one)."""
    tag, n = host_name(), 1
    while True:
        name = conflict_copy_name(rel, tag if n == 1 else f"{tag}-{n}")
        if name not in taken and not os.path.lexists(dst.parent / Path(name).name):
            return dst.parent / Path(name).name
        n += 1


def _exclude_all_but_memory(directory: Path, a: Agent) -> None:
    _exclude(directory, EXCLUDE_MARK, a.exclude)


def _exclude(directory: Path, mark: str, lines: tuple[str, ...]) -> None:
    """memsync's own lines in the memory's .git/info/exclude, once (and completed when an
    earlier memsync wrote fewer of them)."""
    exclude = directory / ".git" / "info" / "exclude"
    current = exclude.read_text(encoding="utf-8") if exclude.exists() else ""
    missing = [line for line in lines if line not in current.splitlines()]
    if mark in current and not missing:
        return
    sep = "" if not current or current.endswith("\n") else "\n"
    head = "" if mark in current else mark + "\n"
    exclude.parent.mkdir(parents=True, exist_ok=True)
    text = current + sep + head + "\n".join(missing) + "\n"
    atomic_write(exclude, text.encode("utf-8"), keep_mode=True, durable=False)
