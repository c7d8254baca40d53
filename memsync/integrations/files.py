"""The memory's file operations for an agent: view, create, str_replace, insert, delete, rename.

One implementation behind the Claude memory tool and the MCP server. Semantics and messages follow
the Anthropic SDK's reference memory tool (create refuses an existing file, str_replace must match
exactly once, paths cannot leave the memory). What memsync adds: every write is one version of the
run; a write that looks destructive to the integrity guard is refused once with an explanation
(repeating it, or `confirm=True`, goes through and is flagged in history); protect policies and the
secret scan refuse a write before it touches the disk; `expected_sha256` (or, by default, the hash
of the file as the agent last saw it) refuses a write whose base changed meanwhile.

Errors are `Refused` (a `UsageError`) with a message written for the model to read.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from memsync.checks import guard, protect
from memsync.checks.pathnames import refused_path
from memsync.errors import MemsyncError, UsageError
from memsync.integrations.budget import MAX_RESULT_TOKENS, bound, cut_to_tokens, tokens
from memsync.integrations.memtree import Linked, MemoryTree, Missing, NotRegular, Replaced
from memsync.integrations.session import MemorySession
from memsync.util.records import recordclass

MAX_LINES = 999_999
LINE_NUMBER_WIDTH = len(str(MAX_LINES))
_INTERNAL = (".git", ".vm0")


class Refused(UsageError):
    """A file operation refused; the message is meant for the agent."""


@recordclass(frozen=True)
class Target:
    """A path as the agent wrote it (`shown`) and where it lands (`rel`, '' for the root: relative
    to the memory, no symlink in it). No absolute path: every use goes through memtree.py."""

    shown: str
    rel: str


def failure_text(exc: Exception) -> str:
    """What a tool call tells the model when an operation failed: memsync's own message (and its
    hint), or the file system's reason."""
    if isinstance(exc, MemsyncError):
        return exc.message + (f" ({exc.hint})" if exc.hint else "")
    reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
    return f"The memory could not do that: {reason}"


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@recordclass(frozen=True)
class FileOptions:
    """`check_seen`: a write to a file the agent viewed (or wrote) earlier in the session is refused
    if the file changed since (a merge from another writer at a checkpoint, another process).
    `confirm_destructive`: refuse a flagged write once, explaining it; False lets it through.
    `report_versions`: a write's result ends with ` (version 1a2b3c4d)`; False gives the Anthropic
    SDK reference tool's exact strings."""

    check_seen: bool = True
    confirm_destructive: bool = True
    report_versions: bool = True


