"""Read-only memories during a run: made non-writable while the command runs, and whatever the
command changed anyway is undone afterwards.

The undo puts back the version the run started with (the pulled version plus any local change the
operator had before the run) and moves what the command made (files, symlinks, folders) out of
the memory, to `$MEMSYNC_HOME/runs/<run-id>/ro/<memory>/<path>`, so no later push, pull or watch
ever commits it. Commits the command made there are dropped from the branch (named in the report).

A run killed before its undo leaves a record (`$MEMSYNC_HOME/runs/<run-id>/ro/<memory>.json`,
pointed to from `.git/memsync-ro-guard.json`); the next memsync command that opens the memory
finishes the undo. Permissions are changed without ever following a symlink.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import stat
from contextlib import AbstractContextManager
from pathlib import Path, PurePosixPath
from typing import Protocol

from memsync.git import history
from memsync.git.hub import memsync_home
from memsync.git.repo import GitRepo, file_blob_id
from memsync.git.scan import scan
from memsync.util.fs import atomic_write, pid_alive, place, real_folders
from memsync.util.records import field, recordclass


class Memory(Protocol):
    """What the read-only protection needs of a memory (core/memory.py's Memory). A protocol, not an
    import: opening a memory finishes a killed run's undo (memory.open_memory calls recover)."""

    root: Path
    git: GitRepo

    @property
    def name(self) -> str: ...

    @property
    def branch(self) -> str: ...

    @property
    def local_ref(self) -> str: ...

    def locked(self, timeout: float | None = None) -> AbstractContextManager[None]: ...


__all__ = ["Protection", "Undone", "check_same_folder", "chmod_nofollow", "protect", "recover", "undo"]

MARK = "memsync-ro-guard.json"  # its old name, kept: a marker an older memsync left is still found
_OWN = (".git", ".vm0")
_WRITE = 0o222


@recordclass
class Protection:
    """A read-only memory's state when the run started."""

    run_id: str
    name: str
    root: Path
    branch: str
    head: str | None
    modes: dict[str, int]  # path ("." the root) -> st_mode of every file, folder and symlink
    before: dict[str, str | None]  # local changes before the run: path -> blob id (None: deleted)
    ident: tuple[int, int] = (0, 0)  # the root folder's (st_dev, st_ino): the undo works only there

    @property
    def aside(self) -> Path:
        return memsync_home() / "runs" / self.run_id / "ro" / self.name

    @property
    def saved(self) -> Path:
        return memsync_home() / "runs" / self.run_id / "ro" / f"{self.name}.before"

    @property
    def own(self) -> Path:
        return memsync_home() / "runs" / self.run_id / "ro" / f"{self.name}.own"

    @property
    def record(self) -> Path:
        return memsync_home() / "runs" / self.run_id / "ro" / f"{self.name}.json"


@recordclass
class Undone:
    changed: list[str] = field(default_factory=list)  # paths put back (folders end in /)
    kept_in: str | None = None  # where what the command made was moved
    dropped_commit: str | None = None  # the branch tip the command committed, dropped


def _walk(root: Path) -> dict[str, int]:
    """st_mode of the root and of every file, folder and symlink under it (not .git, .vm0)."""
    modes: dict[str, int] = {".": root.lstat().st_mode}
    for here, dirs, files in os.walk(root):  # never follows a symlinked folder
        base = Path(here)
        if base == root:
            dirs[:] = [d for d in dirs if d not in _OWN]
        for name in dirs + files:
            path = base / name
            try:
                st = path.lstat()
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode) or stat.S_ISLNK(st.st_mode):
                modes[path.relative_to(root).as_posix()] = st.st_mode
    return modes


