"""A redaction is never followed blindly: any hub writer can make one, so a clone follows it by
itself only when it replaces nothing but what memsync's secret scanner recognises (or the operator
trusts this hub's redactions), never deletes what it had, and says what it did or refused in
`status` and `log --flagged`. On the redacting side a pattern that wipes files needs a second
confirmation."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pygit2
import pytest

from tests.conftest import Cli, git, hub_path, hub_tree, write
from tests.helpers.figures import Figures, figures
from tests.stories.test_redact import all_objects

__all__ = ["figures"]

SECRET = "ghp_" + "Zx9" * 12  # a GitHub-token-shaped secret
WIPED = b"[REDACTED by memsync 2026-11-26]\n"


def hub_writer_redacts(clone: Path, rule: Callable[[bytes], bytes | None]) -> str:
    """What any writer of the hub can do (with `memsync redact` in its own clone, or by hand):
    rewrite the memory's history with `rule` and leave a redaction record on top, exactly as
    memsync writes one. The hub's branch is moved to it; its id is returned."""
    from memsync.git import rewrite
    from memsync.git.repo import GitRepo
    from memsync.git.trailers import compose

    repo = pygit2.Repository(str(clone / ".git"))
    engine = GitRepo.open(clone)
    tip = git("rev-parse", "memory/research", cwd=hub_path()).strip()
    done = rewrite.rewrite(engine, tip, rewrite.blob_replacer(engine, rule))
    trailers = [("Memsync-Actor", "operator"), ("Memsync-Redacted", f"pattern:sha256:0 {tip[:8]}..{tip[:8]}"),
                ("Memsync-Redaction-Base", tip)]
    trailers += [("Memsync-Redacted-Blob", f"{o} {n}") for o, n in done.blobs.items()]
    trailers += [("Memsync-Rewritten", f"{o} {n}") for o, n in done.commits.items()]
    sig = pygit2.Signature("someone", "someone@example.com")
    record = str(repo.create_commit(None, sig, sig, compose("Redact", trailers),
                                    repo[done.tip].peel(pygit2.Commit).tree_id, [pygit2.Oid(hex=done.tip)]))
    git("push", "-q", str(hub_path()), f"{record}:refs/writer/redaction", cwd=clone)
    git("update-ref", "refs/heads/memory/research", record, cwd=hub_path())  # a forced push, in effect
    return record


