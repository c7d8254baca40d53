"""Forensics end to end: story 4, the integrity guard and protect policies on real commits, and
log / diff / restore / revert through the CLI on real git and the embedded hub."""

from __future__ import annotations

import hashlib
import json
import re
import sys
from pathlib import Path

import pytest

from memsync.checks import gathered
from tests.conftest import Cli, git, hub_path, hub_tree, memsync_cmd, write
from tests.helpers.gathered import losers

RUN1, RUN2, RUN3 = "story4-run-1", "story4-run-2", "story4-run-3"


def notes(size: int, topic: str) -> bytes:
    """Markdown notes of exactly `size` bytes, every line distinct."""
    lines = [f"# Notes on {topic}\n"]
    n = 0
    while sum(map(len, lines)) < size:
        n += 1
        lines.append(f"- finding {n} about {topic}: state-based merge, causal delivery, tombstones\n")
    data = "".join(lines).encode()[:size - 1] + b"\n"
    assert len(data) == size
    return data


def run(root: Path, run_id: str, code: str, *extra: str) -> tuple[int, str]:
    """One real `memsync run` of a Python snippet in the memory (checkpoints off)."""
    proc = memsync_cmd("run", "--run-id", run_id, "--checkpoint", "0", *extra, "--",
                       sys.executable, "-c", code, cwd=root)
    return proc.returncode, proc.stderr


def trailers(root: Path, rev: str = "HEAD") -> str:
    return git("log", "-1", "--format=%(trailers)", rev, cwd=root)


def head(root: Path) -> str:
    return git("rev-parse", "HEAD", cwd=root).strip()


# -- story 4 (the acceptance test of issue 4) -----------------------------------------------------
@pytest.mark.slow
def test_story4_destructive_overwrite_is_flagged_and_restored(memory: Path, cli: Cli) -> None:
    original, damaged = notes(7285, "CRDTs"), notes(1509, "nothing found")
    write(memory, "../original.bin", original)  # handed to the runs through files outside the memory
    code, _ = run(memory, RUN1, "import shutil; shutil.copy('../original.bin', 'crdts.md')")
    assert code == 0
    before_read = head(memory)
    code, _ = run(memory, RUN2, "print(len(open('crdts.md', 'rb').read()))")
    assert code == 0
    assert git("rev-parse", "HEAD^{tree}", cwd=memory) == git("rev-parse", f"{before_read}^{{tree}}", cwd=memory), \
        "a run that only reads changes no file"
    assert f"Memsync-Run-Id: {RUN2}" in trailers(memory), "but it leaves its record (an empty version)"
    write(memory, "../damaged.bin", damaged)
    code, err = run(memory, RUN3, "import shutil; shutil.copy('../damaged.bin', 'crdts.md')")
    assert code == 0
    assert "integrity flag: shrink crdts.md 7285->1509" in err

    r = cli("log", "crdts.md", cwd=memory)
    assert r.code == 0, r.err
    lines = r.out.splitlines()
    assert len(lines) == 2
    assert RUN3 in lines[0] and "1509 bytes" in lines[0] and "shrink crdts.md 7285->1509" in lines[0]
    assert RUN1 in lines[1] and "7285 bytes" in lines[1]
    assert hashlib.sha256(original).hexdigest() in lines[1]
    assert RUN2 not in r.out
    v1 = lines[1].split()[0]
    assert re.fullmatch(r"[0-9a-f]{8}", v1)

    r = cli("log", "--flagged", cwd=memory)
    assert r.code == 0, r.err
    assert len(r.out.splitlines()) == 1
    assert "shrink crdts.md 7285->1509" in r.out and RUN3 in r.out

    r = cli("restore", "crdts.md", "--at", v1, cwd=memory)
    assert r.code == 0, r.err
    assert (memory / "crdts.md").read_bytes() == original
    assert hashlib.sha256((memory / "crdts.md").read_bytes()).hexdigest() == hashlib.sha256(original).hexdigest()
    assert "Memsync-Actor: operator" in trailers(memory)
    assert re.search(rf"Memsync-Restored-From: {v1}[0-9a-f]{{32}} crdts\.md", trailers(memory))

    r = cli("log", "crdts.md", "--json", cwd=memory)
    versions = json.loads(r.out)["versions"]
    assert [v["file"]["size"] for v in versions] == [7285, 1509, 7285]
    assert versions[0]["actor"] == "operator"
    assert versions[0]["file"]["sha256"] == hashlib.sha256(original).hexdigest() == versions[2]["file"]["sha256"]
    assert [v["run_id"] for v in versions] == [None, RUN3, RUN1]
    r = cli("log", "crdts.md", cwd=memory)
    assert "operator" in r.out.splitlines()[0] and hashlib.sha256(original).hexdigest() in r.out.splitlines()[0]
    flagged = cli("log", "--flagged", cwd=memory).out.splitlines()
    assert len(flagged) == 1 and RUN3 in flagged[0], "the deliberate restore is not flagged itself"

    bad = versions[1]["version"]
    assert git("show", f"{bad}:crdts.md", cwd=memory).encode() == damaged, "history keeps the bad version"
    assert hub_tree()["crdts.md"] == original
    assert git("rev-parse", "memory/research", cwd=hub_path()).strip() == head(memory)