class MemoryFiles:
    """File operations on one open memory session."""

    def __init__(self, session: MemorySession, options: FileOptions | None = None, *, tool: str = "memory",
                 root_name: str = "") -> None:
        options = options or FileOptions()
        self.session = session
        self.tool = tool
        self.root_name = root_name
        self.check_seen = options.check_seen
        self.confirm_destructive = options.confirm_destructive
        self.report_versions = options.report_versions
        self.seen: dict[str, str] = {}
        self.viewed_file = False  # the last view showed a file (not a folder)
        self._pending: set[tuple[str, str, str]] = set()

    # -- paths ----------------------------------------------------------------------------------
    def target(self, rel: str, shown: str | None = None, *, follow: bool = True) -> Target:
        """Where `rel` lands, as a path relative to the memory with no symlink in it (a link
        inside the memory is resolved here, once). `follow=False` (delete, rename) keeps a symlink
        at the end of the path as itself: deleting or renaming a link acts on the link, never on
        what it points at. Every operation after this check reaches `rel` through the memory's
        folder descriptors without following a link (memtree.py): a link planted meanwhile makes
        it fail, never read or write outside."""
        shown = shown if shown is not None else rel
        if "\0" in rel:
            raise Refused(f"Path {shown} holds a NUL character")
        root = self.session.root.resolve()
        full = Path(os.path.normpath(root / rel.lstrip("/")))
        if full != root and root not in full.parents:
            raise Refused(f"Path {shown} would escape {self._root_shown()} directory")
        # symlinks anywhere on the path (the last component too, unless it is the one acted on)
        resolved = full.resolve() if follow or full == root else full.parent.resolve() / full.name
        if resolved != root and root not in resolved.parents:
            raise Refused(f"Path {shown} would escape {self._root_shown()} directory via symlink")
        canon = resolved.relative_to(root).as_posix() if resolved != root else ""
        parts = canon.split("/") if canon else []
        if parts and (parts[0] in _INTERNAL or ".git" in parts):
            raise Refused(f"Path {shown} is memsync's own data, not part of the memory")
        if canon and refused_path(canon) is not None:  # what no version may hold (checks/pathnames.py)
            raise Refused(f"Path {shown}: {refused_path(canon)}; choose another name")
        return Target(shown, canon)

    def _root_shown(self) -> str:
        return self.root_name or "the memory"

    @contextlib.contextmanager
    def _tree(self, t: Target) -> Iterator[MemoryTree]:
        """The memory's tree by descriptors; a link met on the way is refused with the path."""
        try:
            with MemoryTree(self.session.root, self.session.root_id) as tree:
                yield tree
        except Replaced:
            raise Refused(f"{self._root_shown()} is not the folder this session opened any more (it was moved "
                          "or replaced by a link); nothing was read or written") from None
        except Linked:
            raise Refused(f"The path {t.shown} is a symlink, or a symlink stands on its way (planted after "
                          "the tool checked it); the memory tool never follows one") from None

    # -- reads ----------------------------------------------------------------------------------
    def view(self, t: Target, view_range: list[int] | None = None) -> str:
        self.viewed_file = False
        with self._tree(t) as tree:
            leaf = tree.lstat(t.rel)
            if leaf is None:
                raise Refused(f"The path {t.shown} does not exist. Please provide a valid path.")
            if stat.S_ISDIR(leaf.st_mode):
                return self._listing(tree, t, leaf)
            if stat.S_ISLNK(leaf.st_mode):  # the check resolved every link: this one came after it
                raise Linked(errno.ELOOP, "a symbolic link stands on the path")
            if not stat.S_ISREG(leaf.st_mode):
                raise Refused(f"Unsupported file type for {t.shown}")
            data = self._read_in(tree, t)
        self.viewed_file = True
        lines = _text(data, t).split("\n")
        if len(lines) > MAX_LINES:
            raise Refused(f"File {t.shown} exceeds maximum line limit of 999,999 lines.")
        start = 1
        if view_range and len(view_range) == 2:
            first = max(1, view_range[0]) - 1
            end = len(lines) if view_range[1] == -1 else view_range[1]
            lines, start = lines[first:end], first + 1
        header = f"Here's the content of {t.shown} with line numbers:\n"
        return header + _numbered(lines, start, MAX_RESULT_TOKENS, t.shown, len(header))

    def read(self, t: Target) -> bytes:
        """A regular file's bytes (and the agent has now seen this version of it)."""
        with self._tree(t) as tree:
            return self._read_in(tree, t)

    def _read_in(self, tree: MemoryTree, t: Target) -> bytes:
        data = self._bytes(tree, t)
        self.seen[t.rel] = sha256(data)
        return data

    def _bytes(self, tree: MemoryTree, t: Target) -> bytes:
        try:
            return tree.read(t.rel)
        except Missing:
            raise Refused(f"The path {t.shown} does not exist. Please provide a valid path.") from None
        except NotRegular:
            raise Refused(f"The path {t.shown} is not a file.") from None

    def _listing(self, tree: MemoryTree, t: Target, leaf: os.stat_result) -> str:
        items: list[tuple[str, str]] = []
        root = self.session.root.resolve()

        def inside(rel: str) -> str | None:
            """Where a link found in a listing lands, if inside the memory (and not its own data)."""
            resolved = (root / rel).resolve()
            if resolved == root or root not in resolved.parents:
                return None
            canon = resolved.relative_to(root).as_posix()
            return None if canon.split("/")[0] in _INTERNAL or ".git" in canon.split("/") else canon

        def collect(folder: str, prefix: str, depth: int) -> None:
            try:
                entries = tree.entries(folder)
            except OSError:
                return
            for name, st in entries:
                if name.startswith("."):
                    continue
                rel = f"{prefix}/{name}" if prefix else name
                real = f"{folder}/{name}" if folder else name
                if stat.S_ISLNK(st.st_mode):  # shown as what it names, if that stays inside
                    canon = inside(real)
                    target_st = tree.lstat(canon) if canon is not None else None
                    if canon is None or target_st is None:
                        continue
                    real, st = canon, target_st
                if stat.S_ISDIR(st.st_mode):
                    items.append((_size(st.st_size), f"{rel}/"))
                    if depth < 2:
                        collect(real, rel, depth + 1)
                elif stat.S_ISREG(st.st_mode):
                    items.append((_size(st.st_size), rel))

        collect(t.rel, "", 1)
        base = t.shown.rstrip("/")  # "/" and "/memories/" list "/a.md" and "/memories/a.md", never "//a.md"
        header = f"Here're the files and directories up to 2 levels deep in {t.shown}, excluding hidden items:"
        lines = [f"{_size(leaf.st_size)}\t{t.shown}"] + [f"{size}\t{base}/{path}" for size, path in items]
        text = f"{header}\n" + "\n".join(lines)
        if tokens(text) <= MAX_RESULT_TOKENS:
            return text
        kept = cut_to_tokens(text, MAX_RESULT_TOKENS).rsplit("\n", 1)[0]
        more = len(lines) - kept.count("\n")
        return kept + f"\n… and {more} more entries; view a folder below {t.shown} to see them"

    # -- writes ---------------------------------------------------------------------------------
    def create(self, t: Target, text: str, *, confirm: bool = False) -> str:
        with self.session.locked(), self._tree(t) as tree:
            self._writable(t)
            if tree.lstat(t.rel) is not None:
                raise Refused(f"File {t.shown} already exists")
            data = text.encode("utf-8")
            self._check(t, None, data, confirm=confirm, op="create")
            try:
                tree.create(t.rel, data)
            except FileExistsError:
                raise Refused(f"File {t.shown} already exists") from None
            except Missing:
                raise Refused(f"The path {t.shown} does not exist. Please provide a valid path.") from None
            note = self._commit("create", [t.rel], data_of={t.rel: data})
        return f"File created successfully at: {t.shown}" + note

    def str_replace(self, t: Target, old_str: str, new_str: str, *, expected_sha256: str | None = None,
                    confirm: bool = False) -> str:
        with self.session.locked(), self._tree(t) as tree:
            self._writable(t)
            before = self._bytes(tree, t)
            content = _text(before, t)
            if not old_str:
                raise Refused("No replacement was performed: old_str is empty. Quote the exact text to replace, "
                              "or use insert to add lines.")
            count = content.count(old_str)
            if count == 0:
                raise Refused(f"No replacement was performed, old_str `{old_str}` did not appear verbatim "
                              f"in {t.shown}.")
            if count > 1:
                starts: list[int] = []
                at = content.find(old_str)
                while at != -1 and len(starts) < 50:
                    starts.append(at)
                    at = content.find(old_str, at + 1)
                lines = ", ".join(str(content.count("\n", 0, i) + 1) for i in starts)
                lines += ", …" if count > len(starts) else ""
                raise Refused(f"No replacement was performed. Multiple occurrences of old_str `{old_str}` in "
                              f"lines: {lines}. Please ensure it is unique")
            pos = content.find(old_str)
            changed_line = content[:pos].count("\n")
            new_content = content.replace(old_str, new_str)
            data = new_content.encode("utf-8")
            self._check(t, before, data, expected_sha256=expected_sha256, confirm=confirm, op="str_replace")
            tree.replace(t.rel, data)
            note = self._commit("str_replace", [t.rel], data_of={t.rel: data})
        new_lines = new_content.split("\n")
        first, last = max(0, changed_line - 2), min(len(new_lines), changed_line + 3)
        snippet = [f"{str(n).rjust(LINE_NUMBER_WIDTH)}\t{new_lines[n - 1]}" for n in range(first + 1, last + 1)]
        return ("The memory file has been edited. Here is the snippet showing the change (with line numbers):\n"
                + "\n".join(snippet) + note)

    def insert(self, t: Target, insert_line: int, insert_text: str, *, expected_sha256: str | None = None,
               confirm: bool = False) -> str:
        with self.session.locked(), self._tree(t) as tree:
            self._writable(t)
            before = self._bytes(tree, t)
            lines = _text(before, t).split("\n")
            if lines[-1] == "":
                lines.pop()
            if insert_line < 0 or insert_line > len(lines):
                raise Refused(f"Invalid `insert_line` parameter: {insert_line}. "
                              f"It should be within the range [0, {len(lines)}].")
            lines.insert(insert_line, insert_text.rstrip("\n"))
            new_content = "\n".join(lines)
            if not new_content.endswith("\n"):
                new_content += "\n"
            data = new_content.encode("utf-8")
            self._check(t, before, data, expected_sha256=expected_sha256, confirm=confirm, op="insert")
            tree.replace(t.rel, data)
            note = self._commit("insert", [t.rel], data_of={t.rel: data})
        return f"The file {t.shown} has been edited." + note

    def delete(self, t: Target, *, expected_sha256: str | None = None, confirm: bool = False) -> str:
        with self.session.locked(), self._tree(t) as tree:
            self._writable(t)
            if not t.rel:
                raise Refused(f"Cannot delete the {self._root_shown()} directory itself")
            leaf = tree.lstat(t.rel)
            if leaf is None:
                raise Refused(f"The path {t.shown} does not exist")
            folder = stat.S_ISDIR(leaf.st_mode)  # a link goes as a link, never what it points at
            files = tree.files_under(t.rel) if folder else [t.rel]
            olds = {f: self._old(tree, f) for f in files}
            if stat.S_ISREG(leaf.st_mode):
                self._precondition(t, olds[t.rel], expected_sha256)
            changes = [guard.FileChange(f, olds[f], None, self.session.created_here(f)) for f in files]
            self._policies(changes, t)
            self._check_integrity(changes, t, confirm, op="delete", key_extra="")
            tree.remove(t.rel)
            for f in files:
                self.seen.pop(f, None)
            note = self._commit("delete", files or [t.rel], data_of={})
        return f"Successfully deleted {t.shown}" + note

    def rename(self, old: Target, new: Target, *, expected_sha256: str | None = None) -> str:
        with self.session.locked(), self._tree(old) as tree:
            self._writable(old)
            self._writable(new)
            if not old.rel:
                raise Refused(f"Cannot rename the {self._root_shown()} directory itself")
            if tree.lstat(new.rel) is not None:
                raise Refused(f"The destination {new.shown} already exists")
            leaf = tree.lstat(old.rel)
            if leaf is None:
                raise Refused(f"The path {old.shown} does not exist")
            if new.rel == old.rel or new.rel.startswith(old.rel + "/"):
                raise Refused(f"Cannot move {old.shown} into itself")
            folder = stat.S_ISDIR(leaf.st_mode)  # a link moves as a link, never what it points at
            files = tree.files_under(old.rel) if folder else [old.rel]
            moved = {f: new.rel + f[len(old.rel):] for f in files}
            olds = {f: self._old(tree, f) for f in files}
            if stat.S_ISREG(leaf.st_mode):
                self._precondition(old, olds[old.rel], expected_sha256)
            changes = [guard.FileChange(f, olds[f], None) for f in files]
            changes += [guard.FileChange(moved[f], None, olds[f]) for f in files]
            self._policies(changes, old)
            tree.rename(old.rel, new.rel)
            for f in files:
                seen = self.seen.pop(f, None)
                if seen is not None:
                    self.seen[moved[f]] = seen
            # A rename loses nothing: no integrity flag for the old path's "deletion".
            note = self._commit("rename", [*files, *moved.values()], data_of={}, integrity=False,
                                label=f"{old.rel} -> {new.rel}")
        return f"Successfully renamed {old.shown} to {new.shown}" + note

    # -- checks ---------------------------------------------------------------------------------
    def _writable(self, t: Target) -> None:
        if self.session.read_only:
            raise Refused(f"{t.shown}: the memory {self.session.name!r} is mounted read-only; writes are refused")

    def _old(self, tree: MemoryTree, rel: str) -> bytes | None:
        """What `rel` holds now, for the guard and the policies: a link's target, a file's bytes."""
        st = tree.lstat(rel)
        try:
            if st is not None and stat.S_ISLNK(st.st_mode):
                return tree.readlink(rel)
            return tree.read(rel) if st is not None and stat.S_ISREG(st.st_mode) else None
        except OSError:
            return None

    def _check(self, t: Target, old: bytes | None, new: bytes, *, op: str, confirm: bool,
               expected_sha256: str | None = None) -> None:
        if old is not None:
            self._precondition(t, old, expected_sha256)
        limit = self.session.memory.config.max_file_size
        if len(new) > limit:
            raise Refused(f"{t.shown}: {len(new)} bytes is larger than this memory's max_file_size ({limit}); "
                          "nothing was written")
        self._secrets(t, old, new)
        change = guard.FileChange(t.rel, old, new, self.session.created_here(t.rel))
        self._policies([change], t)
        self._check_integrity([change], t, confirm, op=op, key_extra=sha256(new))

    def _precondition(self, t: Target, old: bytes | None, expected: str | None) -> None:
        if old is None:
            return
        if expected is None and self.check_seen:
            expected = self.seen.get(t.rel)
        if expected is None:
            return
        current = sha256(old)
        if current != expected.strip().lower():
            raise Refused(f"Precondition failed: {t.shown} changed since you read it (its sha256 is now "
                          f"{current[:12]}…, not {expected.strip()[:12]}…); nothing was written. View it "
                          "again and redo the edit on the current content.")

    def _secrets(self, t: Target, old: bytes | None, new: bytes) -> None:
        """A secret this write adds is refused (one already in the file does not block edits)."""
        if self.session.memory.config.secrets == "off":
            return
        from memsync.checks import secrets as secretscan

        known = {(f.rule, f.preview) for f in secretscan.scan_bytes(t.rel, old)} if old else set()
        found = [f for f in secretscan.scan_bytes(t.rel, new) if (f.rule, f.preview) not in known]
        if found:
            where = ", ".join(f"line {f.line} ({f.rule}: {f.preview})" for f in found[:3])
            raise Refused(f"Refused: {t.shown} would hold what looks like a secret at {where}. Memories are "
                          "pushed to a shared hub and kept in history for good; nothing was written. Leave "
                          "the secret out (refer to it by name), or, if it is not a secret, add "
                          "`memsync:allow-secret` on that line.")

    def _policies(self, changes: list[guard.FileChange], t: Target) -> None:
        raw = self.session.memory.config.protect
        rules = protect.parse_protect(raw) if raw else []
        violations = protect.policy_violations(changes, rules) if rules else []
        if violations:
            v = violations[0]
            raise Refused(f"Refused by this memory's protect policy: {v.path} is {v.reason} (rule "
                          f"`{v.rule.pattern}`); nothing was written."
                          + (" Append to the end of the file instead (insert at the last line)."
                             if v.rule.mode == "append-only" and any(c.new for c in changes) else ""))

    def _check_integrity(self, changes: list[guard.FileChange], t: Target, confirm: bool, *, op: str,
                 key_extra: str) -> None:
        flags = guard.integrity_flags(changes, "run")
        if not flags or not self.confirm_destructive:
            return
        key = (op, t.rel, key_extra + "|" + ",".join(sha256(c.old or b"") for c in changes))
        if confirm or key in self._pending:
            self._pending.discard(key)
            return
        self._pending.add(key)
        raise Refused(f"Refused: this {op} looks destructive: {_explain(flags[0])}"
                      + (f" (and {len(flags) - 1} more files)" if len(flags) > 1 else "")
                      + ". Memories are easy to wreck by accident (a failed search read as 'no notes "
                      "yet'), so nothing was written. View the file and edit it in place (str_replace, "
                      "insert). If you really mean it, repeat exactly the same command: it will be "
                      "made, and recorded with an integrity flag.")

    def _commit(self, op: str, paths: list[str], *, data_of: dict[str, bytes], integrity: bool = True,
                label: str | None = None) -> str:
        what = label or ", ".join(paths[:3]) + (f" and {len(paths) - 3} more" if len(paths) > 3 else "")
        snap = self.session.record(paths, f"{self.tool}: {op} {what}", f"{self.tool} {op} {what}",
                                   check_integrity=integrity)
        for rel, data in data_of.items():
            self.seen[rel] = sha256(data)
        notes = []
        if snap.commit is not None and self.report_versions:
            notes.append(f"version {snap.commit[:8]}")
        warning = self.session.maybe_checkpoint()
        if warning:
            notes.append(warning)
        return f" ({'; '.join(notes)})" if notes else ""


