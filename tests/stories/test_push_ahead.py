"""A push to a network hub that nothing reached since our last fetch takes one connection.

exchange._push_ahead pushes first, leased on the hub tip we last fetched; any other case (the hub
moved before the push, or between its ref advertisement and the server's update, a refused
credential, commits to refuse) goes through the full fetch-merge-push as before. Every test runs
against a real `git daemon` whose hub does NOT refuse non-fast-forward updates
(make_bare_hub), so a push that overwrote another writer's commit would show here; the hub's
reflog must be a chain of fast-forwards.
"""

from __future__ import annotations

import itertools
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memsync.git import transport
from memsync.git.transport import Callbacks
from tests.conftest import Cli, git, memsync_cmd, write
from tests.helpers.servers import GitDaemon, HttpGitServer, install_reject_hook, make_bare_hub

pytestmark = pytest.mark.server

BRANCH = "memory/research"


@pytest.fixture
def hub(daemon_hub: Path) -> Path:
    return daemon_hub


@pytest.fixture
def pushed(daemon_memory: Path) -> Path:
    return daemon_memory


def services(daemon: GitDaemon, since: int) -> list[str]:
    """The services (upload-pack, receive-pack) asked of the daemon after log line `since`, once
    its log has stopped growing."""
    seen, quiet = -1, time.monotonic()
    while time.monotonic() - quiet < 0.3:
        if len(daemon.log) != seen:
            seen, quiet = len(daemon.log), time.monotonic()
        time.sleep(0.02)
    return [line.split("Request ")[1].split()[0] for line in daemon.log[since:] if "Request " in line]


def head(where: Path, rev: str = "HEAD") -> str:
    return git("rev-parse", rev, cwd=where).strip()


def assert_fast_forwards_only(hub: Path) -> None:
    """Every update the hub's branch ever had went from a commit to one of its descendants."""
    moves = git("reflog", "show", "--format=%H", BRANCH, cwd=hub).split()[::-1]
    assert len(moves) >= 2, moves
    for older, newer in itertools.pairwise(moves):
        ancestor = subprocess.run(["git", "merge-base", "--is-ancestor", older, newer], cwd=hub, check=False)
        assert ancestor.returncode == 0, f"the hub went from {older} to {newer}, not a descendant"


def other_writer(hub_url: str, tmp_path: Path, rel: str, text: str) -> Path:
    """A plain git clone of the memory with one commit ready to push (`git push` it later)."""
    work = tmp_path / "other-writer"
    git("clone", "-q", "-b", BRANCH, hub_url, str(work), cwd=tmp_path)
    write(work, rel, text)
    git("add", "-A", cwd=work)
    git("-c", "user.name=other", "-c", "user.email=o@example.invalid", "commit", "-qm", "other writer", cwd=work)
    return work


def test_push_ahead_of_the_hub_takes_one_connection(pushed: Path, hub: Path, git_daemon: GitDaemon, cli: Cli) -> None:
    write(pushed, "runs/second.md", "second\n")
    since = len(git_daemon.log)
    r = cli("push", cwd=pushed)
    assert r.code == 0, r.err
    assert services(git_daemon, since) == ["receive-pack"]
    assert head(hub, BRANCH) == head(pushed)
    assert git("show", f"{BRANCH}:runs/second.md", cwd=hub) == "second\n"
    status = cli("status", "--json", cwd=pushed)
    assert status.code == 0 and '"ahead": 0' in status.out and '"behind": 0' in status.out, status.out


def test_nothing_to_push_still_fetches(pushed: Path, hub: Path, git_daemon: GitDaemon, cli: Cli,
                                       tmp_path: Path) -> None:
    other = other_writer(git_daemon.url("hub.git"), tmp_path, "runs/other.md", "from elsewhere\n")
    git("push", "-q", "origin", f"HEAD:{BRANCH}", cwd=other)
    since = len(git_daemon.log)
    r = cli("push", cwd=pushed)
    assert r.code == 0, r.err
    # the v2 listing (the hub moved) and the v2 fetch on one connection (git/fetchv2.py)
    assert services(git_daemon, since) == ["upload-pack"]
    assert (pushed / "runs" / "other.md").read_text() == "from elsewhere\n"


def test_hub_moved_since_our_fetch_is_merged_not_overwritten(pushed: Path, hub: Path, git_daemon: GitDaemon,
                                                             cli: Cli, tmp_path: Path) -> None:
    other = other_writer(git_daemon.url("hub.git"), tmp_path, "runs/other.md", "from elsewhere\n")
    git("push", "-q", "origin", f"HEAD:{BRANCH}", cwd=other)
    theirs = head(other)
    write(pushed, "runs/mine.md", "mine\n")
    since = len(git_daemon.log)
    r = cli("push", cwd=pushed)
    assert r.code == 0, r.err
    # the lease is refused on the push's ref advertisement (nothing sent), then fetch, merge, push
    # (the fetch: the v2 listing and fetch on one connection)
    assert services(git_daemon, since) == ["receive-pack", "upload-pack", "receive-pack"]
    tip = head(hub, BRANCH)
    assert tip == head(pushed)
    assert theirs in git("rev-parse", f"{tip}^@", cwd=hub).split()
    assert git("show", f"{BRANCH}:runs/other.md", cwd=hub) == "from elsewhere\n"
    assert git("show", f"{BRANCH}:runs/mine.md", cwd=hub) == "mine\n"
    assert_fast_forwards_only(hub)