# -- the integrity guard on real commits ------------------------------------------------------------
def test_run_that_deletes_and_rewrites_older_files_is_flagged(memory: Path, cli: Cli) -> None:
    write(memory, "notes.md", notes(900, "sequence CRDTs"))
    assert cli("push", cwd=memory).code == 0
    code, err = run(memory, "wrecker", "import os; os.remove('runs/first.md'); "
                    "open('notes.md', 'w').write('# Notes\\n' + 'fresh start, nothing known yet\\n' * 30)")
    assert code == 0
    assert "integrity flag: delete runs/first.md" in err
    assert "integrity flag: rewrite notes.md" in err
    t = trailers(memory)
    assert "Memsync-Flag: delete runs/first.md" in t and "Memsync-Flag: rewrite notes.md" in t
    r = cli("log", "--flagged", "--json", cwd=memory)
    [entry] = json.loads(r.out)["versions"]
    assert entry["run_id"] == "wrecker" and entry["flags"] == ["rewrite notes.md", "delete runs/first.md"]


def test_run_deleting_its_own_new_file_and_operator_deletes_are_not_flagged(memory: Path, cli: Cli) -> None:
    from memsync.core.attribution import Attribution
    from memsync.core.memory import open_memory
    from memsync.core.snapshot import take

    mem = open_memory(memory)
    base = mem.git.head_oid()
    who = Attribution("run", "Checkpoint 1 of run r", "r")
    write(memory, "scratch.md", notes(4000, "scratch"))
    with mem.locked():
        assert take(mem, who, run_base=base).commit is not None
    (memory / "scratch.md").unlink()
    with mem.locked():
        snap = take(mem, who, run_base=base)
    assert snap.commit is not None and snap.flags == []
    (memory / "runs" / "first.md").unlink()
    r = cli("push", cwd=memory)
    assert r.code == 0 and "integrity flag" not in r.err
    assert "Memsync-Flag" not in trailers(memory)


def test_operator_shrink_is_flagged_on_push(memory: Path, cli: Cli) -> None:
    write(memory, "big.md", notes(5000, "big"))
    assert cli("push", cwd=memory).code == 0
    write(memory, "big.md", notes(2000, "big"))
    r = cli("push", cwd=memory)
    assert r.code == 0
    assert "warning: integrity flag: shrink big.md 5000->2000" in r.err
    assert "Memsync-Flag: shrink big.md 5000->2000" in trailers(memory)


PROTECT = """name: research
type: memory
protect:
  - {path: "runs/**", mode: append-only}
  - {path: "reference/**", mode: read-only}
"""


