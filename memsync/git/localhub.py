"""A hub on this machine, reached in place instead of through libgit2's local transport (the
functions remote.LocalHub calls: nothing above `git/` calls them directly).

libgit2's local (file://) transport lists every ref of the hub, peeling each one, on every
connection, and a push then looks each listed tip up in the pushing repository (each miss
rescans its packs), so a push slows with the number of memories on the hub (bench/fleet.py;
docs/PERFORMANCE.md). A memory needs one ref of the hub,
so this module reads that ref and nothing else, and pushes by writing the new objects into the
hub as one pack and moving the ref by compare-and-swap:

- the objects go first (a pack and its index, written by libgit2's indexer), the ref after,
  so a reader never meets a ref whose objects are missing;
- the ref moves only from the value the caller expects (libgit2 locks the ref, checks its
  current value and writes under that lock): a push that lost a race raises NotFastForward,
  as the transport's push does, and the caller fetches, merges and tries again;
- only a fast-forward is ever written (the hub's protection, `receive.denyNonFastForwards`,
  binds git's receive-pack; memsync holds itself to it here);
- a hub with a policy of its own (receive hooks, other `receive.*` settings) is pushed to
  through git's receive-pack instead (receivepack.py), so that policy applies.

Its files are read and written here too: a ref's tip read from its loose file or `packed-refs`
without libgit2 (`local_tip`), `HEAD` pointed at the first memory pushed (`point_head`), its
object files lent to a memory by hard links (`link_hub_objects`).

Which objects: the commits the hub lacks (a walk from the new tip hiding the hub's), and of
each commit's tree only what differs from its parents' trees at the same path; an unchanged
subtree is the parent's, which the hub has or this pack carries. A blob moved to another path
is sent again: harmless, and rare.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from pathlib import Path

import pygit2
from pygit2.enums import ObjectType, SortMode

from memsync.errors import RemoteError
from memsync.git import engine, receivepack, transport
from memsync.git.hub import HubUrl
from memsync.git.repo import GitRepo
from memsync.git.transport import NotFastForward, open_local_hub, translate
from memsync.util.fs import atomic_write

# A hub whose packed-refs file is at most this big has its ref moved in process (libgit2 parses
# the whole file, so its cost grows with the refs); a bigger one by `git update-ref`, which reads
# the one entry it needs but costs a process, whatever the size (docs/PERFORMANCE.md).
IN_PROCESS_PACKED_REFS = 256 * 1024


def branch_tip(hub: HubUrl, ref: str, opened: GitRepo | None = None) -> str | None:
    """The commit `ref` names on a hub on this machine, read from the hub alone (no listing of
    its other refs); None when there is no such branch. `opened`: the hub, opened already."""
    repo = (opened or open_local_hub(hub, "cannot fetch from"))._repo
    try:
        found = repo.references.get(ref)
    except (pygit2.GitError, ValueError) as exc:
        raise translate(exc, hub, "cannot fetch from") from exc
    if found is None:
        return None
    target = found.resolve().target
    return str(target) if isinstance(target, pygit2.Oid) else None


def in_place(git: GitRepo, hub: HubUrl) -> bool:
    """A hub on this machine that no URL rule of the operator's sends elsewhere (then only the
    transport may reach it: it follows the rule)."""
    return hub.local_path is not None and not transport.rewritten(git, hub)


def branch_tips(git: GitRepo, hub: HubUrl, refs: list[str]) -> dict[str, str]:
    """The tips of `refs` on any hub, each read alone: in place on this machine, else from one
    connection's advertisement (transport.branch_tips)."""
    if not in_place(git, hub):
        return transport.branch_tips(git, hub, refs)
    transport.check_local(hub)
    return {ref: tip for ref in refs if (tip := branch_tip(hub, ref)) is not None}


def push(git: GitRepo, hub: HubUrl, new: str, ref: str, expected: str | None,
         opened: GitRepo | None = None, *, in_process_packed_refs: int = IN_PROCESS_PACKED_REFS) -> int:
    """Make the hub's `ref` point at `new` (a commit of `git`), only if it points at `expected`
    now (None: only if it does not exist). Returns the number of objects written. The caller
    holds the hub's lock (remote.LocalHub.lock) as for every memsync write to a hub here.
    `in_process_packed_refs`: see _move_ref (-1: always by git where it is installed)."""
    hub_repo = (opened or open_local_hub(hub, "cannot push to"))._repo
    rules = receivepack.policy(Path(hub_repo.path))
    if rules:  # the hub's hooks and receive.* settings: through git's receive-pack, never around them
        receivepack.push(git, hub, Path(hub_repo.path), new, ref, rules)
        return 0
    mine = git.reader  # HEAD's folders may be in its object cache: the pack reads the parents' trees
    if expected is not None and not git.is_ancestor(expected, new):
        raise RemoteError(f"refusing to move {ref} on {hub.display} from {expected[:8]} to {new[:8]}: "
                          "not a fast-forward", "memsync never rewinds a hub's branch; fetch and merge first")
    try:
        written = _send_objects(mine, hub_repo, new, expected)
        _move_ref(hub_repo, ref, new, expected, in_process_packed_refs)
    except NotFastForward:
        raise
    except (pygit2.GitError, OSError, ValueError) as exc:
        raise translate(exc, hub, "cannot push to") from exc
    return written