def test_hub_moving_between_the_lease_check_and_the_update(pushed: Path, hub: Path, git_daemon: GitDaemon,
                                                          cli: Cli, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Another writer's push lands after our push's ref advertisement was checked, before our
    update reaches the server (the worst moment): the server's update is conditional on the tip
    we saw, so it refuses, and the full exchange merges the other writer's commit in."""
    other = other_writer(git_daemon.url("hub.git"), tmp_path, "runs/other.md", "landed mid-push\n")
    checked = Callbacks.push_negotiation
    raced: list[str] = []

    def race_then_check(self: Callbacks, updates: list) -> None:  # type: ignore[type-arg]
        checked(self, updates)  # the lease holds: the advertisement shows the tip we fetched
        if not raced:
            git("push", "-q", "origin", f"HEAD:{BRANCH}", cwd=other)  # a real concurrent push
            raced.append(head(other))

    monkeypatch.setattr(Callbacks, "push_negotiation", race_then_check)
    write(pushed, "runs/mine.md", "mine\n")
    since = len(git_daemon.log)
    r = cli("push", cwd=pushed)
    assert r.code == 0, r.err
    assert raced, "the push never reached the lease check"
    assert services(git_daemon, since) == ["receive-pack", "receive-pack", "upload-pack", "receive-pack"]
    tip = head(hub, BRANCH)
    assert tip == head(pushed)
    assert raced[0] in git("rev-parse", f"{tip}^@", cwd=hub).split()
    assert git("show", f"{BRANCH}:runs/other.md", cwd=hub) == "landed mid-push\n"
    assert git("show", f"{BRANCH}:runs/mine.md", cwd=hub) == "mine\n"
    assert_fast_forwards_only(hub)


def test_the_lease_refuses_before_anything_is_sent(pushed: Path, hub: Path, cli: Cli) -> None:
    """transport.push with a lease the hub's tip contradicts: NotFastForward, and not one byte
    of the pack was written (libgit2 reports the first chunk it sends)."""
    from memsync.core.memory import open_memory

    before = head(hub, BRANCH)
    write(pushed, "runs/mine.md", "mine\n")
    assert cli("pull", cwd=pushed).code == 0  # commits it, does not push
    mine = head(pushed)
    mem = open_memory(pushed)
    sent: list[int] = []

    def progress(phase: str, done: int, total: int, nbytes: int) -> None:
        if phase == "sending":
            sent.append(nbytes)

    for wrong in ("0" * 39 + "1", None):
        with pytest.raises(transport.NotFastForward):
            transport.push(mem.git, mem.hub.url, mem.local_ref, f"refs/heads/{BRANCH}", progress,
                           lease=transport.Lease(wrong))
    assert sent == [] and head(hub, BRANCH) == before
    transport.push(mem.git, mem.hub.url, mem.local_ref, f"refs/heads/{BRANCH}", progress,
                   lease=transport.Lease(before))
    assert sent and head(hub, BRANCH) == mine


def test_a_refusing_hook_runs_once_and_the_push_stays_local(pushed: Path, hub: Path, cli: Cli, tmp_path: Path) -> None:
    calls = tmp_path / "hook-calls"
    hook = install_reject_hook(hub, "memory/research is protected by policy 42")
    hook.write_text(hook.read_text().replace("cat >/dev/null\n", f"cat >/dev/null\necho x >> {calls}\n"))
    before = head(hub, BRANCH)
    write(pushed, "b.md", "b\n")
    r = cli("push", cwd=pushed)
    assert r.code == 5, (r.code, r.err)
    assert "refused" in r.err and "protected by policy 42" in r.err
    assert calls.read_text() == "x\n"
    assert head(hub, BRANCH) == before
    assert git("show", "HEAD:b.md", cwd=pushed) == "b\n"


def test_first_push_of_a_name_the_hub_already_has_is_refused_as_before(hub: Path, git_daemon: GitDaemon, cli: Cli,
                                                                      tmp_path: Path) -> None:
    """No tracking ref yet (never fetched): the lease is "no such branch". The hub has one, so
    the full exchange runs and refuses to join two unrelated histories, as it always has."""
    first = tmp_path / "first"
    first.mkdir()
    assert cli("init", "--name", "research", cwd=first).code == 0
    write(first, "a.md", "from the first\n")
    assert cli("push", cwd=first).code == 0
    before = head(hub, BRANCH)
    second = tmp_path / "second"
    second.mkdir()
    assert cli("init", "--name", "research", cwd=second).code == 0
    write(second, "b.md", "from the second\n")
    since = len(git_daemon.log)
    r = cli("push", cwd=second)
    assert r.code == 7 and "share no history" in r.err, (r.code, r.err)
    assert services(git_daemon, since) == ["receive-pack", "upload-pack"]
    assert head(hub, BRANCH) == before


def test_commits_memsync_did_not_make_are_refused_as_before(pushed: Path, hub: Path, git_daemon: GitDaemon) -> None:
    """A run's push (`vetted`) with a commit nobody checked on its branch: refused with the
    same error as the full exchange gives, nothing pushed."""
    from memsync.core.attribution import operator
    from memsync.core.memory import open_memory
    from memsync.errors import RepoError
    from memsync.sync.exchange import converge

    before = head(hub, BRANCH)
    write(pushed, "sneaked.md", "not checked\n")
    git("add", "-A", cwd=pushed)
    git("-c", "user.name=agent", "-c", "user.email=a@example.invalid", "commit", "-qm", "mine", cwd=pushed)
    mem = open_memory(pushed)
    since = len(git_daemon.log)
    with mem.locked(), pytest.raises(RepoError, match="memsync did not make"):
        converge(mem, operator("test"), lambda: None, vetted=lambda: [before])
    assert services(git_daemon, since) == ["upload-pack"]  # the full exchange said it
    assert head(hub, BRANCH) == before


def test_run_over_git_daemon_pushes_once(pushed: Path, hub: Path, git_daemon: GitDaemon, tmp_path: Path) -> None:
    agent = tmp_path / "agent.py"
    agent.write_text("import os, pathlib\n"
                     "mem = pathlib.Path(os.environ['MEMSYNC_MEMORY_DIR'])\n"
                     "(mem / 'runs').mkdir(exist_ok=True)\n"
                     "(mem / 'runs' / 'r-ahead.md').write_text('notes\\n')\n")
    since = len(git_daemon.log)
    proc = memsync_cmd("run", "--run-id", "r-ahead", "--", sys.executable, str(agent), cwd=pushed, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert services(git_daemon, since) == ["upload-pack", "receive-pack"]  # the pull before, the push after
    assert git("show", f"{BRANCH}:runs/r-ahead.md", cwd=hub) == "notes\n"
    assert "Memsync-Run-Id: r-ahead" in git("log", "-1", "--format=%B", BRANCH, cwd=hub)


def test_a_refused_credential_fails_as_the_full_exchange_does(http_server: HttpGitServer, cli: Cli, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """A credential refused on the push: the full exchange runs (its fetch may need only read
    access), so the error and what was merged first are what they always were."""
    bare = make_bare_hub(http_server.project_root / "hub.git")
    monkeypatch.setenv("MEMSYNC_REMOTE", http_server.url("hub.git"))
    monkeypatch.setenv("MEMSYNC_USER", http_server.user)
    monkeypatch.setenv("MEMSYNC_TOKEN", http_server.token)
    root = tmp_path / "research"
    root.mkdir()
    assert cli("init", cwd=root).code == 0
    write(root, "a.md", "a\n")
    assert cli("push", cwd=root).code == 0
    before = head(bare, BRANCH)
    monkeypatch.setenv("MEMSYNC_TOKEN", "wrong-token-0123456789")
    write(root, "b.md", "b\n")
    since = len(http_server.requests)
    r = cli("push", cwd=root)
    assert r.code == 4, (r.code, r.err)
    assert "refused the credential from MEMSYNC_TOKEN" in r.err and "wrong-token" not in r.err
    asked = [req.path for req in http_server.requests[since:]]
    assert any("git-receive-pack" in p for p in asked) and any("git-upload-pack" in p for p in asked), asked
    assert head(bare, BRANCH) == before


def test_a_run_push_whose_outgoing_ref_is_swapped_sends_nothing(pushed: Path, hub: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A run pushes the exact commit it checked, through refs/memsync/outgoing. An agent that
    re-points that ref at a commit of its own before the push reads it gets nothing sent: the
    push is refused before any byte goes out, and the hub keeps its tip."""
    from memsync.core.attribution import operator
    from memsync.core.memory import open_memory
    from memsync.errors import RepoError
    from memsync.git.repo import GitRepo
    from memsync.sync.exchange import OUTGOING, converge

    before = head(hub, BRANCH)
    write(pushed, "checked.md", "checked\n")
    mem = open_memory(pushed)
    with mem.locked():
        from memsync.core.snapshot import take

        take(mem, operator("test"))
    mine = head(pushed)
    assert mine != before
    write(pushed, "unchecked.md", "agent's\n")
    git("add", "unchecked.md", cwd=pushed)
    tree = git("write-tree", cwd=pushed).strip()
    planted = git("-c", "user.name=agent", "-c", "user.email=a@example.invalid", "commit-tree", tree, "-p", mine,
                  "-m", "agent", cwd=pushed).strip()
    real = GitRepo.set_ref

    def racing_agent(self: GitRepo, ref: str, oid: str, message: str) -> None:
        real(self, ref, planted if ref == OUTGOING else oid, message)

    monkeypatch.setattr(GitRepo, "set_ref", racing_agent)
    with mem.locked(), pytest.raises(RepoError, match="changed under the push"):
        converge(mem, operator("test"), lambda: None, vetted=lambda: [before, mine])
    assert head(hub, BRANCH) == before
    assert subprocess.run(["git", "cat-file", "-e", planted], cwd=hub).returncode != 0