def _protected(memory: Path, cli: Cli) -> None:
    write(memory, "reference/facts.md", "CRDT = conflict-free replicated data type\n")
    assert cli("push", cwd=memory).code == 0
    write(memory, ".vm0/storage.yaml", PROTECT)


@pytest.mark.slow
def test_append_only_keeps_old_content_and_the_runs_version_beside_it(memory: Path, cli: Cli) -> None:
    _protected(memory, cli)
    code, err = run(memory, "appender", "open('runs/first.md', 'a').write('more\\n'); "
                    "open('runs/new.md', 'w').write('new run\\n')")
    assert code == 0 and "policy" not in err
    assert hub_tree()["runs/first.md"] == b"first run\nmore\n" and hub_tree()["runs/new.md"] == b"new run\n"

    code, err = run(memory, "editor", "open('runs/first.md', 'w').write('rewritten\\n')")
    assert code == 0
    assert "policy: runs/first.md: append-only: existing content was changed" in err
    assert (memory / "runs/first.md").read_bytes() == b"first run\nmore\n"
    tree = hub_tree()
    assert tree["runs/first.md"] == b"first run\nmore\n"
    [copy] = [p for p in tree if p.startswith("runs/first.conflict-editor-")]
    assert tree[copy] == b"rewritten\n" and (memory / copy).read_bytes() == b"rewritten\n"
    assert "Memsync-Policy: runs/first.md: append-only: existing content was changed" in trailers(memory)
    r = cli("log", "--flagged", cwd=memory)
    assert "POLICY runs/first.md" in r.out and "editor" in r.out and copy in r.out


def test_read_only_refuses_change_add_and_delete_without_losing_anything(memory: Path, cli: Cli) -> None:
    _protected(memory, cli)
    write(memory, "reference/facts.md", "vandalised\n")
    write(memory, "reference/extra.md", "added by hand\n")
    r = cli("push", cwd=memory)
    assert r.code == 0, r.err
    assert "policy: reference/extra.md: read-only: file added" in r.err
    assert "policy: reference/facts.md: read-only: file changed" in r.err
    tree = hub_tree()
    assert tree["reference/facts.md"] == b"CRDT = conflict-free replicated data type\n"
    assert "reference/extra.md" not in tree and not (memory / "reference/extra.md").exists()
    kept = {p: v for p, v in tree.items() if ".conflict-operator-" in p}
    assert sorted(kept.values()) == [b"added by hand\n", b"vandalised\n"]
    assert all((memory / p).read_bytes() == v for p, v in kept.items())
    (memory / "reference/facts.md").unlink()
    r = cli("push", cwd=memory)
    assert "policy: reference/facts.md: read-only: file deleted" in r.err
    assert (memory / "reference/facts.md").exists() and "reference/facts.md" in hub_tree()


def test_size_limit_leaves_big_files_out_with_a_warning(memory: Path, cli: Cli) -> None:
    write(memory, ".vm0/storage.yaml", "name: research\ntype: memory\nmax_file_size: 1KiB\n")
    write(memory, "dump.bin", b"\0" * 2000)
    write(memory, "small.md", "fits\n")
    r = cli("push", cwd=memory)
    assert r.code == 0, r.err
    assert "warning: not committed: dump.bin (2000 bytes, larger than max_file_size (1024))" in r.err
    tree = hub_tree()
    assert "small.md" in tree and "dump.bin" not in tree
    assert (memory / "dump.bin").stat().st_size == 2000


