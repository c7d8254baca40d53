"""What each version changed, in numbers, kept once computed for `memsync log`.

A log line needs, per version, how many files changed, the bytes added and removed, and the
conflict copies it made: a walk of the two trees and a size lookup per changed file (most of
`log -n 20`'s work; docs/PERFORMANCE.md). A version's id names its tree and its
parents, so what it changed can never change: the summary is keyed by the commit id alone and
never goes stale, whichever memory or clone asks.

Kept in `$MEMSYNC_HOME/cache/versions.db` (SQLite, from the standard library): outside every
memory, so an agent lent a memory for a run (`run --as-user`) cannot write it, and shared by all
of the operator's memories. Only a cache: a failure to open, read or write it (locked, corrupt,
read-only, full disk) means the summary is computed as without it, and a corrupt file is set
aside and started anew.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

from memsync.util.records import recordclass

if TYPE_CHECKING:
    import sqlite3  # imported where the cache is opened: a log of versions that record their numbers never is

__all__ = ["Summaries", "Summary"]

MAX_COPIES = 64  # a version with more conflict copies than this is not kept (rare; computed each time)
_SCHEMA = "CREATE TABLE IF NOT EXISTS versions (oid TEXT PRIMARY KEY, summary TEXT NOT NULL)"


@recordclass(frozen=True)
class Summary:
    files_changed: int
    bytes_added: int
    bytes_removed: int
    copies: tuple[str, ...]  # conflict copies the version made

    def encode(self) -> str:
        return json.dumps([self.files_changed, self.bytes_added, self.bytes_removed, list(self.copies)])

    @classmethod
    def decode(cls, text: str) -> Summary | None:
        try:
            files, added, removed, copies = json.loads(text)
        except (ValueError, TypeError):
            return None
        if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in (files, added, removed)):
            return None
        if not isinstance(copies, list) or not all(isinstance(c, str) for c in copies):
            return None
        return cls(files, added, removed, tuple(copies))


class Summaries:
    """The cache, opened for one command; what it learns is written once, at close()."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._db: sqlite3.Connection | None = None
        self._new: dict[str, Summary] = {}
        self._tried = False

    def get(self, oid: str) -> Summary | None:
        db = self._connect()
        if db is None:
            return None
        import sqlite3

        try:
            row = db.execute("SELECT summary FROM versions WHERE oid = ?", (oid,)).fetchone()
        except sqlite3.Error:
            self._broken()
            return None
        return None if row is None else Summary.decode(str(row[0]))

    def put(self, oid: str, summary: Summary) -> None:
        if len(summary.copies) <= MAX_COPIES:
            self._new[oid] = summary

    def close(self) -> None:
        db = self._connect() if self._new else self._db
        if db is None:
            return
        import sqlite3

        if self._new:
            try:
                with db:
                    db.executemany("INSERT OR IGNORE INTO versions VALUES (?, ?)",
                                   [(oid, s.encode()) for oid, s in self._new.items()])
            except sqlite3.Error:
                self._broken()
        self._new.clear()
        if self._db is not None:
            with contextlib.suppress(sqlite3.Error):
                self._db.close()
            self._db = None

    def _connect(self) -> sqlite3.Connection | None:
        if self._db is not None or self._tried:
            return self._db
        self._tried = True
        import sqlite3

        try:
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            db = sqlite3.connect(str(self.path), timeout=0.5, isolation_level=None)
        except (OSError, sqlite3.Error):
            return None
        try:
            db.execute("PRAGMA synchronous = OFF")  # a cache: a lost write is recomputed
            db.execute(_SCHEMA)
        except sqlite3.DatabaseError as exc:
            db.close()
            if "malformed" in str(exc) or "not a database" in str(exc):
                self._set_aside()
            return None
        with contextlib.suppress(OSError):
            os.chmod(self.path, 0o600)
        self._db = db
        return db

    def _broken(self) -> None:
        if self._db is not None:
            import sqlite3

            with contextlib.suppress(sqlite3.Error):
                self._db.close()
        self._db = None

    def _set_aside(self) -> None:
        with contextlib.suppress(OSError):
            os.replace(self.path, self.path.with_name(self.path.name + ".corrupt"))
