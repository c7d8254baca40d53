"""init / push / pull / clone / status / list on the embedded hub, through the CLI."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.conftest import Cli, git, hub_path, hub_tree, write
from tests.helpers.gathered import losers


def test_init_creates_a_memory(tmp_path: Path, cli: Cli) -> None:
    root = tmp_path / "notes-dir"
    root.mkdir()
    r = cli("init", cwd=root)
    assert r.code == 0, r.err
    assert "Initialized memory 'notes-dir'" in r.out
    assert (root / ".vm0" / "storage.yaml").read_text() == "name: notes-dir\ntype: memory\n"
    assert (root / ".git").is_dir()
    assert "/.vm0/" in (root / ".git" / "info" / "exclude").read_text()
    assert git("symbolic-ref", "HEAD", cwd=root).strip() == "refs/heads/memory/notes-dir"


def test_the_merge_rule_the_contract_promises_needs_no_file_in_the_tree(tmp_path: Path, cli: Cli) -> None:
    """`memsync contract` says lines appended to log.md merge line by line: memsync's default
    policy, so init writes no .gitattributes the agent could open and rewrite, and two writers
    keep both lines."""
    root = tmp_path / "fresh"
    root.mkdir()
    assert cli("init", cwd=root).code == 0
    assert not (root / ".gitattributes").exists()
    write(root, "log.md", "start\n")
    assert cli("push", cwd=root).code == 0
    assert set(hub_tree("memory/fresh")) == {"log.md"}
    assert cli("clone", "fresh", str(tmp_path / "other"), cwd=tmp_path).code == 0
    write(root, "log.md", "start\nfrom the first writer\n")
    write(tmp_path / "other", "log.md", "start\nfrom the second writer\n")
    assert cli("push", cwd=root).code == 0
    r = cli("push", cwd=tmp_path / "other")
    assert r.code == 0, r.err
    merged = hub_tree("memory/fresh")
    assert set(merged["log.md"].decode().splitlines()) == {"start", "from the first writer", "from the second writer"}
    assert not [name for name in merged if ".conflict" in name]
    # a memory's own .gitattributes is left as it is (init never writes one)
    (root / ".gitattributes").write_text("*.md merge=union\n")
    assert cli("init", cwd=root).code == 0
    assert (root / ".gitattributes").read_text() == "*.md merge=union\n"


def test_init_twice_is_harmless(tmp_path: Path, cli: Cli) -> None:
    root = tmp_path / "twice"
    root.mkdir()
    assert cli("init", cwd=root).code == 0
    before = (root / ".vm0" / "storage.yaml").read_text()
    r = cli("init", cwd=root)
    assert r.code == 0 and "Already a memory" in r.out
    assert (root / ".vm0" / "storage.yaml").read_text() == before
    assert (root / ".git" / "info" / "exclude").read_text().count("/.vm0/") == 1


def test_init_adopts_a_vm0_config(tmp_path: Path, cli: Cli) -> None:
    root = tmp_path / "whatever"
    write(root, ".vm0/storage.yaml", "name: my-agent-memory\ntype: memory\n")
    r = cli("init", cwd=root)
    assert r.code == 0, r.err
    assert "Adopted the existing storage.yaml: memory 'my-agent-memory'" in r.out
    assert "Already a memory" not in r.out
    assert (root / ".vm0" / "storage.yaml").read_text() == "name: my-agent-memory\ntype: memory\n"


def test_push_adopts_a_vm0_config_like_init(tmp_path: Path, cli: Cli) -> None:
    root = tmp_path / "vm0-user"
    write(root, ".vm0/storage.yaml", "name: vm0-notes\ntype: memory\n")
    write(root, "notes.md", "first\n")
    r = cli("push", cwd=root)
    assert r.code == 0, r.err
    assert "Adopted the existing storage.yaml: memory 'vm0-notes'" in r.out and "Version:" in r.out
    assert "/.vm0/" in (root / ".git" / "info" / "exclude").read_text()
    assert hub_tree("memory/vm0-notes") == {"notes.md": b"first\n"}
    again = cli("push", cwd=root)
    assert again.code == 0 and "Adopted" not in again.out


def test_init_name_and_type_options(tmp_path: Path, cli: Cli) -> None:
    r = cli("init", "--name", "out-files", "--type", "artifact", cwd=tmp_path)
    assert r.code == 0, r.err
    assert "type: artifact" in (tmp_path / ".vm0" / "storage.yaml").read_text()
    assert git("symbolic-ref", "HEAD", cwd=tmp_path).strip() == "refs/heads/artifact/out-files"


@pytest.mark.parametrize(
    ("name", "fragment", "suggestion"),
    [
        ("Research", "lowercase", "research"),
        ("..", "characters", None),
        ("a/b", "lowercase", "a-b"),
        ("x" * 65, "65 characters", "x" * 64),
        ("my notes", "lowercase", "my-notes"),
        ("-lead", "starting and ending", "lead"),
    ],
)
def test_init_rejects_bad_names(
    tmp_path: Path, cli: Cli, name: str, fragment: str, suggestion: str | None
) -> None:
    r = cli("init", "--name", name, cwd=tmp_path)
    assert r.code == 2
    assert r.err.startswith("error: invalid memory name")
    assert fragment in r.err
    if suggestion:
        assert f"hint: try --name {suggestion}" in r.err
    assert "Traceback" not in r.err
    assert not (tmp_path / ".vm0").exists()


def test_init_rejects_empty_name(tmp_path: Path, cli: Cli) -> None:
    r = cli("init", "--name", "", cwd=tmp_path)
    assert r.code == 2 and "it is empty" in r.err


def test_init_bad_directory_name_suggests(tmp_path: Path, cli: Cli) -> None:
    root = tmp_path / "My_Notes"
    root.mkdir()
    r = cli("init", cwd=root)
    assert r.code == 2
    assert "hint: try --name my-notes" in r.err


def test_push_all_kinds_of_change(memory: Path, cli: Cli) -> None:
    write(memory, "empty.md", "")
    write(memory, "img/pixel.bin", bytes(range(256)))
    write(memory, "deep/a/b/c/note.md", "nested\n")
    (memory / "runs" / "first.md").rename(memory / "runs" / "renamed.md")
    write(memory, "summary.md", "# Summary\n\nchanged\n")
    r = cli("push", cwd=memory)
    assert r.code == 0, r.err
    assert "Version: " in r.out and "Files: 5" in r.out
    tree = hub_tree()
    assert tree == {
        "summary.md": b"# Summary\n\nchanged\n",
        "runs/renamed.md": b"first run\n",
        "empty.md": b"",
        "img/pixel.bin": bytes(range(256)),
        "deep/a/b/c/note.md": b"nested\n",
    }
    (memory / "empty.md").unlink()
    assert cli("push", cwd=memory).code == 0
    assert "empty.md" not in hub_tree()


def test_push_prints_vm0_style_lines(memory: Path, cli: Cli) -> None:
    r = cli("push", cwd=memory)
    assert r.code == 0
    lines = r.out.splitlines()
    assert lines[0] == "No changes: the remote already has this version"
    assert lines[1].startswith("Version: ") and len(lines[1].split()[1]) == 8
    assert lines[2] == "Files: 2"
    assert lines[3] == "Size: 32 B"


def test_push_force_makes_a_version(memory: Path, cli: Cli) -> None:
    before = git("rev-parse", "memory/research", cwd=hub_path()).strip()
    r = cli("push", "--force", cwd=memory)
    assert r.code == 0
    after = git("rev-parse", "memory/research", cwd=hub_path()).strip()
    assert after != before
    assert git("rev-parse", f"{after}^", cwd=hub_path()).strip() == before  # a child: nothing rewritten


def test_push_merges_when_the_remote_moved_on(memory: Path, tmp_path: Path, cli: Cli) -> None:
    other = tmp_path / "other"
    assert cli("clone", "research", str(other)).code == 0
    write(other, "from-other.md", "other\n")
    assert cli("push", cwd=other).code == 0
    write(memory, "from-mine.md", "mine\n")
    r = cli("push", cwd=memory)
    assert r.code == 0, r.err
    tree = hub_tree()
    assert tree["from-other.md"] == b"other\n" and tree["from-mine.md"] == b"mine\n"
    assert (memory / "from-other.md").read_text() == "other\n"
    parents = git("log", "-1", "--format=%P", "memory/research", cwd=hub_path()).split()
    assert len(parents) == 2


def test_pull_commits_local_changes_first_and_merges(memory: Path, tmp_path: Path, cli: Cli) -> None:
    other = tmp_path / "other"
    assert cli("clone", "research", str(other)).code == 0
    write(other, "summary.md", "# Summary\n\nfirst line\nremote line\n")
    assert cli("push", cwd=other).code == 0
    write(memory, "local.md", "uncommitted local work\n")
    r = cli("pull", cwd=memory)
    assert r.code == 0, r.err
    assert (memory / "local.md").read_text() == "uncommitted local work\n"
    assert "remote line" in (memory / "summary.md").read_text()
    assert git("status", "--porcelain", cwd=memory) == ""
    assert "local.md" in git("show", "--name-only", "HEAD^1", cwd=memory) + git(
        "log", "--name-only", cwd=memory
    )


def test_conflicting_edits_keep_both_sides(memory: Path, tmp_path: Path, cli: Cli) -> None:
    other = tmp_path / "other"
    assert cli("clone", "research", str(other)).code == 0
    write(other, "summary.md", "# Summary\n\nTHEIRS\n")
    assert cli("push", cwd=other).code == 0
    write(memory, "summary.md", "# Summary\n\nOURS\n")
    r = cli("pull", cwd=memory)
    assert r.code == 0, r.err
    assert "conflict in summary.md" in r.err
    assert (memory / "summary.md").read_text() == "# Summary\n\nOURS\n"
    copies = list(memory.glob("summary.conflict*.md"))
    assert [p.name for p in copies] == ["summary.conflicts.md"]
    assert losers({"summary.conflicts.md": copies[0].read_bytes()}, "summary.md") == [b"# Summary\n\nTHEIRS\n"]
    assert cli("push", cwd=memory).code == 0
    assert cli("pull", cwd=other).code == 0
    assert sorted(p.name for p in other.iterdir()) == sorted(p.name for p in memory.iterdir())
    s = cli("status", cwd=memory)
    assert "Conflicts: 1" in s.out and copies[0].name in s.out


def test_modification_beats_deletion(memory: Path, tmp_path: Path, cli: Cli) -> None:
    other = tmp_path / "other"
    assert cli("clone", "research", str(other)).code == 0
    (other / "summary.md").unlink()
    assert cli("push", cwd=other).code == 0
    write(memory, "summary.md", "# Summary\n\nstill needed\n")
    assert cli("push", cwd=memory).code == 0
    assert hub_tree()["summary.md"] == b"# Summary\n\nstill needed\n"


def test_pull_name_outside_a_memory_clones(memory: Path, tmp_path: Path, cli: Cli) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    r = cli("pull", "research", cwd=elsewhere)
    assert r.code == 0, r.err
    assert (elsewhere / "research" / "summary.md").exists()
    assert "name: research" in (elsewhere / "research" / ".vm0" / "storage.yaml").read_text()


def test_clone_unknown_name_lists_existing(memory: Path, tmp_path: Path, cli: Cli) -> None:
    r = cli("clone", "nope-nope", cwd=tmp_path)
    assert r.code == 4
    assert "error: no memory 'nope-nope'" in r.err
    assert "hint: memories there: research" in r.err
    assert not (tmp_path / "nope-nope").exists()
    assert not list(tmp_path.glob(".memsync-clone-*"))


def test_clone_into_non_empty_dir_refuses(memory: Path, tmp_path: Path, cli: Cli) -> None:
    dest = tmp_path / "busy"
    write(dest, "keep.txt", "mine")
    r = cli("clone", "research", str(dest))
    assert r.code == 2 and "not empty" in r.err
    assert (dest / "keep.txt").read_text() == "mine"


def test_status_reports_remote_and_local(memory: Path, cli: Cli) -> None:
    write(memory, "new.md", "x\n")
    r = cli("status", cwd=memory)
    assert r.code == 0, r.err
    assert "Files: 2" in r.out and "Size: 32 B" in r.out
    assert "Local: " in r.out and "0 ahead, 0 behind" in r.out
    assert "added    new.md" in r.out
    j = cli("status", "--json", cwd=memory)
    data = json.loads(j.out)
    assert data["remote_version"]["files"] == 2
    assert data["uncommitted"] == [{"path": "new.md", "kind": "added"}]
    assert data["conflicts"] == []


def test_list_shows_every_memory(memory: Path, tmp_path: Path, cli: Cli) -> None:
    second = tmp_path / "second-mem"
    second.mkdir()
    assert cli("init", cwd=second).code == 0
    write(second, "a.txt", "12345")
    assert cli("push", cwd=second).code == 0
    r = cli("list", cwd=tmp_path)
    assert r.code == 0, r.err
    lines = r.out.splitlines()
    assert lines[0].split() == ["NAME", "TYPE", "SIZE", "FILES", "UPDATED", "LAST-RUN"]
    assert lines[1].split()[:5] == ["research", "memory", "32", "B", "2"]
    assert lines[2].split()[:5] == ["second-mem", "memory", "5", "B", "1"]
    data = json.loads(cli("list", "--json").out)
    assert [m["name"] for m in data["memories"]] == ["research", "second-mem"]


def test_list_on_an_empty_hub_is_friendly(cli: Cli) -> None:
    r = cli("list")
    assert r.code == 0
    assert r.out.startswith("No memories on ")


def test_two_copies_converge(memory: Path, tmp_path: Path, cli: Cli) -> None:
    """The issue's 'done means': change both copies, pull and push in both, same tree."""
    other = tmp_path / "other"
    assert cli("clone", "research", str(other)).code == 0
    write(memory, "a.md", "A\n")
    write(other, "b.md", "B\n")
    write(memory, "summary.md", "mine\n")
    write(other, "summary.md", "theirs\n")
    for root in (memory, other, memory):
        assert cli("pull", cwd=root).code == 0
        assert cli("push", cwd=root).code == 0
    def files(r: Path) -> dict[str, bytes]:
        return {
            p.relative_to(r).as_posix(): p.read_bytes()
            for p in r.rglob("*")
            if p.is_file() and ".git" not in p.parts and ".vm0" not in p.parts
        }
    assert files(memory) == files(other) == hub_tree()
    tree = files(memory)
    assert {tree["summary.md"], *losers(tree, "summary.md")} == {b"mine\n", b"theirs\n"}
    assert sorted(k for k in tree if k.startswith("summary")) == ["summary.conflicts.md", "summary.md"]
    git("fsck", "--strict", cwd=hub_path())


