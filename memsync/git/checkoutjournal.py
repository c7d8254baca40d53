"""A checkout in progress, written down first, so that one cut short is undone by the next command.

libgit2 writes a checked-out file in place (open, truncate, write): a kill -9 or a full disk in
the middle of a file leaves a prefix of it, which the next scan would take for the user's edit
and commit (then push) as one. So before a checkout writes anything, memsync records in
.git/memsync-checkout.json the version the work tree is at (HEAD), the version being checked out
and the paths the checkout may write (None: a first checkout, every file of that version). The
record goes once the branch points at the new version.

A record found by the next command (under the memory's lock, before it looks for local changes)
means a checkout was cut short, and the work tree is rolled back to HEAD on those paths: a file
is put back when it holds what the checkout writes, a prefix of it (a file cut short), or nothing
(removed, or not yet written). A file holding anything else was changed by someone after the
crash and is left for the snapshot, as is a folder where a file was. The bytes put back are
written by libgit2 (HEAD's version, with the same filters) into a folder inside .git and renamed
into place, so a crash during the rollback leaves whole files only; the record is removed last.
The command then goes on as if the interrupted one had never started: a pull fetches and checks
out again, and nothing is committed.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
from pathlib import Path
from typing import TYPE_CHECKING

import pygit2
from pygit2.enums import CheckoutStrategy, FileMode

from memsync.util.fs import atomic_write
from memsync.util.records import field, recordclass

if TYPE_CHECKING:
    from memsync.git.repo import GitRepo

__all__ = ["JOURNAL", "Rollback", "begin", "finish", "pending", "recover"]

JOURNAL = "memsync-checkout.json"
_SCRATCH = "memsync-rollback"  # inside .git: the same file system as the work tree, never scanned
_LINK = int(FileMode.LINK)


@recordclass
class Rollback:
    """What recover() did: paths put back to HEAD's version, paths left as someone changed them."""

    restored: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)


def pending(git_dir: Path) -> bool:
    return (git_dir / JOURNAL).exists()


def begin(git: GitRepo, target: str, paths: list[str] | None) -> None:
    """Record the checkout of `target` over the current HEAD, before anything is written."""
    record = {"head": git.head_oid(), "target": target, "paths": paths, "held": git.held_back()}
    import json  # not every command reads or writes JSON: imported where it does

    atomic_write(git.git_dir / JOURNAL, json.dumps(record).encode("utf-8"), durable=False)


def finish(git: GitRepo) -> None:
    """The branch points at the version checked out: nothing left to undo."""
    (git.git_dir / JOURNAL).unlink(missing_ok=True)


def recover(git: GitRepo) -> Rollback | None:
    """Undo a checkout cut short (see the module's text); None when none was. OSError or
    pygit2.GitError (a disk still full) leaves the record for the next command."""
    journal = git.git_dir / JOURNAL
    try:
        import json
        record = json.loads(journal.read_text(encoding="utf-8"))
        head, target = record["head"], str(record["target"])
        paths, held = record["paths"], {str(k): str(v) for k, v in dict(record["held"]).items()}
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError):
        journal.unlink(missing_ok=True)  # not ours to read (half of a record is never written: it is renamed)
        return Rollback()
    if git.head_oid() != head:  # the branch moved on (to the target, or by git itself): nothing to undo
        journal.unlink(missing_ok=True)
        return Rollback()
    try:
        old = None if head is None else git._repo[head].peel(pygit2.Commit).tree
        new = git._repo[target].peel(pygit2.Commit).tree
    except (KeyError, ValueError, TypeError, pygit2.GitError):
        journal.unlink(missing_ok=True)  # names a version this repository lacks: nothing it could undo
        return Rollback()
    done = _roll_back(git, old, new, paths, held)
    journal.unlink(missing_ok=True)
    return done


def _roll_back(git: GitRepo, old: pygit2.Tree | None, new: pygit2.Tree, paths: list[str] | None,
               held: dict[str, str]) -> Rollback:
    repo = git._repo
    # only paths of one of the two versions (already checked as safe by hubtree before the checkout)
    wanted = _files(new) if paths is None else sorted(
        {str(p) for p in paths if isinstance(p, str) and (_entry(old, p) is not None or _entry(new, p) is not None)})
    done = Rollback()
    remove: list[str] = []
    write: list[str] = []
    # files HEAD lacks first: removing them empties the folders where HEAD has a file
    for path in sorted(wanted, key=lambda p: _entry(old, p) is not None and p not in held):
        before = None if path in held else _entry(old, path)  # a file held back is not on disk
        disk = git.root / path
        if not _plain_folders(git.root, path):  # a link in the way leads outside: never followed
            done.kept.append(path)
            continue
        if _matches(repo, disk, path, before):
            continue
        if not _written_by_checkout(repo, disk, path, _entry(new, path)):
            done.kept.append(path)
        elif before is None:
            disk.unlink(missing_ok=True)
            _prune_empty(git.root, path)
            remove.append(path)
        else:
            write.append(path)
    if write:
        scratch = git.git_dir / _SCRATCH
        shutil.rmtree(scratch, ignore_errors=True)
        assert old is not None  # something to put back means HEAD has it
        try:
            repo.checkout_tree(old, directory=str(scratch), paths=write,  # type: ignore[no-untyped-call]
                               strategy=CheckoutStrategy.FORCE | CheckoutStrategy.DONT_UPDATE_INDEX
                               | CheckoutStrategy.DISABLE_PATHSPEC_MATCH)
            for path in write:
                _put(scratch / path, git.root / path)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    done.restored = sorted(remove + write)
    _reset_index(repo, old, wanted)
    git.set_held_back(held)
    return done