# -- log ---------------------------------------------------------------------------------------------
def test_log_lines_json_limit_and_run_filter(memory: Path, cli: Cli) -> None:
    code, _ = run(memory, "adder", "open('runs/adder.md', 'w').write('x' * 100)")
    assert code == 0
    r = cli("log", cwd=memory)
    lines = r.out.splitlines()
    assert len(lines) == 2
    assert re.match(r"^[0-9a-f]{8}  \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ  run adder end +exit 0  1 file  \+100 -0 bytes$",
                    lines[0])
    assert " operator " in lines[1] and "2 files" in lines[1]
    assert cli("log", "-n", "1", cwd=memory).out.splitlines() == lines[:1]
    r = cli("log", "--run", "adder", "--json", cwd=memory)
    data = json.loads(r.out)
    assert set(data) == {"memory", "path", "head", "versions"} and data["memory"] == "research"
    [entry] = data["versions"]
    assert {"version", "oid", "time", "actor", "run_id", "exit_code", "files_changed", "bytes_added",
            "bytes_removed", "flags", "policies", "copies", "merge", "end", "file"} <= set(entry)
    assert entry["oid"] == head(memory) and entry["exit_code"] == 0 and entry["bytes_added"] == 100
    r = cli("log", "--run", "nobody", cwd=memory)  # no such run: said so, exit 2
    assert r.code == 2 and r.out == "" and "no run with the id 'nobody'" in r.err and "hint:" in r.err
    assert cli("log", "summary.md", "--run", "adder", cwd=memory).out.strip() == "No versions of summary.md match"


def test_log_of_a_deleted_file_and_of_a_merge_with_conflict_copies(memory: Path, tmp_path: Path, cli: Cli) -> None:
    other = tmp_path / "other"
    assert cli("clone", "research", str(other), cwd=tmp_path).code == 0
    write(other, "summary.md", "# Summary\n\ntheirs\n")
    assert cli("push", cwd=other).code == 0
    write(memory, "summary.md", "# Summary\n\nours\n")
    (memory / "runs/first.md").unlink()
    assert cli("push", cwd=memory).code == 0
    r = cli("log", "runs/first.md", cwd=memory)
    assert r.out.splitlines()[0].endswith("  deleted") and "bytes" in r.out.splitlines()[1]
    r = cli("log", "--json", "-n", "1", cwd=memory)
    [merge] = json.loads(r.out)["versions"]
    assert merge["merge"] is True and len(merge["copies"]) == 1
    assert merge["copies"] == ["summary.conflicts.md"]
    assert "merge by operator" in cli("log", "-n", "1", cwd=memory).out


# -- diff ----------------------------------------------------------------------------------------------
def test_diff_of_a_run_stat_and_paths(memory: Path, cli: Cli) -> None:
    code, _ = run(memory, "differ", "open('summary.md', 'a').write('second line\\n'); "
                  "open('runs/differ.md', 'w').write('hello\\n')")
    assert code == 0
    write(memory, "summary.md", (memory / "summary.md").read_text() + "operator line\n")
    assert cli("push", cwd=memory).code == 0
    r = cli("diff", "run:differ", cwd=memory)
    assert r.code == 0, r.err
    assert "+second line" in r.out and "+hello" in r.out and "operator line" not in r.out
    assert "diff --git a/runs/differ.md b/runs/differ.md" in r.out
    r = cli("diff", "run:differ", "--stat", cwd=memory)
    assert r.out.splitlines() == [" runs/differ.md |     1 +", " summary.md     |     1 +",
                                  " 2 files changed, 2 insertions(+), 0 deletions(-)"]
    r = cli("diff", "run:differ", "--", "runs", cwd=memory)
    assert "+hello" in r.out and "summary.md" not in r.out
    r = cli("diff", "HEAD~2", "HEAD", "--", "summary.md", cwd=memory)
    assert "+second line" in r.out and "+operator line" in r.out and "runs/" not in r.out
    assert cli("diff", cwd=memory).out == ""
    write(memory, "summary.md", "# Summary\n")
    r = cli("diff", "--stat", cwd=memory)
    assert "summary.md" in r.out and "1 file changed, 0 insertions(+), 4 deletions(-)" in r.out