def chmod_nofollow(path: Path, mode: int) -> None:
    """chmod that never follows a symlink: the entry is opened with O_NOFOLLOW and changed
    through its descriptor; a symlink (or anything but a file or folder) is left alone."""
    try:
        st = path.lstat()
    except OSError:
        return
    if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)) or stat.S_IMODE(st.st_mode) == mode:
        return
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(path, flags)
    except PermissionError:  # mode 000 to its owner: by path, the entry was a file or folder above
        try:
            os.chmod(path, mode, follow_symlinks=False)
        except NotImplementedError:
            if not path.is_symlink():
                os.chmod(path, mode)
        except OSError:
            pass
        return
    except OSError:
        return  # gone, or a symlink by now (ELOOP): never followed
    try:
        kind = os.fstat(fd).st_mode
        if stat.S_ISREG(kind) or stat.S_ISDIR(kind):
            os.fchmod(fd, mode)
    except OSError:
        pass
    finally:
        os.close(fd)


def protect(mem: Memory, run_id: str) -> Protection:
    """Record the memory's state and make its files and folders non-writable for the run."""
    with mem.locked():
        before = {c.path: file_blob_id(mem.root / c.path) for c in scan(mem.git, full=True).changes}
    st = mem.root.lstat()
    protection = Protection(run_id, mem.name, mem.root, mem.branch, mem.git.head_oid(), _walk(mem.root), before,
                            (st.st_dev, st.st_ino))
    (memsync_home() / "runs").mkdir(mode=0o700, parents=True, exist_ok=True)  # what is kept there is private
    _save_before(protection)
    for rel in _own_files(mem):
        (protection.own / rel).parent.mkdir(parents=True, exist_ok=True)
        _copy(mem.root / rel, protection.own / rel)
    protection.record.parent.mkdir(parents=True, exist_ok=True)
    _write_json(protection.record, {"run_id": run_id, "name": protection.name, "root": str(protection.root),
                                    "branch": protection.branch, "head": protection.head,
                                    "modes": protection.modes, "before": protection.before,
                                    "ident": list(protection.ident)})
    _write_json(mem.git.git_dir / MARK, {"run_id": run_id, "pid": os.getpid()})
    for rel, mode in sorted(protection.modes.items(), reverse=True):  # files before their folders, root last
        chmod_nofollow(mem.root / rel, stat.S_IMODE(mode) & ~_WRITE)
    return protection


def _own_files(mem: Memory) -> list[str]:
    """memsync's and git's own files that steer what is seen and run later: storage.yaml, the
    repository's config, its exclude file and hooks (a regular file each; symlinks skipped)."""
    found = [".vm0/storage.yaml", ".git/config", ".git/info/exclude"]
    hooks = mem.root / ".git" / "hooks"
    if hooks.is_dir() and not hooks.is_symlink():
        found += [f".git/hooks/{p.name}" for p in sorted(hooks.iterdir())]
    return [rel for rel in found if (mem.root / rel).is_file() and not (mem.root / rel).is_symlink()]


def _put_back_own(mem: Memory, protection: Protection) -> list[str]:
    """storage.yaml, .git/config, info/exclude and hooks as they were: a changed or new one is kept
    aside (an exclude pattern would hide new files from the undo, a hook would run later)."""
    changed: list[str] = []
    for folder in (".vm0", ".git/info", ".git/hooks"):  # a symlink here would lead the writes outside
        path = mem.root / folder
        if os.path.lexists(path) and not stat.S_ISDIR(path.lstat().st_mode):
            _move(path, protection.aside / folder)
            changed.append(folder)
    saved = {p.relative_to(protection.own).as_posix() for p in protection.own.rglob("*") if not p.is_dir()} \
        if protection.own.exists() else set()
    hooks = mem.root / ".git" / "hooks"
    now = set(_own_files(mem)) | ({f".git/hooks/{p.name}" for p in hooks.iterdir()}
                                  if hooks.is_dir() and not hooks.is_symlink() else set())
    for rel in sorted(saved | now):
        path, copy = mem.root / rel, protection.own / rel
        same = rel in saved and path.is_file() and not path.is_symlink() and path.read_bytes() == copy.read_bytes()
        if same:
            continue
        changed.append(rel)
        if os.path.lexists(path):
            _move(path, protection.aside / rel)
        if rel in saved:
            path.parent.mkdir(parents=True, exist_ok=True)
            _copy(copy, path)
    return changed