def test_missing_git_identity_uses_a_default(memory: Path, cli: Cli) -> None:
    write(memory, "x.md", "x\n")
    assert cli("push", cwd=memory).code == 0
    author = git("log", "-1", "--format=%an <%ae>", cwd=memory)
    assert "(memsync)" in author and "@" in author


def test_git_identity_is_used_when_set(memory: Path, cli: Cli) -> None:
    git("config", "user.name", "Ada", cwd=memory)
    git("config", "user.email", "ada@example.org", cwd=memory)
    write(memory, "x.md", "x\n")
    assert cli("push", cwd=memory).code == 0
    assert git("log", "-1", "--format=%an <%ae>", cwd=memory).strip() == "Ada <ada@example.org>"


def test_operator_commits_carry_trailers(memory: Path) -> None:
    parsed = git("log", "-1", "--format=%(trailers:key=Memsync-Actor,valueonly)", cwd=memory)
    assert parsed.strip() == "operator"
    body = git("log", "-1", "--format=%B", cwd=memory)
    out = subprocess.run(
        ["git", "interpret-trailers", "--parse"], input=body, capture_output=True, text=True, check=True
    ).stdout
    assert "Memsync-Actor: operator" in out and "Memsync-Host: " in out


def test_clone_of_an_artifact_lands_on_its_branch(tmp_path: Path, cli: Cli) -> None:
    src = tmp_path / "src"
    src.mkdir()
    assert cli("init", "--name", "out-files", "--type", "artifact", cwd=src).code == 0
    write(src, "a.txt", "x\n")
    assert cli("push", cwd=src).code == 0
    assert cli("clone", "out-files", str(tmp_path / "copy")).code == 0
    assert git("symbolic-ref", "HEAD", cwd=tmp_path / "copy").strip() == "refs/heads/artifact/out-files"
    assert git("branch", "--format=%(refname:short)", cwd=tmp_path / "copy").split() == ["artifact/out-files"]
    assert "type: artifact" in (tmp_path / "copy" / ".vm0" / "storage.yaml").read_text()