def _send_objects(mine: pygit2.Repository, hub_repo: pygit2.Repository, new: str, expected: str | None) -> int:
    if new in hub_repo:  # pushed before, or another memory's identical history
        return 0
    # a first push (the whole memory): through a handle whose pack builder keeps no delta cache
    # and on a heap given back first (engine.for_packing), as the transport's push
    builder = pygit2.PackBuilder(mine if expected is not None else engine.for_packing(mine.path))
    walker = mine.walk(pygit2.Oid(hex=new), SortMode.TOPOLOGICAL)
    if expected is not None:
        walker.hide(pygit2.Oid(hex=expected))
    for commit in walker:
        builder.add(commit.id)
        _add_tree(builder, mine, commit.tree, [p.tree for p in commit.parents])
    if len(builder) == 0:
        return 0
    builder.write(str(Path(hub_repo.path) / "objects" / "pack"))
    return int(builder.written_objects_count)


def _add_tree(builder: pygit2.PackBuilder, repo: pygit2.Repository, tree: pygit2.Tree,
              bases: list[pygit2.Tree]) -> None:
    """`tree` and whatever under it differs from each of `bases` (the parents' trees at the same path)."""
    if any(tree.id == base.id for base in bases):
        return
    builder.add(tree.id)
    by_name = [{entry.name: entry for entry in base} for base in bases]
    for entry in tree:
        same = [b[entry.name] for b in by_name if entry.name in b]
        if any(other.id == entry.id for other in same):
            continue
        if entry.type == ObjectType.TREE:
            sub_bases = [repo[other.id] for other in same if other.type == ObjectType.TREE]
            _add_tree(builder, repo, repo[entry.id], sub_bases)  # type: ignore[arg-type]
        elif entry.type == ObjectType.BLOB:
            builder.add(entry.id)
        # a submodule's commit (ObjectType.COMMIT in a tree) is not this repository's object


def _move_ref(hub_repo: pygit2.Repository, ref: str, new: str, expected: str | None, in_process: int) -> None:
    """Compare-and-swap of one ref: by libgit2 on a hub whose packed-refs has at most `in_process`
    bytes or where git is not installed, else by git's `update-ref REF NEW OLD`. Both take the
    ref's lock file, check the value under it and write; libgit2 parses the whole packed-refs
    file to do so, git reads the one entry it needs at the cost of a process (docs/PERFORMANCE.md).
    `in_process` -1: git even with no packed-refs."""
    import shutil

    try:
        packed = os.stat(os.path.join(hub_repo.path, "packed-refs")).st_size
    except OSError:
        packed = 0  # no packed-refs: nothing to parse
    exe = None if packed <= in_process else shutil.which("git")
    if exe is None:
        _move_ref_libgit2(hub_repo, ref, new, expected)
        return
    import subprocess  # (only here: a status imports no subprocess)

    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_") or k.startswith("GIT_CONFIG")}
    # no hooks: memsync's writes to a hub here never ran any (libgit2's local transport runs none)
    argv = [exe, "--git-dir", hub_repo.path, "-c", f"core.hooksPath={os.devnull}",
            "update-ref", "-m", "memsync: push", ref, new, expected or ZERO]
    try:
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.SubprocessError):
        _move_ref_libgit2(hub_repo, ref, new, expected)
        return
    if done.returncode == 0:
        return
    now = hub_repo.references.get(ref)
    if (None if now is None else str(now.target)) != expected:
        raise NotFastForward(f"the hub's {ref} moved during the push")
    raise pygit2.GitError(done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "git update-ref failed")


ZERO = "0" * 40


def _move_ref_libgit2(hub_repo: pygit2.Repository, ref: str, new: str, expected: str | None) -> None:
    """Compare-and-swap: libgit2 takes the ref's lock, checks the value it read, then writes."""
    current = hub_repo.references.get(ref)
    now = None if current is None else current.target
    if (None if now is None else str(now)) != expected:
        raise NotFastForward(f"the hub's {ref} is not at {(expected or 'nothing')[:8]} any more")
    try:
        if current is None:
            hub_repo.references.create(ref, pygit2.Oid(hex=new), force=False)
        else:
            current.set_target(pygit2.Oid(hex=new), "memsync: push")
    except pygit2.GitError as exc:
        text = str(exc).lower()
        if any(word in text for word in ("exists", "lock", "match", "modified", "changed")):
            raise NotFastForward(f"the hub's {ref} moved during the push ({exc})") from exc
        raise