def _save_before(protection: Protection) -> None:
    """The operator's own uncommitted files, copied aside: the undo puts them back as they were."""
    for rel, blob in protection.before.items():
        if blob is None:
            continue
        dst = protection.saved / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        _copy(protection.root / rel, dst)


def _copy(src: Path, dst: Path) -> None:
    if os.path.lexists(dst):
        dst.unlink()
    if src.is_symlink():
        os.symlink(os.readlink(src), dst)
    else:
        shutil.copy2(src, dst, follow_symlinks=False)


def _write_json(path: Path, data: object) -> None:
    atomic_write(path, json.dumps(data).encode("utf-8"))


def undo(mem: Memory, protection: Protection) -> Undone:
    """Put the memory back as it was when the run started; what the command made is kept aside.
    RepoError if the memory's folder itself was replaced (moved away, a symlink put in its place):
    nothing is touched then, as the path may now lead anywhere."""
    check_same_folder(mem.root, protection.ident)
    for rel, mode in sorted(protection.modes.items()):  # folders writable again first, root first
        if stat.S_ISDIR(mode):
            chmod_nofollow(mem.root / rel, stat.S_IMODE(mode) | 0o700)
    done = Undone()
    with mem.locked():
        own = _put_back_own(mem, protection)
        tip = mem.git.ref_oid(mem.local_ref)
        moved = tip != protection.head or mem.git.head_target() != mem.local_ref
        if moved:
            done.dropped_commit = tip if tip != protection.head else None
            mem.git.reset_branch(protection.branch, protection.head)
        now = {c.path: file_blob_id(mem.root / c.path) for c in scan(mem.git, full=True).changes}
        changed = sorted(p for p in set(now) | set(protection.before)
                         if (p in now) != (p in protection.before) or now.get(p) != protection.before.get(p))
        for rel in changed:
            _put_back(mem, protection, rel)
        new_dirs = _newcomers(mem.root, protection.modes)  # folders, and files git does not show (ignored)
        for rel in new_dirs:
            _keep_aside(protection, rel)
        for rel, mode in sorted(protection.modes.items(), reverse=True):
            path = mem.root / rel
            if stat.S_ISDIR(mode) and not os.path.lexists(path) and real_folders(mem.root, rel):
                path.mkdir(parents=True)
            chmod_nofollow(path, stat.S_IMODE(mode))
        if changed or moved or own:
            scan(mem.git, full=True)  # the index's stat cache, after the files were written
    done.changed = own + changed + [f"{d}/" if (protection.aside / d).is_dir() else d for d in new_dirs]
    if protection.aside.exists() and any(protection.aside.iterdir()):
        done.kept_in = str(protection.aside)
    (mem.git.git_dir / MARK).unlink(missing_ok=True)
    protection.record.unlink(missing_ok=True)
    for scratch in (protection.own, protection.saved):  # only the undo needed them
        shutil.rmtree(scratch, ignore_errors=True)
    for empty in (protection.aside, protection.record.parent, protection.record.parent.parent):
        with contextlib.suppress(OSError):
            empty.rmdir()  # only when nothing was kept there
    return done


def check_same_folder(root: Path, ident: tuple[int, int]) -> None:
    from memsync.errors import RepoError

    try:
        st = root.lstat()
    except OSError as exc:
        raise RepoError(f"{root} is gone ({exc.strerror})", "the memory's folder was moved during the run") from exc
    if stat.S_ISLNK(st.st_mode) or (st.st_dev, st.st_ino) != tuple(ident):
        raise RepoError(f"{root} is no longer the memory's folder (replaced during the run); nothing was changed "
                        "there", "find the memory's folder where the command moved it")