def test_run_range_excludes_versions_merged_in_between(memory: Path, tmp_path: Path, cli: Cli) -> None:
    """A run whose checkpoint merged someone else's version: run:<id> is only its own change."""
    from memsync.core.attribution import Attribution
    from memsync.core.memory import open_memory
    from memsync.core.snapshot import take
    from memsync.sync.exchange import converge

    other = tmp_path / "other"
    assert cli("clone", "research", str(other), cwd=tmp_path).code == 0
    mem = open_memory(memory)
    who = Attribution("run", "Checkpoint of run mixed", "mixed")
    write(memory, "a.md", "one\n")
    with mem.locked():
        take(mem, who)
    write(other, "b.md", "from elsewhere\n")
    assert cli("push", cwd=other).code == 0
    with mem.locked():
        assert len(converge(mem, who, lambda: None).merges) == 1
    write(memory, "a.md", "one\ntwo\n")
    with mem.locked():
        take(mem, who)
        converge(mem, who, lambda: None)
    r = cli("diff", "run:mixed", "--stat", cwd=memory)
    assert r.out.splitlines()[0].startswith(" a.md ") and "b.md" not in r.out
    r = cli("revert", "run:mixed", cwd=memory)
    assert r.code == 0, r.err
    assert not (memory / "a.md").exists() and (memory / "b.md").read_text() == "from elsewhere\n"
    assert "a.md" not in hub_tree() and "b.md" in hub_tree()


def test_bad_revisions_are_usage_errors(memory: Path, cli: Cli) -> None:
    for args in (["diff", "nosuchrev"], ["diff", "run:nobody"], ["restore", "summary.md", "--at", "HEAD~9"],
                 ["revert", "deadbeef"], ["diff", "HEAD", "HEAD", "HEAD"]):
        r = cli(*args, cwd=memory)
        assert r.code == 2, (args, r.err)
        assert r.err.startswith("error: ") and "\nhint: " in r.err and "Traceback" not in r.err


# -- restore -------------------------------------------------------------------------------------------
def test_restore_refuses_uncommitted_changes_unless_forced(memory: Path, cli: Cli) -> None:
    v1 = head(memory)
    write(memory, "summary.md", "# Summary\n\nsecond\n")
    assert cli("push", cwd=memory).code == 0
    write(memory, "summary.md", "unsaved edit\n")
    r = cli("restore", "summary.md", "--at", v1[:8], cwd=memory)
    assert r.code == 2
    assert "error: not restored: summary.md has uncommitted changes" in r.err and "hint:" in r.err
    assert (memory / "summary.md").read_text() == "unsaved edit\n"
    r = cli("restore", "summary.md", "--at", v1[:8], "--force", cwd=memory)
    assert r.code == 0, r.err
    assert (memory / "summary.md").read_text() == "# Summary\n\nfirst line\n"
    assert git("show", "HEAD~1:summary.md", cwd=memory) == "unsaved edit\n", "the forced-over edit is kept"
    assert hub_tree()["summary.md"] == b"# Summary\n\nfirst line\n"


def test_restore_of_a_deleted_file_and_of_an_unknown_path(memory: Path, cli: Cli) -> None:
    v1 = head(memory)
    (memory / "runs" / "first.md").unlink()
    assert cli("push", cwd=memory).code == 0
    r = cli("restore", "first.md", "--at", v1, cwd=memory / "runs")
    assert r.code == 0, r.err
    assert (memory / "runs/first.md").read_text() == "first run\n"
    assert hub_tree()["runs/first.md"] == b"first run\n"
    assert cli("restore", "first.md", "--at", v1, cwd=memory / "runs").out.startswith("Already as at")
    r = cli("restore", "nope.md", "--at", v1, cwd=memory)
    assert r.code == 2 and f"error: nope.md does not exist at version {v1[:8]}" in r.err


@pytest.mark.slow
def test_restore_keeps_the_commit_when_the_push_fails(memory: Path, tmp_path: Path, cli: Cli) -> None:
    v1 = head(memory)
    write(memory, "summary.md", "changed\n")
    assert cli("push", cwd=memory).code == 0
    r = cli("restore", "summary.md", "--at", v1, "--remote", str(tmp_path / "no-such-hub.git"), cwd=memory)
    assert r.code == 8, r.err
    assert "error: restore committed locally as version" in r.err and "push failed" in r.err
    assert (memory / "summary.md").read_text() == "# Summary\n\nfirst line\n"
    assert "Memsync-Restored-From" in trailers(memory)


