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

import hashlib
import os
import shutil
import stat
from pathlib import Path

from memsync.checks import guard
from memsync.checks.pathnames import refused_path
from memsync.errors import MemsyncError, UsageError
from memsync.integrations import private
from memsync.integrations.session import MemorySession
from memsync.util.fs import atomic_write
from memsync.util.records import dataclass

MAX_LINES = 999_999
MAX_RESULT_CHARS = 60_000  # what one tool result may hold; a 4 MB file is read in pages (view_range)
LINE_NUMBER_WIDTH = len(str(MAX_LINES))
_INTERNAL = (".git", ".vm0")


class Refused(UsageError):
    """A file operation refused; the message is meant for the agent."""


@dataclass(frozen=True)
class Target:
    """A path as the agent wrote it (`shown`) and where it lands (`rel`, '' for the root)."""

    shown: str
    rel: str
    full: Path


def failure_text(exc: Exception) -> str:
    """What a tool call tells the model when an operation failed: memsync's own message (and its
    hint), or the file system's reason."""
    if isinstance(exc, MemsyncError):
        return exc.message + (f" ({exc.hint})" if exc.hint else "")
    reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
    return f"The memory could not do that: {reason}"


def bound(text: str, hint: str = "ask for less") -> str:
    """Any tool result or error, cut to MAX_RESULT_CHARS with a last line saying so."""
    if len(text) <= MAX_RESULT_CHARS:
        return text
    return text[: MAX_RESULT_CHARS - 200] + f"\n… cut at {MAX_RESULT_CHARS - 200:,} of {len(text):,} characters; {hint}"


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
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
        self._pending: set[tuple[str, str, str]] = set()

    # -- paths ----------------------------------------------------------------------------------
    def target(self, rel: str, shown: str | None = None, *, follow: bool = True) -> Target:
        """Where `rel` lands. `follow=False` (delete, rename) keeps a symlink at the end of the
        path as itself: deleting or renaming a link acts on the link, never on what it points at."""
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
        return Target(shown, canon, resolved)

    def _root_shown(self) -> str:
        return self.root_name or "the memory"

    # -- reads ----------------------------------------------------------------------------------
    def view(self, t: Target, view_range: list[int] | None = None) -> str:
        try:
            leaf = os.lstat(t.full)
        except (FileNotFoundError, NotADirectoryError):
            raise Refused(f"The path {t.shown} does not exist. Please provide a valid path.") from None
        if stat.S_ISDIR(leaf.st_mode):
            return self._listing(t, leaf)
        if not stat.S_ISREG(leaf.st_mode):
            raise Refused(f"Unsupported file type for {t.shown}")
        data = self.read(t)
        lines = _text(data, t).split("\n")
        if len(lines) > MAX_LINES:
            raise Refused(f"File {t.shown} exceeds maximum line limit of 999,999 lines.")
        start = 1
        if view_range and len(view_range) == 2:
            first = max(1, view_range[0]) - 1
            end = len(lines) if view_range[1] == -1 else view_range[1]
            lines, start = lines[first:end], first + 1
        header = f"Here's the content of {t.shown} with line numbers:\n"
        return header + _numbered(lines, start, MAX_RESULT_CHARS - len(header), t.shown)

    def read(self, t: Target) -> bytes:
        """A regular file's bytes (and the agent has now seen this version of it)."""
        data = self._bytes(t)
        self.seen[t.rel] = sha256(data)
        return data

    def _bytes(self, t: Target) -> bytes:
        if not t.full.is_file():
            if t.full.exists():
                raise Refused(f"The path {t.shown} is not a file.")
            raise Refused(f"The path {t.shown} does not exist. Please provide a valid path.")
        with open(t.full, "rb") as fh:
            return fh.read()

    def _listing(self, t: Target, leaf: os.stat_result) -> str:
        items: list[tuple[str, str]] = []
        root = self.session.root.resolve()

        def collect(directory: Path, prefix: str, depth: int) -> None:
            try:
                entries = sorted(directory.iterdir(), key=lambda p: p.name)
            except OSError:
                return
            for item in entries:
                if item.name.startswith("."):
                    continue
                rel = f"{prefix}/{item.name}" if prefix else item.name
                try:
                    resolved = item.resolve()
                    if resolved != root and root not in resolved.parents:
                        continue
                    st = item.stat()
                except OSError:
                    continue
                if stat.S_ISDIR(st.st_mode):
                    items.append((_size(st.st_size), f"{rel}/"))
                    if depth < 2:
                        collect(item, rel, depth + 1)
                elif stat.S_ISREG(st.st_mode):
                    items.append((_size(st.st_size), rel))

        collect(t.full, "", 1)
        base = t.shown.rstrip("/")  # "/" and "/memories/" list "/a.md" and "/memories/a.md", never "//a.md"
        header = f"Here're the files and directories up to 2 levels deep in {t.shown}, excluding hidden items:"
        lines = [f"{_size(leaf.st_size)}\t{t.shown}"] + [f"{size}\t{base}/{path}" for size, path in items]
        text = f"{header}\n" + "\n".join(lines)
        if len(text) <= MAX_RESULT_CHARS:
            return text
        kept = text[:MAX_RESULT_CHARS].rsplit("\n", 1)[0]
        more = len(lines) - kept.count("\n")
        return kept + f"\n… and {more} more entries; view a folder below {t.shown} to see them"

    # -- writes ---------------------------------------------------------------------------------
    def create(self, t: Target, text: str, *, confirm: bool = False) -> str:
        with self.session.locked():
            self._writable(t)
            if t.full.exists() or t.full.is_symlink():
                raise Refused(f"File {t.shown} already exists")
            data = text.encode("utf-8")
            self._check(t, None, data, confirm=confirm, op="create")
            private.make_dirs(t.full.parent)
            try:
                private.create_file(t.full, data)
            except FileExistsError:
                raise Refused(f"File {t.shown} already exists") from None
            note = self._commit("create", [t.rel], data_of={t.rel: data})
        return f"File created successfully at: {t.shown}" + note

    def str_replace(self, t: Target, old_str: str, new_str: str, *, expected_sha256: str | None = None,
                    confirm: bool = False) -> str:
        with self.session.locked():
            self._writable(t)
            before = self._bytes(t)
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
            _atomic_write(t.full, data)
            note = self._commit("str_replace", [t.rel], data_of={t.rel: data})
        new_lines = new_content.split("\n")
        first, last = max(0, changed_line - 2), min(len(new_lines), changed_line + 3)
        snippet = [f"{str(n).rjust(LINE_NUMBER_WIDTH)}\t{new_lines[n - 1]}" for n in range(first + 1, last + 1)]
        return ("The memory file has been edited. Here is the snippet showing the change (with line numbers):\n"
                + "\n".join(snippet) + note)

    def insert(self, t: Target, insert_line: int, insert_text: str, *, expected_sha256: str | None = None,
               confirm: bool = False) -> str:
        with self.session.locked():
            self._writable(t)
            before = self._bytes(t)
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
            _atomic_write(t.full, data)
            note = self._commit("insert", [t.rel], data_of={t.rel: data})
        return f"The file {t.shown} has been edited." + note

    def delete(self, t: Target, *, expected_sha256: str | None = None, confirm: bool = False) -> str:
        with self.session.locked():
            self._writable(t)
            if not t.rel:
                raise Refused(f"Cannot delete the {self._root_shown()} directory itself")
            link = t.full.is_symlink()  # the link goes, never what it points at
            if link or t.full.is_file():
                files = [t.rel]
            elif t.full.is_dir():
                files = self._files_under(t)
            else:
                raise Refused(f"The path {t.shown} does not exist")
            olds = {f: self._old(f) for f in files}
            if not link and t.full.is_file():
                self._precondition(t, olds[t.rel], expected_sha256)
            changes = [guard.FileChange(f, olds[f], None, self.session.created_here(f)) for f in files]
            self._policies(changes, t)
            self._guarded(changes, t, confirm, op="delete", key_extra="")
            if not link and t.full.is_dir():
                shutil.rmtree(t.full)
            else:
                t.full.unlink()
            for f in files:
                self.seen.pop(f, None)
            note = self._commit("delete", files or [t.rel], data_of={})
        return f"Successfully deleted {t.shown}" + note

    def rename(self, old: Target, new: Target, *, expected_sha256: str | None = None) -> str:
        with self.session.locked():
            self._writable(old)
            self._writable(new)
            if not old.rel:
                raise Refused(f"Cannot rename the {self._root_shown()} directory itself")
            if new.full.exists() or new.full.is_symlink():
                raise Refused(f"The destination {new.shown} already exists")
            if not (old.full.exists() or old.full.is_symlink()):
                raise Refused(f"The path {old.shown} does not exist")
            if new.rel == old.rel or new.rel.startswith(old.rel + "/"):
                raise Refused(f"Cannot move {old.shown} into itself")
            link = old.full.is_symlink()  # the link moves, never what it points at
            files = self._files_under(old) if not link and old.full.is_dir() else [old.rel]
            moved = {f: new.rel + f[len(old.rel):] for f in files}
            olds = {f: self._old(f) for f in files}
            if not link and old.full.is_file():
                self._precondition(old, olds[old.rel], expected_sha256)
            changes = [guard.FileChange(f, olds[f], None) for f in files]
            changes += [guard.FileChange(moved[f], None, olds[f]) for f in files]
            self._policies(changes, old)
            private.make_dirs(new.full.parent)
            os.rename(old.full, new.full)
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

    def _old(self, rel: str) -> bytes | None:
        path = self.session.root / rel
        try:
            if path.is_symlink():
                return os.fsencode(os.readlink(path))
            return path.read_bytes() if path.is_file() else None
        except OSError:
            return None

    def _files_under(self, t: Target) -> list[str]:
        found = []
        for dirpath, dirnames, filenames in os.walk(t.full):
            links = [d for d in dirnames if (Path(dirpath) / d).is_symlink()]  # removed as links, not walked
            dirnames[:] = [d for d in dirnames if d != ".git" and d not in links]
            for name in [*filenames, *links]:
                found.append((Path(dirpath) / name).relative_to(self.session.root.resolve()).as_posix())
        return sorted(found)

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
        self._guarded([change], t, confirm, op=op, key_extra=sha256(new))

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
        rules = guard.parse_protect(raw) if raw else []
        violations = guard.policy_violations(changes, rules) if rules else []
        if violations:
            v = violations[0]
            raise Refused(f"Refused by this memory's protect policy: {v.path} is {v.reason} (rule "
                          f"`{v.rule.pattern}`); nothing was written."
                          + (" Append to the end of the file instead (insert at the last line)."
                             if v.rule.mode == "append-only" and any(c.new for c in changes) else ""))

    def _guarded(self, changes: list[guard.FileChange], t: Target, confirm: bool, *, op: str,
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


def _numbered(lines: list[str], start: int, budget: int, shown: str) -> str:
    """Lines with their numbers, as many as fit in `budget` characters; past it, a last line says
    which view_range shows the rest (a line longer than the budget is shown cut)."""
    out: list[str] = []
    used = 0
    for i, line in enumerate(lines):
        entry = f"{str(i + start).rjust(LINE_NUMBER_WIDTH)}\t{line}"
        if used + len(entry) + 1 > budget - 200:
            if not out:  # one line longer than a whole result
                out.append(entry[: budget - 200])
                return "\n".join(out) + (f"\n… line {start} of {shown} is {len(line):,} characters long, shown "
                                          "cut; edit it with str_replace on a part you can see")
            last = start + i - 1
            total = start + len(lines) - 1
            following = f"[{last + 1}, {min(total, last + i)}]"
            return "\n".join(out) + (f"\n… cut at {budget:,} characters: this shows lines {start}-{last} of "
                                      f"{start}-{total}. View the rest with view_range {following} (and so on)")
        out.append(entry)
        used += len(entry) + 1
    return "\n".join(out)


def _atomic_write(path: Path, data: bytes) -> None:
    """Replace a file's content; an existing file keeps its mode, a new one is 0600."""
    atomic_write(path, data, keep_mode=True)


def _size(n: int) -> str:
    if n == 0:
        return "0B"
    i = min((n.bit_length() - 1) // 10, 3)
    size = n / 1024**i
    unit = "BKMG"[i]
    return f"{int(size)}{unit}" if size == int(size) else f"{size:.1f}{unit}"


__all__ = ["MAX_RESULT_CHARS", "MemoryFiles", "Refused", "Target", "bound", "failure_text", "sha256"]