def _plain_folders(root: Path, path: str) -> bool:
    """Whether no folder above `path` in the work tree is a symbolic link (a file there is the
    checkout's, where HEAD has a folder; nothing there is fine)."""
    folder = root
    for name in path.split("/")[:-1]:
        folder = folder / name
        try:
            mode = folder.lstat().st_mode
        except (FileNotFoundError, NotADirectoryError):
            return True
        except OSError:
            return False
        if stat.S_ISLNK(mode):
            return False
        if not stat.S_ISDIR(mode):
            return True
    return True


def _files(tree: pygit2.Tree) -> list[str]:
    return sorted(delta.new_file.path for delta in tree.diff_to_tree(swap=True).deltas)


def _entry(tree: pygit2.Tree | None, path: str) -> pygit2.Object | None:
    from memsync.git.repo import file_entry

    return None if tree is None else file_entry(tree, path)


def _forms(repo: pygit2.Repository, entry: pygit2.Object, path: str) -> list[bytes]:
    """The bytes a checkout writes for `entry` at `path`: the blob's, and its filtered form."""
    blob = repo[entry.id].peel(pygit2.Blob)
    forms = [blob.data]
    if entry.filemode != _LINK:
        with contextlib.suppress(pygit2.GitError, OSError, ValueError):
            with pygit2.BlobIO(blob, as_path=path) as stream:
                filtered = stream.read()
            if filtered != blob.data:
                forms.append(filtered)
    return forms


def _matches(repo: pygit2.Repository, disk: Path, path: str, entry: pygit2.Object | None) -> bool:
    """Whether the work tree already holds `entry` at `path` (None: nothing there)."""
    try:
        st = disk.lstat()
    except (FileNotFoundError, NotADirectoryError):
        return entry is None
    except OSError:
        return False
    if entry is None:
        return False
    if entry.filemode == _LINK:
        return stat.S_ISLNK(st.st_mode) and os.fsencode(os.readlink(disk)) == repo[entry.id].peel(pygit2.Blob).data
    if not stat.S_ISREG(st.st_mode) or bool(st.st_mode & 0o100) != (entry.filemode == FileMode.BLOB_EXECUTABLE):
        return False
    return _read(disk, st.st_size) in _forms(repo, entry, path)


def _written_by_checkout(repo: pygit2.Repository, disk: Path, path: str, entry: pygit2.Object | None) -> bool:
    """Whether what is at `path` can only be the checkout's doing: nothing, the file it writes,
    or a prefix of that file (an empty file included)."""
    try:
        st = disk.lstat()
    except (FileNotFoundError, NotADirectoryError):
        return True
    except OSError:
        return False
    if entry is None:
        return False
    if entry.filemode == _LINK:
        return _matches(repo, disk, path, entry)
    if not stat.S_ISREG(st.st_mode):
        return False
    forms = _forms(repo, entry, path)
    if st.st_size > max(len(f) for f in forms):
        return False
    data = _read(disk, st.st_size)
    return data is not None and any(f.startswith(data) for f in forms)


def _read(disk: Path, size: int) -> bytes | None:
    try:
        with open(disk, "rb") as fh:
            return fh.read(size + 1)
    except OSError:
        return None


def _put(source: Path, dest: Path) -> None:
    """Rename a file written in the scratch folder over `dest` (a file, or nothing)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    os.replace(source, dest)


def _prune_empty(root: Path, path: str) -> None:
    """Remove the folders above `path` that are empty now (git keeps no empty folder)."""
    parent = (root / path).parent
    while parent != root:
        try:
            parent.rmdir()
        except OSError:
            return
        parent = parent.parent


def _reset_index(repo: pygit2.Repository, old: pygit2.Tree | None, paths: list[str]) -> None:
    """The index entries of `paths` back to HEAD's (the checkout may have written its own);
    with no stat data, so the next scan reads those files once."""
    index = repo.index
    index.read(force=True)
    entries = {path: _entry(old, path) for path in paths}
    for path in paths:  # every entry out first: a file may take the place of a folder, or the reverse
        with contextlib.suppress(OSError, KeyError, pygit2.GitError):
            index.remove(path)
    for path, entry in entries.items():
        if entry is not None:
            index.add(pygit2.IndexEntry(path, entry.id, FileMode(entry.filemode)))
    index.write()