def test_clone_from_a_local_hub_with_loose_and_packed_objects(tmp_path: Path, cli: Cli) -> None:
    """`git push` leaves small pushes loose in a bare hub; memsync's pushes add packs. A clone
    that linked the packs but not the loose objects had the tip without its history."""
    assert cli("list").code == 0  # creates the embedded hub
    seed = tmp_path / "seed"
    git("init", "-q", "-b", "memory/mixed", str(seed), cwd=tmp_path)
    write(seed, "first.md", "from plain git\n")
    git("add", "-A", cwd=seed)
    git("-c", "user.name=a", "-c", "user.email=a@example.org", "commit", "-qm", "seed", cwd=seed)
    git("push", "-q", str(hub_path()), "memory/mixed", cwd=seed)
    assert list((hub_path() / "objects").glob("[0-9a-f][0-9a-f]/*")), "the seed is stored loose"
    assert cli("clone", "mixed", str(tmp_path / "one"), cwd=tmp_path).code == 0
    write(tmp_path / "one", "second.md", "from memsync\n")
    assert cli("push", cwd=tmp_path / "one").code == 0
    r = cli("clone", "mixed", str(tmp_path / "two"), cwd=tmp_path)
    assert r.code == 0, r.err
    assert (tmp_path / "two" / "first.md").read_text() == "from plain git\n"
    assert (tmp_path / "two" / "second.md").read_text() == "from memsync\n"
    subprocess.run(["git", "fsck", "--strict"], cwd=tmp_path / "two", check=True, capture_output=True)


