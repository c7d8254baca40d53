"""From one hub to one repository per memory (docs/REMOTES.md, "From one hub to one repository
per memory"): contrib/split-hub on a real branch hub with several memories, an open and a closed
proposal and branches memsync cannot name, run again after a stop, after the hub moved and after
a repository moved on; then memsync against the `{name}` remote sees every memory, history
included, and the hub is never written."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import Cli, git, hub_path, write
from tests.proposals.conftest import propose

pytestmark = pytest.mark.slow

SCRIPT = Path(__file__).resolve().parents[2] / "contrib" / "split-hub"
NAMES = ("alpha", "beta-two", "gamma")
ODD = ("refs/heads/memory/Notes", "refs/heads/memory/team/x", "refs/heads/memory/o'q$x;a")


def split(hub: Path, dest: Path, *opts: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["sh", str(SCRIPT), *opts, str(hub), str(dest)], capture_output=True, text=True,
                          timeout=300)


def refs(repo: Path, name: str | None = None) -> str:
    where = [f"refs/heads/memory/{name}", f"refs/heads/proposals/{name}/", f"refs/memsync/proposals/{name}/"]
    return git("for-each-ref", "--format=%(objectname) %(refname)", *(where if name else []), cwd=repo)


def make_hub(tmp_path: Path, cli: Cli) -> dict[str, Path]:
    """Three memories of two commits each, an open proposal of alpha, a closed one of beta-two,
    and branches under memory/ that are no memory name."""
    roots = {}
    for name in NAMES:
        root = roots[name] = tmp_path / name
        root.mkdir()
        assert cli("init", cwd=root).code == 0
        for n in range(2):
            write(root, f"notes/{n}.md", f"{name} note {n}\n")
            assert cli("push", cwd=root).code == 0, name
    propose(cli, roots["alpha"], "p-open", "open('notes/p.md','w').write('proposed\\n')")
    propose(cli, roots["beta-two"], "p-closed", "open('notes/q.md','w').write('rejected\\n')")
    assert cli("reject", "p-closed", cwd=roots["beta-two"]).code == 0
    tip = git("rev-parse", "memory/gamma", cwd=hub_path()).strip()
    for ref in ODD:
        git("update-ref", ref, tip, cwd=hub_path())
    return roots


def test_split_hub_moves_every_memory_and_memsync_follows(tmp_path: Path, cli: Cli,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    hub = hub_path()
    roots = make_hub(tmp_path, cli)
    assert "refs/heads/proposals/alpha/p-open" in refs(hub, "alpha")
    assert "refs/memsync/proposals/beta-two/p-closed" in refs(hub, "beta-two")
    dest = tmp_path / "memories"
    dest.mkdir()
    git("init", "-q", "--bare", str(dest / ".gamma.git.partial"), cwd=tmp_path)  # a run stopped mid-way
    before = refs(hub)

    done = split(hub, dest, "-j", "2")
    assert done.returncode == 0, done.stderr
    assert sorted(done.stdout.splitlines()[:-1]) == [f"new {n}" for n in NAMES]
    assert "3 memories: 3 new, 0 updated, 0 unchanged, 0 failed; 3 branches skipped" in done.stdout
    for ref in ODD:
        assert f"skipped {ref}:" in done.stderr
    assert sorted(p.name for p in dest.iterdir()) == [f"{n}.git" for n in NAMES]
    assert refs(hub) == before, "split-hub wrote the hub"
    for name in NAMES:
        assert refs(dest / f"{name}.git", name) == refs(hub, name)
        assert git("symbolic-ref", "HEAD", cwd=dest / f"{name}.git").strip() == f"refs/heads/memory/{name}"
        assert git("for-each-ref", "--format=%(refname)", cwd=dest / f"{name}.git").count("\n") == \
            refs(hub, name).count("\n"), "another memory's refs came along"

    write(roots["alpha"], "notes/late.md", "pushed to the old hub after the split\n")
    assert cli("push", cwd=roots["alpha"]).code == 0
    again = split(hub, dest)
    assert again.returncode == 0, again.stderr
    assert "new 0" not in again.stdout and "updated alpha" in again.stdout
    assert "1 updated, 2 unchanged" in again.stdout
    assert refs(dest / "alpha.git", "alpha") == refs(hub, "alpha")
    before = refs(hub)

    template = f"{dest}/{{name}}.git"
    monkeypatch.setenv("MEMSYNC_REMOTE", template)
    for name in NAMES:
        copy = tmp_path / f"copy-{name}"
        r = cli("clone", name, str(copy))
        assert r.code == 0, r.err
        assert git("log", "--format=%H", cwd=copy) == git("log", "--format=%H", f"memory/{name}", cwd=hub)
        assert (copy / "notes" / "1.md").read_text() == f"{name} note 1\n"
    listed = cli("proposals", "--all", "--json", cwd=tmp_path / "copy-beta-two")
    assert listed.code == 0 and '"p-closed"' in listed.out and '"rejected"' in listed.out, listed.out
    review = cli("review", "p-open", cwd=tmp_path / "copy-alpha")
    assert review.code == 0 and "+proposed" in review.out, review.err

    # a checkout made on the hub moves by its storage.yaml; a run takes the template from the environment
    storage = roots["gamma"] / ".vm0" / "storage.yaml"
    storage.write_text(storage.read_text().replace(f"remote: {hub}", f"remote: {template}"))
    assert cli("pull", cwd=roots["gamma"]).code == 0
    ran = cli("run", "--memory", "beta-two:m", "--", sys.executable, "-c",
              "open('m/notes/after.md','w').write('written after the move\\n')", cwd=tmp_path)
    assert ran.code == 0, ran.err
    assert git("show", "memory/beta-two:notes/after.md", cwd=dest / "beta-two.git") == "written after the move\n"
    moved = git("rev-parse", "memory/beta-two", cwd=dest / "beta-two.git").strip()

    last = split(hub, dest)  # beta-two moved on past the hub: reported, never rewound
    assert last.returncode == 1
    assert "differs beta-two" in last.stderr and "2 unchanged, 1 failed" in last.stdout
    assert git("rev-parse", "memory/beta-two", cwd=dest / "beta-two.git").strip() == moved
    assert refs(hub) == before, "split-hub or the moved memories wrote the hub"


def test_split_hub_refuses_bad_input(tmp_path: Path) -> None:
    plain = tmp_path / "work"
    git("init", "-q", str(plain), cwd=tmp_path)
    for args, said in (((str(plain), str(tmp_path / "d")), "not a bare git repository"),
                       ((str(tmp_path / "absent"), str(tmp_path / "d")), "no hub at"),
                       (("-j", "x", str(plain), str(tmp_path / "d")), "-j wants a number")):
        done = subprocess.run(["sh", str(SCRIPT), *args], capture_output=True, text=True, timeout=60)
        assert done.returncode == 2, done
        assert done.stderr.startswith("error: ") and "\nhint: " in done.stderr and said in done.stderr
    hub, dest = tmp_path / "hub.git", tmp_path / "dest"
    git("init", "-q", "--bare", str(hub), cwd=tmp_path)
    (dest / ".split-hub.lock").mkdir(parents=True)
    (dest / ".split-hub.lock" / "pid").write_text(f"{os.getpid()}\n")  # a live holder: refused
    done = split(hub, dest)
    assert done.returncode == 2 and f"another split-hub (pid {os.getpid()})" in done.stderr, done
    (dest / ".split-hub.lock" / "pid").write_text("999999999\n")  # its holder is gone: taken over
    done = split(hub, dest)
    assert done.returncode == 0 and "taking over" in done.stderr, done
    assert not (dest / ".split-hub.lock").exists()


@pytest.mark.attack
def test_branch_names_from_the_hub_never_reach_a_shell_or_a_path(tmp_path: Path) -> None:
    """The hub's ref names are the hub's writers' to choose: split-hub takes only memsync's names
    (a-z, 0-9, '-') as a repository's name; a name that would run a command, climb out of DEST or
    look like an option is skipped and named, nothing else."""
    hub = tmp_path / "hub.git"
    git("init", "-q", "--bare", str(hub), cwd=tmp_path)
    work = tmp_path / "w"
    git("init", "-q", str(work), cwd=tmp_path)
    write(work, "a.md", "a\n")
    git("add", "-A", cwd=work)
    git("-c", "user.name=a", "-c", "user.email=a@example.invalid", "commit", "-qm", "a", cwd=work)
    tip = git("rev-parse", "HEAD", cwd=work).strip()
    git("push", "-q", str(hub), "HEAD:refs/heads/memory/ok-name", cwd=work)
    for name in ("$(touch${IFS}pwned)", "`touch${IFS}pwned2`", "-rf", "x;touch${IFS}pwned3", "z.git"):
        git("update-ref", f"refs/heads/memory/{name}", tip, cwd=hub)
    dest = tmp_path / "out"
    done = subprocess.run(["sh", str(SCRIPT), str(hub), str(dest)], capture_output=True, text=True, timeout=120,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "1 memories: 1 new" in done.stdout and "5 branches skipped" in done.stdout
    assert sorted(p.name for p in dest.iterdir()) == ["ok-name.git"]
    assert not list(tmp_path.rglob("pwned*")), "a ref name ran a command"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["home", "hub.git", "out", "w"]
