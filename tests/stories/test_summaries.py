"""`memsync log`'s kept version summaries (memsync/history/summaries.py): the same log with or without them,
and a cache that cannot be read or written is only ever a slower log."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

from tests.conftest import Cli, git, write


def cache_file() -> Path:
    return Path(os.environ["MEMSYNC_HOME"]) / "cache" / "versions.db"


def history(memory: Path, tmp_path: Path, cli: Cli) -> None:
    """Versions of every kind: added, modified, deleted files, and a merge with a conflict copy."""
    other = tmp_path / "other"
    assert cli("clone", "research", str(other), cwd=tmp_path).code == 0
    write(other, "summary.md", "# Summary\n\ntheirs\n")
    write(other, "notes/new.md", "a new note, quite long " * 20)
    assert cli("push", cwd=other).code == 0
    write(memory, "summary.md", "# Summary\n\nours\n")
    (memory / "runs/first.md").unlink()
    assert cli("push", cwd=memory).code == 0


def test_log_is_the_same_computed_or_kept(memory: Path, tmp_path: Path, cli: Cli) -> None:
    history(memory, tmp_path, cli)
    assert not cache_file().exists()
    first = cli("log", "--json", cwd=memory)
    assert first.code == 0
    with sqlite3.connect(cache_file()) as db:
        kept = dict(db.execute("SELECT oid, summary FROM versions"))
    versions = json.loads(first.out)["versions"]
    # every version shown that recorded no counts of its own (the merge) is kept; the others
    # are read from their messages (tests/unit/history/test_log.py)
    recorded = {oid for oid in (v["oid"] for v in versions)
                if "Memsync-Changes:" in git("log", "-1", "--format=%B", oid, cwd=memory)}
    assert recorded and {v["oid"] for v in versions} - recorded == set(kept)
    assert any(v["copies"] for v in versions) and any(v["bytes_removed"] for v in versions)
    assert cli("log", "--json", cwd=memory).out == first.out  # now read from the cache
    assert cli("log", cwd=memory).out == cli("log", cwd=memory).out
    assert cache_file().stat().st_mode & 0o077 == 0


def test_a_broken_cache_is_only_ever_a_slower_log(memory: Path, tmp_path: Path, cli: Cli) -> None:
    history(memory, tmp_path, cli)
    expected = cli("log", "--json", cwd=memory).out
    cache_file().write_bytes(b"this is not a database" * 100)  # corrupt: set aside, started anew
    assert cli("log", "--json", cwd=memory).out == expected
    assert cache_file().with_name("versions.db.corrupt").exists()
    assert cli("log", "--json", cwd=memory).out == expected
    with sqlite3.connect(cache_file()) as db:  # an entry that does not parse is recomputed
        db.execute("UPDATE versions SET summary = 'garbage'")
    assert cli("log", "--json", cwd=memory).out == expected
    for name in list(cache_file().parent.iterdir()):
        name.unlink()
    cache_file().parent.rmdir()
    cache_file().parent.write_text("in the way")  # the cache cannot be made: no cache
    r = cli("log", "--json", cwd=memory)
    assert (r.code, r.out, r.err) == (0, expected, "")