def test_status_remembers_the_last_run_of_each_version(memory: Path, cli: Cli) -> None:
    """The last run is found by walking the history once per hub version; later statuses of the
    same version read it from .git/memsync-last-run.json, and a new version walks again."""
    r = cli("run", "--run-id", "remembered", "--", "sh", "-c", "echo x > x.md; exit 3", cwd=memory)
    assert r.code == 3, r.err
    first = json.loads(cli("status", "--json", cwd=memory).out)["last_run"]
    assert (first["run_id"], first["exit_code"]) == ("remembered", 3)
    cache = memory / ".git" / "memsync-last-run.json"
    assert json.loads(cache.read_text())["tips"]
    assert json.loads(cli("status", "--json", cwd=memory).out)["last_run"] == first
    write(memory, "operator.md", "an operator's edit, not a run\n")
    assert cli("push", cwd=memory).code == 0
    assert json.loads(cli("status", "--json", cwd=memory).out)["last_run"] == first
    assert len(json.loads(cache.read_text())["tips"]) == 2
    cache.write_text("not json")  # a damaged cache is only walked past
    assert json.loads(cli("status", "--json", cwd=memory).out)["last_run"] == first


def test_a_push_to_another_hub_leaves_what_is_known_of_the_memorys_own(tmp_path: Path, cli: Cli) -> None:
    """`push --remote OTHER` (a mirror, a backup) must not stand in for the memory's own hub: with
    that hub out of reach, status still counts the version only OTHER has as not pushed."""
    own, other = tmp_path / "own.git", tmp_path / "other.git"
    for bare in (own, other):
        git("init", "-q", "--bare", str(bare), cwd=tmp_path)
    root = tmp_path / "research"
    root.mkdir()
    assert cli("init", "--remote", str(own), cwd=root).code == 0
    write(root, "summary.md", "# Summary\n")
    assert cli("push", cwd=root).code == 0
    write(root, "mirror-only.md", "only on the other hub\n")
    r = cli("push", "--remote", f"file://{other}", cwd=root)
    assert r.code == 0, r.err
    assert "mirror-only.md" in hub_tree(hub=other)
    assert "mirror-only.md" not in hub_tree(hub=own)

    own.rename(tmp_path / "away.git")  # the memory's own hub, out of reach
    j = cli("status", "--json", cwd=root)
    data = json.loads(j.out)
    assert data["remote_error"], j.err
    assert (data["ahead"], data["behind"]) == (1, 0)  # the mirror's copy is not the hub's
    assert "mirror-only.md" not in git("ls-tree", "-r", "--name-only", data["remote_version"]["oid"], cwd=root)

    (tmp_path / "away.git").rename(own)
    r = cli("push", cwd=root)
    assert r.code == 0, r.err
    assert "mirror-only.md" in hub_tree(hub=own)
    data = json.loads(cli("status", "--json", cwd=root).out)
    assert (data["ahead"], data["behind"], data["remote_error"]) == (0, 0, None)
    # the memory's own hub spelled another way is still the memory's own hub
    write(root, "again.md", "again\n")
    assert cli("push", "--remote", f"file://{tmp_path}/./own.git", cwd=root).code == 0
    assert git("rev-parse", "refs/remotes/origin/memory/research", cwd=root) == git(
        "rev-parse", "memory/research", cwd=own)
