"""One memory on a hub crowded with thousands of others (issue 24).

On a hub on this machine memsync reads the memory's one ref and writes a push's objects as one
pack plus a compare-and-swap of that ref (git/localhub.py), instead of libgit2's local transport,
which lists every ref of the hub. Over the network the fetch finds its branch in libgit2's list
without a Python object per ref (transport.advertised). What must hold: the other memories are
untouched, the hub stays fsck-clean, a lost race is refused and retried, and nothing but a
fast-forward is ever written.
"""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from memsync.errors import RemoteError
from memsync.git import localhub
from memsync.git.hub import HubUrl
from memsync.git.repo import GitRepo
from memsync.git.transport import NotFastForward
from tests.conftest import Cli, git, hub_path, write
from tests.helpers.fleet import add_fleet
from tests.helpers.servers import GitDaemon, make_bare_hub

BRANCH = "memory/research"
FLEET = 3000


def crowd(hub: Path, count: int = FLEET) -> dict[str, str]:
    """Fill a hub with `count` other memories; their refs as git sees them."""
    add_fleet(hub, count)
    return dict(line.split()[::-1] for line in git("for-each-ref", "--format=%(objectname) %(refname)",
                                                      "refs/heads/memory/fleet-*", cwd=hub).splitlines())


def fsck(hub: Path) -> None:
    done = subprocess.run(["git", "fsck", "--strict", "--no-dangling"], cwd=hub, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def fast_forwards_only(hub: Path, moves: list[str]) -> None:
    for older, newer in itertools.pairwise(moves):
        ok = subprocess.run(["git", "merge-base", "--is-ancestor", older, newer], cwd=hub, check=False)
        assert ok.returncode == 0, f"the hub went from {older} to {newer}, not a descendant"


def other_writer(hub: Path, tmp_path: Path, rel: str, text: str) -> str:
    """A plain git clone that commits one file and pushes it to the hub; the commit pushed."""
    work = tmp_path / f"writer-{rel.replace('/', '-')}"
    if not work.exists():
        git("clone", "-q", "-b", BRANCH, str(hub), str(work), cwd=tmp_path)
    else:
        git("pull", "-q", "--ff-only", cwd=work)
    write(work, rel, text)
    git("add", "-A", cwd=work)
    git("-c", "user.name=other", "-c", "user.email=o@example.invalid", "commit", "-qm", f"other: {rel}", cwd=work)
    git("push", "-q", "origin", BRANCH, cwd=work)
    return git("rev-parse", "HEAD", cwd=work).strip()


@pytest.fixture
def crowded(memory: Path) -> tuple[Path, dict[str, str]]:
    """The embedded hub holding `research` and 3,000 other memories."""
    return memory, crowd(hub_path())


@pytest.mark.slow
def test_push_pull_status_on_a_crowded_hub(crowded: tuple[Path, dict[str, str]], cli: Cli,
                                           tmp_path: Path) -> None:
    root, fleet = crowded
    hub = hub_path()
    write(root, "deep/er/notes.md", "one\n")
    assert cli("push", cwd=root).code == 0
    theirs = other_writer(hub, tmp_path, "theirs.md", "from elsewhere\n")
    write(root, "summary.md", "# Summary\n\nchanged here\n")
    r = cli("push", cwd=root)
    assert r.code == 0, r.err
    tip = git("rev-parse", BRANCH, cwd=hub).strip()
    assert subprocess.run(["git", "merge-base", "--is-ancestor", theirs, tip], cwd=hub).returncode == 0
    assert (root / "theirs.md").read_text() == "from elsewhere\n"
    assert git("show", f"{BRANCH}:deep/er/notes.md", cwd=hub) == "one\n"
    r = cli("status", cwd=root)
    assert r.code == 0, r.err
    assert tip[:8] in r.out
    after = crowd_refs(hub)
    assert after == fleet, "another memory's branch changed"
    fsck(hub)


def crowd_refs(hub: Path) -> dict[str, str]:
    return dict(line.split()[::-1] for line in git("for-each-ref", "--format=%(objectname) %(refname)",
                                                      "refs/heads/memory/fleet-*", cwd=hub).splitlines())


def test_a_push_writes_only_what_the_hub_lacks(memory: Path, cli: Cli) -> None:
    hub = hub_path()
    for i in range(20):
        write(memory, f"a/b/c/file-{i}.md", f"{i}\n")
    assert cli("push", cwd=memory).code == 0
    packs = set((hub / "objects" / "pack").glob("*.pack"))
    write(memory, "a/b/c/file-3.md", "changed\n")
    assert cli("push", cwd=memory).code == 0
    new = set((hub / "objects" / "pack").glob("*.pack")) - packs
    assert len(new) == 1, new
    listed = git("verify-pack", "-v", str(next(iter(new)).with_suffix(".idx")), cwd=hub)
    kinds = [line.split()[1] for line in listed.splitlines() if len(line.split()) > 2 and len(line.split()[0]) == 40]
    # the commit, the root tree and a/, a/b/, a/b/c/, the one blob: not the 19 others
    assert sorted(kinds) == ["blob", "commit", "tree", "tree", "tree", "tree"], kinds
    fsck(hub)


@pytest.mark.parametrize("with_git", [True, False])
@pytest.mark.slow
def test_a_lost_race_is_refused_and_retried(memory: Path, cli: Cli, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch, with_git: bool) -> None:
    """Another writer (plain git, which takes no memsync lock) moves the branch after memsync
    read the hub's tip and before it moves the ref: the compare-and-swap refuses, memsync fetches,
    merges and pushes again, and the hub only ever fast-forwards."""
    hub = hub_path()
    crowd(hub, 500)
    git("config", "core.logAllRefUpdates", "always", cwd=hub)
    real = localhub.push
    raced: list[str] = []
    if not with_git:  # no git installed: libgit2 moves the ref
        monkeypatch.setattr(shutil, "which", lambda _name: None)

    def racing(*args, **kwargs):  # type: ignore[no-untyped-def]
        """The push as memsync's exchange calls it, once it read the hub's tip: the other writer
        lands first. With git, git moves the ref however few refs the hub has."""
        if not raced:
            raced.append(other_writer(hub, tmp_path, "racer.md", "won the race\n"))
        return real(*args, **kwargs, in_process_packed_refs=-1 if with_git else localhub.IN_PROCESS_PACKED_REFS)

    monkeypatch.setattr(localhub, "push", racing)
    write(memory, "mine.md", "mine\n")
    r = cli("push", cwd=memory)
    assert r.code == 0, r.err
    assert raced
    tip = git("rev-parse", BRANCH, cwd=hub).strip()
    assert subprocess.run(["git", "merge-base", "--is-ancestor", raced[0], tip], cwd=hub).returncode == 0
    assert git("show", f"{BRANCH}:mine.md", cwd=hub) == "mine\n"
    assert git("show", f"{BRANCH}:racer.md", cwd=hub) == "won the race\n"
    fast_forwards_only(hub, git("reflog", "show", "--format=%H", BRANCH, cwd=hub).split()[::-1])
    fsck(hub)


def _repo_with_commits(tmp_path: Path, hub: Path) -> tuple[GitRepo, list[str]]:
    """A clone of the hub's memory with two commits of its own on top."""
    work = tmp_path / "clone"
    git("clone", "-q", "-b", BRANCH, str(hub), str(work), cwd=tmp_path)
    made = []
    for n in range(2):
        write(work, f"n{n}.md", f"{n}\n")
        git("add", "-A", cwd=work)
        git("-c", "user.name=a", "-c", "user.email=a@example.invalid", "commit", "-qm", f"n{n}", cwd=work)
        made.append(git("rev-parse", "HEAD", cwd=work).strip())
    return GitRepo.open(work), made


@pytest.mark.parametrize("with_git", [True, False])
def test_compare_and_swap_refuses_a_stale_expectation(memory: Path, tmp_path: Path, with_git: bool,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    if not with_git:
        monkeypatch.setattr(shutil, "which", lambda _name: None)
    limit = -1 if with_git else localhub.IN_PROCESS_PACKED_REFS  # -1: git moves it, however few refs
    hub = hub_path()
    url = HubUrl(str(hub), "file")
    before = git("rev-parse", BRANCH, cwd=hub).strip()
    repo, made = _repo_with_commits(tmp_path, hub)
    moved = other_writer(hub, tmp_path, "x.md", "x\n")
    with pytest.raises(NotFastForward):
        localhub.push(repo, url, made[-1], f"refs/heads/{BRANCH}", before, in_process_packed_refs=limit)
    assert git("rev-parse", BRANCH, cwd=hub).strip() == moved
    with pytest.raises(NotFastForward):  # "no such branch" is an expectation too
        localhub.push(repo, url, made[-1], f"refs/heads/{BRANCH}", None, in_process_packed_refs=limit)
    fsck(hub)


def test_only_a_fast_forward_is_written(memory: Path, tmp_path: Path) -> None:
    hub = hub_path()
    url = HubUrl(str(hub), "file")
    repo, made = _repo_with_commits(tmp_path, hub)
    assert localhub.push(repo, url, made[-1], f"refs/heads/{BRANCH}",
                         git("rev-parse", BRANCH, cwd=hub).strip()) > 0
    with pytest.raises(RemoteError, match="not a fast-forward"):
        localhub.push(repo, url, made[0], f"refs/heads/{BRANCH}", made[-1])
    assert git("rev-parse", BRANCH, cwd=hub).strip() == made[-1]
    assert localhub.branch_tip(url, f"refs/heads/{BRANCH}") == made[-1]
    assert localhub.branch_tip(url, "refs/heads/memory/absent") is None
    fsck(hub)


def test_a_new_memory_on_a_crowded_hub(memory: Path, cli: Cli, tmp_path: Path) -> None:
    hub = hub_path()
    crowd(hub, 1000)
    root = tmp_path / "newcomer"
    root.mkdir()
    assert cli("init", cwd=root).code == 0
    write(root, "a.md", "a\n")
    r = cli("push", cwd=root)
    assert r.code == 0, r.err
    assert git("show", "memory/newcomer:a.md", cwd=hub) == "a\n"
    dest = tmp_path / "copy"
    r = cli("clone", "newcomer", str(dest))
    assert r.code == 0, r.err
    assert (dest / "a.md").read_text() == "a\n"
    fsck(hub)


@pytest.mark.server
def test_network_hub_with_thousands_of_refs(git_daemon: GitDaemon, cli: Cli, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    hub = make_bare_hub(git_daemon.base_path / "fleet.git")
    crowd(hub)
    monkeypatch.setenv("MEMSYNC_REMOTE", git_daemon.url("fleet.git"))
    root = tmp_path / "research"
    root.mkdir()
    assert cli("init", cwd=root).code == 0
    write(root, "a.md", "a\n")
    assert cli("push", cwd=root).code == 0
    theirs = other_writer(hub, tmp_path, "b.md", "b\n")
    r = cli("pull", cwd=root)
    assert r.code == 0, r.err
    assert (root / "b.md").read_text() == "b\n"
    assert git("rev-parse", "HEAD", cwd=root).strip() == theirs
    r = cli("status", cwd=root)
    assert r.code == 0, r.err
    assert theirs[:8] in r.out
    r = cli("clone", "research", str(tmp_path / "copy"))
    assert r.code == 0, r.err
    assert (tmp_path / "copy" / "b.md").read_text() == "b\n"
    r = cli("clone", "fleet-00012", str(tmp_path / "nothing"))  # not a memory: the near names suggested
    assert r.code != 0 and "fleet-000012" in r.err, r.err
    monkeypatch.setenv("MEMSYNC_MAX_REFS", "100")  # the advertisement's cap still counts every ref:
    other_writer(hub, tmp_path, "c.md", "c\n")  # (a hub with nothing new is asked for the branch alone)
    monkeypatch.setenv("MEMSYNC_V2_FETCH", "0")  # libgit2's fetch receives the whole advertisement
    r = cli("pull", cwd=root)  # a read of the memory's branch warns and goes on
    assert r.code == 0, r.err
    assert next(line for line in r.err.splitlines() if "MEMSYNC_MAX_REFS" in line).startswith("warning: ")
    monkeypatch.delenv("MEMSYNC_V2_FETCH")
    other_writer(hub, tmp_path, "d.md", "d\n")
    r = cli("pull", cwd=root)  # the v2 fetch: no advertisement, nothing to warn about
    assert r.code == 0 and "MEMSYNC_MAX_REFS" not in r.err, r.err
    assert (root / "d.md").read_text() == "d\n"
    r = cli("list")  # a listing is refused
    assert r.code == 4 and "MEMSYNC_MAX_REFS" in r.err, r.err
    fsck(hub)


def _pages(cli: Cli, *args: str) -> list[list[str]]:
    """Every page of `memsync list --json ARGS`, following more_after."""
    import json

    pages: list[list[str]] = []
    after: list[str] = []
    while True:
        r = cli("list", "--json", *args, *after)
        assert r.code == 0, r.err
        got = json.loads(r.out)
        pages.append([m["name"] for m in got["memories"]])
        if got["more_after"] is None:
            return pages
        after = ["--after", got["more_after"]]


@pytest.mark.slow
def test_list_pages_and_prefix_on_a_crowded_hub(crowded: tuple[Path, dict[str, str]], cli: Cli) -> None:
    pages = _pages(cli, "--prefix", "fleet-0012", "--limit", "40")
    assert [len(p) for p in pages] == [40, 40, 20]
    assert [n for page in pages for n in page] == [f"fleet-{i:06d}" for i in range(1200, 1300)]
    r = cli("list", "--prefix", "fleet-00299", "--limit", "4")
    assert r.code == 0, r.err
    assert [line.split()[0] for line in r.out.splitlines()[1:]] == [f"fleet-00299{i}" for i in range(4)]
    assert "memsync list --prefix fleet-00299 --limit 4 --after fleet-002993" in r.err
    r = cli("list", "--prefix", "research")
    assert r.code == 0 and r.out.split()[6] == "research", r.out
    r = cli("list", "--prefix", "nobody-")
    assert r.code == 0 and "match" in r.out


@pytest.mark.parametrize("args", [("--prefix", "Fleet"), ("--prefix", "../x"), ("--limit", "0"),
                                  ("--after", "a b")])
def test_list_refuses_bad_pages(memory: Path, cli: Cli, args: tuple[str, str]) -> None:
    r = cli("list", *args)
    assert r.code == 2, (r.code, r.err)
    assert r.err.startswith("error: ") and "\nhint: " in r.err and "Traceback" not in r.err


@pytest.mark.server
def test_list_pages_over_git_daemon(git_daemon: GitDaemon, cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    hub = make_bare_hub(git_daemon.base_path / "fleet.git")
    crowd(hub)
    monkeypatch.setenv("MEMSYNC_REMOTE", git_daemon.url("fleet.git"))
    pages = _pages(cli, "--prefix", "fleet-0020", "--limit", "30")
    assert [n for page in pages for n in page] == [f"fleet-{i:06d}" for i in range(2000, 2100)]
    cache = next((Path(os.environ["MEMSYNC_HOME"]) / "cache").glob("*.git"))
    cached = git("for-each-ref", "--format=%(refname)", cwd=cache).split()
    assert len(cached) == 100, "the cache fetched more than the prefix names"


@pytest.mark.parametrize("refs", [10, 6000])
@pytest.mark.slow
def test_git_moves_the_ref_only_on_a_hub_with_many(memory: Path, tmp_path: Path, refs: int,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """libgit2 parses the hub's whole packed-refs to move one ref; past IN_PROCESS_PACKED_REFS
    bytes of it, `git update-ref` (a process) is cheaper. The choice never changes the result."""
    import subprocess as real_subprocess

    hub = hub_path()
    crowd(hub, refs)
    url = HubUrl(str(hub), "file")
    before = git("rev-parse", BRANCH, cwd=hub).strip()
    repo, made = _repo_with_commits(tmp_path, hub)
    spawned: list[list[str]] = []
    run = real_subprocess.run

    def recording(argv: list[str], *args: object, **kwargs: object) -> object:
        spawned.append(list(argv))
        return run(argv, *args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr(real_subprocess, "run", recording)
    localhub.push(repo, url, made[-1], f"refs/heads/{BRANCH}", before)
    assert git("rev-parse", BRANCH, cwd=hub).strip() == made[-1]
    big = (hub / "packed-refs").stat().st_size > localhub.IN_PROCESS_PACKED_REFS
    assert big is (refs > 1000)
    assert len([argv for argv in spawned if "update-ref" in argv]) == (1 if big else 0)
    fsck(hub)