def _explain(flag: guard.Flag) -> str:
    if flag.kind == "shrink":
        return f"{flag.path} would shrink from {flag.old_size} to {flag.new_size} bytes, dropping most of it"
    if flag.kind == "rewrite":
        return f"{flag.path} would lose most of its existing text (a rewrite, not an edit)"
    return f"{flag.path} existed before this session and would be deleted"


def _text(data: bytes, t: Target) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise Refused(f"{t.shown} is not UTF-8 text; the memory tool edits text files only") from None


def _numbered(lines: list[str], start: int, budget: int, shown: str, used: int = 0) -> str:
    """Lines with their numbers, as many as fit in `budget` estimated tokens (budget.py); past
    it, a last line says which view_range shows the rest (a line longer than a whole result is
    shown cut)."""
    out: list[str] = []
    spent = tokens(" " * used) + 60  # the header, and the last line saying where to go on
    for i, line in enumerate(lines):
        entry = f"{str(i + start).rjust(LINE_NUMBER_WIDTH)}\t{line}"
        cost = tokens(entry) + 1
        if spent + cost > budget:
            if not out:  # one line longer than a whole result
                out.append(cut_to_tokens(entry, budget - spent))
                return "\n".join(out) + (f"\n… line {start} of {shown} is {len(line):,} characters long, shown "
                                          "cut; edit it with str_replace on a part you can see")
            last = start + i - 1
            total = start + len(lines) - 1
            following = f"[{last + 1}, {min(total, last + i)}]"
            return "\n".join(out) + (f"\n… cut at about {budget:,} tokens (what one result holds): this shows "
                                      f"lines {start}-{last} of {start}-{total}. View the rest with view_range "
                                      f"{following} (and so on)")
        out.append(entry)
        spent += cost
    return "\n".join(out)


def _size(n: int) -> str:
    if n == 0:
        return "0B"
    i = min((n.bit_length() - 1) // 10, 3)
    size = n / 1024**i
    unit = "BKMG"[i]
    return f"{int(size)}{unit}" if size == int(size) else f"{size:.1f}{unit}"


__all__ = ["MAX_RESULT_TOKENS", "MemoryFiles", "Refused", "Target", "bound", "failure_text", "sha256"]