def _newcomers(root: Path, modes: dict[str, int]) -> list[str]:
    """Top-most entries that were not there, as that kind, when the run started."""
    found: list[str] = []
    for here, dirs, files in os.walk(root):
        base = Path(here)
        if base == root:
            dirs[:] = [d for d in dirs if d not in _OWN]
        keep = []
        for name in dirs + files:
            path = base / name
            rel = path.relative_to(root).as_posix()
            try:
                kind = stat.S_IFMT(path.lstat().st_mode)
            except OSError:
                continue
            if rel in modes and stat.S_IFMT(modes[rel]) == kind:
                if kind == stat.S_IFDIR:
                    keep.append(name)
            else:
                found.append(rel)
        dirs[:] = keep
    return found


def _keep_aside(protection: Protection, rel: str) -> None:
    """Move what is at `rel` (file, symlink or folder, never followed) out of the memory."""
    src = protection.root / rel
    if not real_folders(protection.root, rel) or not os.path.lexists(src):
        return
    _move(src, protection.aside / rel)


def _move(src: Path, dst: Path) -> None:
    """Move an entry (never followed), merging a folder into one already kept there."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    if os.path.lexists(dst):
        if src.is_dir() and not src.is_symlink() and dst.is_dir() and not dst.is_symlink():
            for child in list(src.iterdir()):
                _move(child, dst / child.name)
            src.rmdir()
            return
        if dst.is_dir() and not dst.is_symlink():
            shutil.rmtree(dst)
        else:
            dst.unlink()
    shutil.move(str(src), str(dst))


def _put_back(mem: Memory, protection: Protection, rel: str) -> None:
    """`rel` as it was when the run started; what is there now is kept aside first."""
    if rel in protection.before:
        blob = protection.before[rel]
        source: Path | tuple[bytes, int] | None = protection.saved / rel if blob is not None else None
    else:
        source = history.blob_at(mem.git, protection.head, rel) if protection.head else None
    if source is None:
        _keep_aside(protection, rel)
        return
    here = PurePosixPath()
    for part in PurePosixPath(rel).parts[:-1]:  # a folder on the way replaced by a file or a symlink
        here = here / part
        path = protection.root / here
        if os.path.lexists(path) and not stat.S_ISDIR(path.lstat().st_mode):
            _keep_aside(protection, here.as_posix())
    _keep_aside(protection, rel)
    target = protection.root / rel
    target.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(source, Path):
        _copy(source, target)
        return
    place(target, *source)


def recover(mem: Memory) -> Undone | None:
    """Finish the undo of a run that was killed (its mark in .git, its record in MEMSYNC_HOME)."""
    from memsync.errors import MemsyncError
    from memsync.util.names import check_run_id

    mark = mem.git.git_dir / MARK
    try:
        data = json.loads(mark.read_text(encoding="utf-8"))
        run_id, pid = check_run_id(str(data["run_id"])), int(data["pid"])
    except (OSError, ValueError, KeyError, TypeError, MemsyncError):
        return None
    if _alive(pid):
        return None  # that run is still going
    try:
        rec = json.loads((memsync_home() / "runs" / run_id / "ro" / f"{mem.name}.json").read_text(encoding="utf-8"))
        protection = Protection(run_id, mem.name, Path(rec["root"]), str(rec["branch"]), rec["head"],
                                {str(k): int(v) for k, v in rec["modes"].items()},
                                {str(k): (None if v is None else str(v)) for k, v in rec["before"].items()},
                                (int(rec["ident"][0]), int(rec["ident"][1])))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        mark.unlink(missing_ok=True)
        return None
    if protection.root.resolve() != mem.root.resolve() or protection.branch != mem.branch:
        return None  # a record for another memory: not ours to apply
    try:
        return undo(mem, protection)
    except OSError as exc:
        from memsync.errors import RepoError

        raise RepoError(f"cannot finish undoing what run {run_id} changed in the read-only memory {mem.name!r}: "
                        f"{exc.strerror or exc}", f"check the permissions in {mem.root}, then retry") from exc


def _alive(pid: int) -> bool:
    return pid == os.getpid() or pid_alive(pid)  # this process's own run undoes its own