# -- revert -------------------------------------------------------------------------------------------
def test_revert_a_run(memory: Path, cli: Cli) -> None:
    code, _ = run(memory, "oops", "import os; open('summary.md', 'a').write('bad idea\\n'); "
                  "open('runs/oops.md', 'w').write('oops\\n')")
    assert code == 0
    bad = head(memory)
    write(memory, "unrelated.md", "keep me\n")
    assert cli("push", cwd=memory).code == 0
    r = cli("revert", "run:oops", cwd=memory)
    assert r.code == 0, r.err
    assert "Reverted run:oops as version" in r.out
    assert (memory / "summary.md").read_text() == "# Summary\n\nfirst line\n"
    assert not (memory / "runs/oops.md").exists() and (memory / "unrelated.md").exists()
    t = trailers(memory)
    assert "Memsync-Actor: operator" in t and "Memsync-Reverted-Run: oops" in t and f"Memsync-Reverted: {bad}" in t
    assert "runs/oops.md" not in hub_tree() and "unrelated.md" in hub_tree()
    assert git("show", f"{bad}:runs/oops.md", cwd=memory) == "oops\n", "history is never rewritten"
    assert cli("revert", "run:oops", cwd=memory).out.startswith("Nothing to revert")


def test_revert_with_a_later_conflicting_edit_keeps_both(memory: Path, cli: Cli) -> None:
    write(memory, "summary.md", "# Summary\n\nline a\nline b\n")
    assert cli("push", cwd=memory).code == 0
    write(memory, "summary.md", "# Summary\n\nline a changed\nline b\n")
    assert cli("push", cwd=memory).code == 0
    target = head(memory)
    write(memory, "summary.md", "# Summary\n\nline a changed again\nline b\n")
    assert cli("push", cwd=memory).code == 0
    r = cli("revert", target[:8], cwd=memory)
    assert r.code == 0, r.err
    assert (memory / "summary.md").read_text() == "# Summary\n\nline a changed again\nline b\n"
    [copy] = [p.name for p in memory.iterdir() if ".conflict" in p.name]
    assert copy == "summary.conflicts.md"  # the reverted content is gathered like any losing version
    (entry,) = gathered.parse((memory / copy).read_bytes()).entries.values()
    assert entry.inline() == b"# Summary\n\nline a\nline b\n" and entry.field("run") == "revert"
    assert f"kept the current content there, the reverted one added to {copy}" in r.err
    assert losers(hub_tree(), "summary.md") == [b"# Summary\n\nline a\nline b\n"]
    assert "kept both: " + copy in cli("log", "-n", "1", cwd=memory).out
    r = cli("restore", "summary.md", "--conflict", entry.id, cwd=memory)
    assert r.code == 0, r.err
    assert (memory / "summary.md").read_text() == "# Summary\n\nline a\nline b\n"


def test_revert_refuses_over_uncommitted_changes(memory: Path, cli: Cli) -> None:
    write(memory, "summary.md", "# Summary\n\nv2\n")
    assert cli("push", cwd=memory).code == 0
    write(memory, "summary.md", "unsaved\n")
    r = cli("revert", "HEAD", cwd=memory)
    assert r.code == 2 and "not reverted: summary.md has uncommitted changes" in r.err
    assert (memory / "summary.md").read_text() == "unsaved\n"


@pytest.mark.parametrize("command", ["log", "diff", "restore", "revert"])
def test_commands_have_help(cli: Cli, command: str) -> None:
    r = cli(command, "--help")
    assert r.code == 0 and "Usage:" in r.out


def test_log_count_must_be_positive(memory: Path, cli: Cli) -> None:
    r = cli("log", "-n", "0", cwd=memory)
    assert r.code == 2 and r.err.startswith("error: -n must be 1 or more")
    assert len(cli("log", "-n", "1", cwd=memory).out.splitlines()) == 1
