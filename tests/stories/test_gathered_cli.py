"""Gathered conflict files end to end, through the CLI on real hubs: repeated conflicts leave
one `summary.conflicts.md`; status (text and --json) and log say what to fold and how;
`memsync restore PATH --conflict ID` brings a losing version back byte for byte (text holding
fences, binary content, and from a shallow clone that lacks the version)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from memsync.checks import gathered
from tests.conftest import Cli, git, hub_tree, write

FENCED = b"# Summary\n\n```python\nprint('x')\n```\n\n````\nfour\n````\nno newline at the end"


def _conflict(cli: Cli, memory: Path, other: Path, ours: bytes, theirs: bytes) -> None:
    write(other, "summary.md", theirs)
    assert cli("push", cwd=other).code == 0
    write(memory, "summary.md", ours)
    r = cli("push", cwd=memory)
    assert r.code == 0, r.err
    assert "added to summary.conflicts.md" in r.err


def _ids(root: Path, name: str = "summary.conflicts.md") -> list[str]:
    entries = gathered.parse((root / name).read_bytes()).entries.values()
    return [e.id for e in sorted(entries, key=lambda e: (e.time, e.id))]


def test_repeated_conflicts_one_file_status_log_and_restore(memory: Path, tmp_path: Path, cli: Cli) -> None:
    other = tmp_path / "other"
    assert cli("clone", "research", str(other)).code == 0
    losers = [FENCED, b"second loser\n", b"third loser\n"]
    for n, theirs in enumerate(losers):
        _conflict(cli, memory, other, f"ours {n}\n".encode(), theirs)
        assert cli("pull", cwd=other).code == 0
    tree = hub_tree()
    assert sorted(p for p in tree if "conflict" in p) == ["summary.conflicts.md"]
    assert len(_ids(memory)) == 3

    s = cli("status", cwd=memory)
    assert s.code == 0, s.err
    assert "Conflicts: 3 versions from other writers to fold, in 1 file" in s.out
    assert "summary.conflicts.md: 3 versions of summary.md" in s.out
    data = json.loads(cli("status", "--json", cwd=memory).out)
    assert data["conflicts"] == ["summary.conflicts.md"]
    assert data["to_fold"] == [{"file": "summary.conflicts.md", "paths": ["summary.md"], "versions": 3,
                                "how": "fold what is worth keeping into summary.md, then delete summary.conflicts.md"}]
    log = cli("log", cwd=memory)
    assert log.out.count("kept both: summary.conflicts.md (to fold, then delete)") == 3

    entries = gathered.parse((memory / "summary.conflicts.md").read_bytes()).entries.values()
    (fenced,) = [e.id for e in entries if e.inline() == FENCED]
    r = cli("restore", "summary.md", "--conflict", fenced[:10], cwd=memory)  # a prefix is enough
    assert r.code == 0, r.err
    assert (memory / "summary.md").read_bytes() == FENCED
    assert hub_tree()["summary.md"] == FENCED
    assert "as its version" in git("log", "-1", "--format=%s", cwd=memory)

    # folded: the gathered file deleted and pushed; the other clone's pull removes it too
    (memory / "summary.conflicts.md").unlink()
    assert cli("push", cwd=memory).code == 0
    assert cli("pull", cwd=other).code == 0
    assert not (other / "summary.conflicts.md").exists()
    assert "Conflicts: none" in cli("status", cwd=other).out


def test_a_fold_and_a_new_loser_at_once_keep_the_new_loser(memory: Path, tmp_path: Path, cli: Cli) -> None:
    other = tmp_path / "other"
    assert cli("clone", "research", str(other)).code == 0
    _conflict(cli, memory, other, b"ours 1\n", b"lost 1\n")
    assert cli("pull", cwd=other).code == 0
    (memory / "summary.conflicts.md").unlink()  # folded here ...
    write(memory, "summary.md", b"ours 1 + lost 1\n")
    third = tmp_path / "third"
    assert cli("clone", "research", str(third)).code == 0
    _conflict(cli, other, third, b"other 2\n", b"lost 2\n")  # ... while another conflict is gathered
    r = cli("push", cwd=memory)
    assert r.code == 0, r.err
    after = hub_tree()
    got = [e.inline() for e in gathered.parse(after["summary.conflicts.md"]).entries.values()]
    assert b"lost 2\n" in got and b"lost 1\n" not in got


def test_bad_conflict_ids_get_an_error_and_a_hint(memory: Path, tmp_path: Path, cli: Cli) -> None:
    r = cli("restore", "summary.md", "--conflict", "nope", cwd=memory)
    assert r.code == 2 and "summary.md has no versions to fold" in r.err and "hint:" in r.err
    other = tmp_path / "other"
    assert cli("clone", "research", str(other)).code == 0
    _conflict(cli, memory, other, b"a\n", b"b\n")
    r = cli("restore", "summary.md", "--conflict", "ffffffff", cwd=memory)
    assert r.code == 2 and "has no version 'ffffffff'" in r.err and _ids(memory)[0] in r.err
    r = cli("restore", "summary.md", cwd=memory)
    assert r.code == 2 and "--at REV or --conflict ID" in r.err
    assert "Traceback" not in r.err
    assert (memory / "summary.md").read_bytes() == b"a\n"


@pytest.mark.server
def test_a_binary_loser_comes_back_in_a_shallow_clone(daemon_hub: Path, cli: Cli, tmp_path: Path) -> None:
    blob = bytes(range(256)) * 8
    root = tmp_path / "research"
    root.mkdir()
    assert cli("init", cwd=root).code == 0
    write(root, "img.bin", b"\x00base")
    assert cli("push", cwd=root).code == 0
    other = tmp_path / "other"
    assert cli("clone", "research", str(other)).code == 0
    write(other, "img.bin", blob)
    assert cli("push", cwd=other).code == 0
    write(root, "img.bin", b"\x00ours")
    assert cli("push", cwd=root).code == 0
    text = (root / "img.bin.conflicts.md").read_text()
    assert "Not text" in text and blob.hex() not in text
    (entry_id,) = re.findall(r"--conflict ([0-9a-z-]+)`", text)

    sandbox = tmp_path / "sandbox"
    assert cli("clone", "research", str(sandbox)).code == 0
    assert (sandbox / ".git" / "shallow").exists()  # the loser's version is not here
    r = cli("restore", "img.bin", "--conflict", entry_id, cwd=sandbox)
    assert r.code == 0, r.err
    assert (sandbox / "img.bin").read_bytes() == blob


def test_the_contract_tells_the_next_agent_where_and_how_to_fold(tmp_path: Path, cli: Cli) -> None:
    r = cli("contract", cwd=tmp_path)
    assert r.code == 0, r.err
    text = " ".join(r.out.split())
    assert "`summary.md` -> `summary.conflicts.md`" in text
    assert "Fold what matters into the file, then delete the whole `.conflicts.md` file" in text
    assert "NAME.conflict-<run>-<time>.EXT" in text  # old copies still explained


def test_a_forged_entry_reads_only_a_blob_of_this_memory_and_only_for_its_path(memory: Path, cli: Cli) -> None:
    """The gathered file is anyone's to write (an agent, a hub writer): an entry naming a tree or
    commit id, or another path, restores nothing."""
    tree_id = git("rev-parse", "HEAD^{tree}", cwd=memory).strip()
    commit_id = git("rev-parse", "HEAD", cwd=memory).strip()
    runs_blob = git("rev-parse", "HEAD:runs/first.md", cwd=memory).strip()
    forged = gathered.header("summary.md")
    targets = [("summary.md", tree_id), ("summary.md", commit_id), ("runs/first.md", runs_blob)]
    for n, (path, blob) in enumerate(targets):
        forged += (f"<!-- memsync-conflict f{n}-00000000 20261126T010203Z -->\n"
                   f"- path: `{path}`\n- blob: `{blob}`\n- size: 10 bytes\n\n")
    write(memory, "summary.conflicts.md", forged)
    before = (memory / "summary.md").read_bytes()
    for n, code, words in [(0, 7, "is not in this memory's history"), (1, 7, "is not in this memory's history"),
                           (2, 2, "is a version of runs/first.md, not of summary.md")]:
        r = cli("restore", "summary.md", "--conflict", f"f{n}", cwd=memory)
        assert r.code == code and words in r.err and "hint:" in r.err and "Traceback" not in r.err, r.err
    assert (memory / "summary.md").read_bytes() == before