# -- the hub's files: its refs read without libgit2, HEAD, objects lent to a clone -------------------
def local_tip(hub: Path, ref: str) -> str | None:
    """The commit id `ref` names in a bare repository on this machine, read from its files (a
    loose ref, else packed-refs); None if absent or not a plain id. A hint only: the fetch
    that follows asks the hub itself."""
    text: str | None
    try:
        with open(os.path.join(hub, ref), "rb") as fh:
            text = fh.read(128).decode("ascii").strip()
    except FileNotFoundError:
        text = _packed_ref(hub, ref)
    except (OSError, UnicodeDecodeError):
        return None
    return text if text is not None and len(text) == 40 and _is_hex(text) else None


def _packed_ref(hub: Path, ref: str) -> str | None:
    try:
        with open(os.path.join(hub, "packed-refs"), "rb") as fh:
            wanted = b" " + ref.encode() + b"\n"
            for line in fh:
                if line.endswith(wanted):
                    return line[:40].decode("ascii")
    except (OSError, UnicodeDecodeError):
        pass
    return None


def _is_hex(text: str) -> bool:
    return all(c in "0123456789abcdef" for c in text)


def link_hub_objects(hub: Path, git_dir: Path, packs: bool = False,
                     have: Callable[[str], bool] | None = None) -> bool:
    """Hard-link a hub's object files into the memory's repository before fetching from a hub on
    this machine, as `git clone /path` does; they are never modified, only replaced.

    Loose objects always (a plain `git push` leaves them loose, and libgit2's local transport
    would pack each one in memory: a 200 MB file cost ~450 MB of RSS); with `packs`, the packs
    too (a clone: libgit2 would otherwise recompute every delta; docs/PERFORMANCE.md).
    `have(oid)`: objects the memory already holds (packed) are not linked again; a hub shared by
    many memories would otherwise hand each of them every memory's loose objects on every fetch,
    and the memory's automatic repack would pack them again each time.
    All or nothing: a fetch trusts that a commit it finds here comes with its whole history, so a
    partial copy would leave holes; on any failure (another file system, a repack removing files
    meanwhile) the links made are undone, False is returned and the fetch transfers what it needs.
    Loose objects go first: a repack writes its pack before removing them, so anything that
    vanished under us is in a pack listed afterwards.
    Linking any loose object links the packs too: a `git push` to the hub leaves commits loose
    whose parents are packed, and a loose commit without its history is a hole (libgit2's push
    then walks into it: "object not found", and `git fsck` reports a broken link)."""
    source, target = os.path.join(hub, "objects"), os.path.join(git_dir, "objects")
    linked: list[str] = []

    def link(src: str, dst: str) -> None:
        try:
            os.link(src, dst)
        except FileExistsError:
            return  # placed meanwhile (by another fetch): objects are never modified
        linked.append(dst)

    loose_linked = False
    try:
        for fan in sorted(n for n in os.listdir(source) if len(n) == 2 and _is_hex(n)):
            names = [n for n in os.listdir(os.path.join(source, fan)) if len(n) == 38]
            if not names:
                continue
            fan_dir = os.path.join(target, fan)
            if len(names) <= 8:  # a few: one stat each; many (a shared hub): one listing
                present = {n for n in names if os.path.exists(os.path.join(fan_dir, n))}
            else:
                try:
                    present = set(os.listdir(fan_dir))
                except FileNotFoundError:
                    present = set()
            missing = [n for n in names if n not in present and (have is None or not have(fan + n))]
            if not missing:
                continue
            if not present:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(fan_dir)  # (most fan directories exist already: one failed call)
            for name in missing:
                link(os.path.join(source, fan, name), os.path.join(fan_dir, name))
            loose_linked = True
        if packs or loose_linked:
            pack_dir = os.path.join(target, "pack")
            os.makedirs(pack_dir, exist_ok=True)
            for pack in sorted(Path(source, "pack").glob("pack-*.pack")):
                for src in (pack, pack.with_suffix(".idx")):  # the .idx last: a pack is visible once both exist
                    if not os.path.exists(os.path.join(pack_dir, src.name)):
                        link(str(src), os.path.join(pack_dir, src.name))
    except OSError:
        for path in reversed(linked):
            with contextlib.suppress(OSError):
                os.unlink(path)
        return False
    return True


def point_head(hub: Path, ref: str) -> bool:
    """A hub on this machine whose HEAD names a branch it does not have (`git init --bare` leaves
    an unborn master or main) gets HEAD on `ref`, the first memory pushed to it: a plain
    `git clone` of the hub then checks that memory out instead of nothing. A HEAD its owner
    pointed at an existing branch is left alone. Call under the hub's lock."""
    head = os.path.join(hub, "HEAD")
    try:
        with open(head, encoding="ascii") as fh:
            text = fh.read(512).strip()
    except (OSError, UnicodeDecodeError):
        return False
    if not text.startswith("ref: refs/heads/") or local_tip(hub, text[5:]) is not None:
        return False
    try:
        # as readable as before (a hub served as another user)
        atomic_write(Path(head), f"ref: {ref}\n".encode("ascii"), keep_mode=True, durable=False)
    except OSError:
        return False  # a read-only hub: only a plain clone's convenience is lost
    return True


__all__ = ["branch_tip", "branch_tips", "in_place", "link_hub_objects", "local_tip", "point_head", "push"]