def _ms(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """memsync as its own process, stdin not a terminal."""
    return subprocess.run([sys.executable, "-m", "memsync", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL)


def _backups(where: Path) -> list[str]:
    return git("for-each-ref", "--format=%(refname) %(objectname)", "refs/memsync/redaction-backup",
               cwd=where).splitlines()


@pytest.fixture
def clone_b(cli: Cli, memory: Path, tmp_path: Path) -> Path:
    """A second clone of `research` with a version of its own, committed and not pushed."""
    other = tmp_path / "b"
    assert cli("clone", "research", str(other)).code == 0
    write(other, "mine.md", "unpushed work of clone B\n")
    assert cli("pull", cwd=other).code == 0
    return other


@pytest.mark.stress  # the security suite
def test_a_hub_writer_wiping_the_memory_is_refused_until_the_operator_accepts_it(
        cli: Cli, memory: Path, clone_b: Path, figures: Figures) -> None:
    figures.add("security attacks")
    head = git("rev-parse", "HEAD", cwd=clone_b).strip()
    record = hub_writer_redacts(memory, lambda data: WIPED)
    # a status sees the rewritten hub first: the clone's own versions still count as the hub's,
    # so the push below is refused for the redaction (exit 7), not for "foreign commits" (exit 9)
    assert _ms("status", cwd=clone_b).returncode == 0

    for verb in (["pull"], ["push"], ["run", "--", "sh", "-c", "echo ran > ran.md"]):
        r = _ms(*verb, cwd=clone_b)
        assert r.returncode == 7, (verb, r.stderr)
        lines = r.stderr.splitlines()
        assert lines[-2].startswith("error: the hub's history was rewritten by a redaction that replaces more than "
                                    "secrets: 2 file(s) (")
        assert "not followed, nothing was changed here" in lines[-2]
        assert lines[-1].startswith("hint: review it and accept it with `memsync redact --follow`")
        assert git("rev-parse", "HEAD", cwd=clone_b).strip() == head
        assert (clone_b / "summary.md").read_text() == "# Summary\n\nfirst line\n"
        assert (clone_b / "mine.md").read_text() == "unpushed work of clone B\n"
        assert not (clone_b / "ran.md").exists()
        assert _backups(clone_b) == []

    status = _ms("status", cwd=clone_b)
    assert status.returncode == 0, status.stderr
    assert f"Redaction: refused the hub's {record[:8]} (2 file(s) (" in status.stdout
    assert "`memsync redact --follow` shows and accepts it" in status.stdout
    flagged = _ms("log", "--flagged", cwd=clone_b)
    assert flagged.returncode == 0, flagged.stderr
    assert record[:8] in flagged.stdout and "FLAG redaction refused (not followed): 2 file(s)" in flagged.stdout
    import json

    [entry] = json.loads(_ms("log", "--flagged", "--json", "-n", "1", cwd=clone_b).stdout)["versions"]
    assert entry["oid"] == record and entry["flags"][0].startswith("redaction refused (not followed): ")
    [note] = json.loads(_ms("status", "--json", cwd=clone_b).stdout)["redactions"]
    assert note["state"] == "refused" and note["version"] == record and note["ref"] is None

    asked = _ms("redact", "--follow", cwd=clone_b)  # no terminal, no --yes: nothing happens
    assert asked.returncode == 2 and "needs confirmation" in asked.stderr
    r = _ms("redact", "--follow", "--yes", cwd=clone_b)
    assert r.returncode == 0, r.stderr
    assert "versions rewritten here: 2 (1 of them local only)" in r.stdout
    assert "summary.md  (more than a secret)" in r.stdout and "runs/first.md  (more than a secret)" in r.stdout
    assert (clone_b / "summary.md").read_bytes() == WIPED
    assert (clone_b / "mine.md").read_text() == "unpushed work of clone B\n"  # replayed on the new history
    [backup] = _backups(clone_b)
    ref, kept = backup.split()
    assert kept == head and git("show", f"{ref}:summary.md", cwd=clone_b) == "# Summary\n\nfirst line\n"
    status = _ms("status", cwd=clone_b)
    assert f"Redaction: followed; the history before it is kept as {ref}" in status.stdout
    assert "refused" not in status.stdout
    flagged = _ms("log", "--flagged", cwd=clone_b)
    assert "FLAG redaction of pattern:sha256:0" in flagged.stdout and "refused" not in flagged.stdout
    assert _ms("push", cwd=clone_b).returncode == 0
    assert hub_tree()["mine.md"] == b"unpushed work of clone B\n"
    figures.add("security attacks refused")


@pytest.mark.stress
def test_a_redaction_of_secrets_alone_is_followed_and_nothing_is_deleted(cli: Cli, memory: Path, tmp_path: Path,
                                                                        figures: Figures) -> None:
    figures.add("security attacks")
    write(memory, "keys.md", f"# Keys\n\ndeploy token: {SECRET}\nrotate monthly\n")
    assert cli("push", cwd=memory).code == 0
    other = tmp_path / "b"
    assert cli("clone", "research", str(other)).code == 0
    r = cli("redact", "--secret", "ghp_[A-Za-z0-9]{36}", "--yes", cwd=memory)
    assert r.code == 0, r.err

    r = cli("pull", cwd=other)
    assert r.code == 0, r.err
    # the clone deleted nothing: its history stays under a backup ref until the operator drops it
    assert SECRET.encode() in all_objects(other / ".git")
    [backup] = _backups(other)
    assert "followed it (it replaces only what the secret scanner recognises as secrets)" in r.err
    text = (other / "keys.md").read_text()
    assert text.startswith("# Keys\n\ndeploy token: [REDACTED by memsync ") and text.endswith("]\nrotate monthly\n")
    assert "memsync redact --drop-backups" in r.err and backup.split()[0] in r.err
    assert "Redaction: followed" in cli("status", cwd=other).out
    r = cli("redact", "--secret", "Keys", "--yes", cwd=other)  # a redaction of its own purges, but not those
    assert r.code == 0, r.err
    assert "1 history(ies) kept when following earlier redactions may still hold it" in r.err
    assert SECRET.encode() in all_objects(other / ".git")
    r = cli("redact", "--drop-backups", "--yes", cwd=other)
    assert r.code == 0, r.err
    assert "Dropped 1 kept histories" in r.out
    assert _backups(other) == [] and SECRET.encode() not in all_objects(other / ".git")
    assert "Redaction:" not in cli("status", cwd=other).out
    assert cli("redact", "--drop-backups", "--yes", cwd=other).out == "No kept histories: nothing to drop\n"
    figures.add("security attacks refused")


@pytest.mark.stress
def test_a_secret_with_the_text_around_it_is_not_secrets_only(cli: Cli, memory: Path, clone_b: Path,
                                                              figures: Figures) -> None:
    """The hub writer's pattern starts at a real secret and runs on to the end of the file."""
    figures.add("security attacks")
    write(memory, "keys.md", f"deploy token: {SECRET}\nthe rest of the notes, which matter\n")
    assert cli("push", cwd=memory).code == 0
    assert cli("pull", cwd=clone_b).code == 0
    import re

    hub_writer_redacts(memory, lambda data: re.sub(rb"ghp_[\s\S]*", WIPED.strip(), data) if b"ghp_" in data else None)
    r = cli("pull", cwd=clone_b)
    assert r.code == 7, r.err
    assert "1 file(s) (keys.md)" in r.err
    assert (clone_b / "keys.md").read_text().endswith("which matter\n")
    figures.add("security attacks refused")


def test_trust_redactions_follows_this_hubs_redactions(cli: Cli, memory: Path, clone_b: Path, tmp_path: Path) -> None:
    with (clone_b / ".vm0" / "storage.yaml").open("a") as fh:
        fh.write("trust_redactions: true\n")
    hub_writer_redacts(memory, lambda data: WIPED)
    mirror = tmp_path / "mirror.git"  # another hub with the same rewrite: not the one trusted
    git("clone", "-q", "--mirror", str(hub_path()), str(mirror), cwd=tmp_path)
    r = cli("pull", "--remote", str(mirror), cwd=clone_b)
    assert r.code == 7 and "replaces more than secrets" in r.err
    assert (clone_b / "summary.md").read_text() == "# Summary\n\nfirst line\n"
    r = cli("pull", cwd=clone_b)
    assert r.code == 0, r.err
    assert "followed it (trust_redactions is set in storage.yaml)" in r.err
    assert (clone_b / "summary.md").read_bytes() == WIPED
    assert len(_backups(clone_b)) == 1


def test_trust_redactions_must_be_a_boolean(cli: Cli, memory: Path) -> None:
    with (memory / ".vm0" / "storage.yaml").open("a") as fh:
        fh.write("trust_redactions: sometimes\n")
    r = cli("status", cwd=memory)
    assert r.code == 3
    assert r.err.splitlines()[0].startswith("error: ") and "`trust_redactions` must be true or false" in r.err
    assert r.err.splitlines()[1].startswith("hint: write `trust_redactions: true`")


@pytest.mark.stress
@pytest.mark.parametrize("pattern", [r"[\s\S]+", r"(?s)Summary.*", "x{200}"])
def test_yes_alone_does_not_wipe_a_memory(cli: Cli, memory: Path, pattern: str, figures: Figures) -> None:
    """A pattern that wipes whole files, or more than 10% of one with more than secrets, needs
    --allow-wide."""
    figures.add("security attacks")
    write(memory, "big.md", "a" * 1000 + "x" * 200 + "\n")
    assert cli("push", cwd=memory).code == 0
    tip = git("rev-parse", "memory/research", cwd=hub_path())
    head = git("rev-parse", "HEAD", cwd=memory)
    r = cli("redact", "--secret", pattern, "--yes", cwd=memory)
    assert r.code == 2, r.err
    lines = r.err.splitlines()
    assert lines[0].startswith("error: the pattern wipes whole files or more than 10% of a file (")
    assert lines[0].endswith("nothing was changed") and lines[1].startswith("hint: check the pattern;")
    assert "--allow-wide" in lines[1]
    assert git("rev-parse", "memory/research", cwd=hub_path()) == tip
    assert git("rev-parse", "HEAD", cwd=memory) == head
    r = cli("redact", "--secret", pattern, "--yes", "--allow-wide", cwd=memory)
    assert r.code == 0, r.err
    figures.add("security attacks refused")


def test_a_secret_in_a_short_file_is_not_wide(cli: Cli, memory: Path) -> None:
    write(memory, "notes.md", f"token {SECRET}\n")
    assert cli("push", cwd=memory).code == 0
    r = cli("redact", "--secret", "ghp_[A-Za-z0-9]{36}", "--yes", cwd=memory)
    assert r.code == 0, r.err


@pytest.mark.parametrize(("before", "after", "secrets_only", "wide"), [
    (f"key: {SECRET}\nnotes\n", "key: [REDACTED by memsync 2026-01-01]\nnotes\n", True, False),
    (f"{SECRET}\n", "[REDACTED by memsync 2026-01-01]\n", True, True),
    (f"a {SECRET} b {SECRET}\n", "a [REDACTED by memsync 2026-01-01] b [REDACTED by memsync 2026-01-01]\n",
     True, False),
    (f"key: {SECRET}\nnotes\n", "key: [REDACTED by memsync 2026-01-01]\n", False, True),
    ("just prose\n", "[REDACTED by memsync 2026-01-01]\n", False, True),
    ("just prose\n", "just [REDACTED by memsync 2026-01-01]\n", False, True),
    ("[REDACTED by memsync 2026-01-01] and one more word\n",
     "[REDACTED by memsync 2026-01-01] and one more [REDACTED by memsync 2026-02-01]\n", False, False),
    ("a much longer line of prose, and then one more word\n",
     "a much longer line of prose, and then one more [REDACTED by memsync 2026-01-01]\n", False, False),
])
def test_replaced_spans_and_secrets_only(before: str, after: str, secrets_only: bool, wide: bool) -> None:
    from memsync.checks.redaction_spans import is_wide, only_secrets, replaced

    found = replaced(before.encode(), after.encode())
    assert found is not None
    assert only_secrets(before.encode(), found) is secrets_only
    assert is_wide(before.encode(), found) is wide


def test_not_a_redaction_at_all() -> None:
    from memsync.checks.redaction_spans import replaced

    assert replaced(b"one\n", b"two\n") is None
    assert replaced(b"one\n", b"[REDACTED by memsync 2026-01-01] extra\n") is None


def test_follow_and_drop_backups_bad_input(cli: Cli, memory: Path) -> None:
    head = git("rev-parse", "HEAD", cwd=memory)
    r = cli("redact", "--follow", "--yes", cwd=memory)
    assert r.code == 2
    assert r.err.splitlines() == ["error: no redaction to follow: this memory's history is not rewritten on the hub",
                                  "hint: `memsync status` says whether one was refused"]
    r = cli("redact", "--follow", "--drop-backups", "--yes", cwd=memory)
    assert r.code == 2 and "go one at a time" in r.err and r.err.splitlines()[1].startswith("hint: run them one")
    r = cli("redact", "--follow", "--secret", "x", "--yes", cwd=memory)
    assert r.code == 2 and "go one at a time" in r.err
    assert git("rev-parse", "HEAD", cwd=memory) == head
