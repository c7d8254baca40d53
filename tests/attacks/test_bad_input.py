"""The bad-input table (BRIEF rule 4): every row is one bad input, the command it hits, the exit
code and the message memsync must give. Every row is also checked for: no traceback, no
"unexpected" (the bug marker), an `error:` line with a `hint:` when it fails, and nothing lost
(the memory's files are intact on disk and on the hub).

Most rows call the CLI in-process (fast); rows that could block or need a separate process (a
FIFO, dropped capabilities) use a subprocess with a timeout.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pygit2
import pytest

from tests.conftest import Cli, Result, git, hub_path, hub_tree, write
from tests.helpers.figures import Figures, figures

pytestmark = pytest.mark.attack
__all__ = ["figures"]


@dataclass
class Ctx:
    mem: Path  # the pushed memory `research` (summary.md, runs/first.md)
    tmp: Path
    cli: Callable[..., Result]

    def sub(self, *args: str, cwd: Path | None = None, timeout: float = 60,
            preexec: Callable[[], None] | None = None) -> Result:
        proc = subprocess.run([sys.executable, "-m", "memsync", *args], cwd=cwd or self.mem, capture_output=True,
                              text=True, timeout=timeout, preexec_fn=preexec)
        return Result(proc.returncode, proc.stdout, proc.stderr)

    def clone(self, dest: str = "copy") -> Path:
        assert self.cli("clone", "research", str(self.tmp / dest), cwd=self.tmp).code == 0
        return self.tmp / dest


@dataclass(frozen=True)
class Case:
    id: str
    code: int  # the exact exit code
    says: str  # a substring of stderr (the message a user sees)
    act: Callable[[Ctx], Result]  # sets the bad input up, runs the command, checks the outcome


CASES: list[Case] = []


def case(id: str, code: int, says: str) -> Callable[[Callable[[Ctx], Result]], Callable[[Ctx], Result]]:
    def register(act: Callable[[Ctx], Result]) -> Callable[[Ctx], Result]:
        CASES.append(Case(id, code, says, act))
        return act

    return register


def _config(c: Ctx, text: str | bytes) -> None:
    path = c.mem / ".vm0" / "storage.yaml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())


# ---------------------------------------------------------------- config (.vm0/storage.yaml)
@case("config: malformed YAML names file and line", 3, "storage.yaml:2: mapping values are not allowed here")
def _(c: Ctx) -> Result:
    _config(c, "name: research\n  type: memory\n")
    return c.cli("status", cwd=c.mem)


@case("config: storage.yaml is a directory", 3, "storage.yaml is a directory, not a file")
def _(c: Ctx) -> Result:
    (c.mem / ".vm0" / "storage.yaml").unlink()
    (c.mem / ".vm0" / "storage.yaml").mkdir()
    return c.cli("push", cwd=c.mem)


@case("config: unknown key is a warning", 0, "warning: ")
def _(c: Ctx) -> Result:
    _config(c, "name: research\ncolour: blue\n")
    r = c.cli("status", cwd=c.mem)
    assert "unknown key 'colour' ignored" in r.err
    return r


@case("config: bad protect entry", 3, "protect[0]: unknown key 'rule'")
def _(c: Ctx) -> Result:
    _config(c, "name: research\nprotect:\n  - {path: '*.md', rule: bogus}\n")
    return c.cli("push", cwd=c.mem)


@case("config: bad max_file_size", 3, "`max_file_size` 'lots' is not a size")
def _(c: Ctx) -> Result:
    _config(c, "name: research\nmax_file_size: lots\n")
    return c.cli("push", cwd=c.mem)


@case("config: not UTF-8", 3, "storage.yaml is not UTF-8 text")
def _(c: Ctx) -> Result:
    _config(c, b"name: \xff\xfe\n")
    return c.cli("push", cwd=c.mem)


@case("config: empty file", 3, "expected a mapping with at least `name:`")
def _(c: Ctx) -> Result:
    _config(c, "")
    return c.cli("status", cwd=c.mem)


@case("config: bad secrets policy", 3, "`secrets` must be one of warn, block, off")
def _(c: Ctx) -> Result:
    _config(c, "name: research\nsecrets: maybe\n")
    return c.cli("push", cwd=c.mem)


@case("config: remote is not a string", 3, "`remote` must be a string")
def _(c: Ctx) -> Result:
    _config(c, "name: research\nremote: 42\n")
    return c.cli("push", cwd=c.mem)


@case("config: invalid name inside", 3, "invalid memory name 'Research_1'")
def _(c: Ctx) -> Result:
    _config(c, "name: Research_1\n")
    return c.cli("status", cwd=c.mem)


# ---------------------------------------------------------------- names
@case("name: uppercase and underscore, with a suggestion", 2, "hint: try --name bad-name")
def _(c: Ctx) -> Result:
    (c.tmp / "fresh").mkdir()
    r = c.cli("init", "--name", "Bad_Name", cwd=c.tmp / "fresh")
    assert not (c.tmp / "fresh" / ".vm0").exists()
    return r


@case("name: path traversal in clone", 2, "invalid memory name '../etc'")
def _(c: Ctx) -> Result:
    r = c.cli("clone", "../etc", cwd=c.tmp)
    assert not (c.tmp.parent / "etc").exists()
    return r


@case("name: too short", 2, "it has 2 characters; 3 to 64 are allowed")
def _(c: Ctx) -> Result:
    (c.tmp / "ab").mkdir()
    return c.cli("init", cwd=c.tmp / "ab")


@case("name: unknown type", 2, "invalid type 'widget'")
def _(c: Ctx) -> Result:
    (c.tmp / "fresh").mkdir()
    return c.cli("init", "--name", "fresh-mem", "--type", "widget", cwd=c.tmp / "fresh")


@case("name: run id with a path in it", 2, "invalid run id '../x'")
def _(c: Ctx) -> Result:
    r = c.cli("run", "--run-id", "../x", "--", "touch", "ran.md", cwd=c.mem)
    assert not (c.mem / "ran.md").exists()
    return r


# ---------------------------------------------------------------- flags and paths
@case("flag: unknown option", 2, "No such option: --bogus")
def _(c: Ctx) -> Result:
    return c.cli("push", "--bogus", cwd=c.mem)


@case("flag: negative checkpoint", 2, "--checkpoint must be 0 (off) to 86400 seconds")
def _(c: Ctx) -> Result:
    return c.cli("run", "--checkpoint", "-1", "--", "true", cwd=c.mem)


@case("flag: checkpoint not a number", 2, "Invalid value for '--checkpoint'")
def _(c: Ctx) -> Result:
    return c.cli("run", "--checkpoint", "abc", "--", "true", cwd=c.mem)


@case("flag: bad --memory spec", 2, "--memory 'BAD NAME'")
def _(c: Ctx) -> Result:
    return c.cli("run", "--memory", "BAD NAME", "--", "true", cwd=c.tmp)


@case("flag: run without a command", 2, "no command to run")
def _(c: Ctx) -> Result:
    return c.cli("run", cwd=c.mem)


@case("flag: run --as-user with an unknown user (or not as root)", 2, "--as-user no-such-user-x: ")
def _(c: Ctx) -> Result:
    return c.cli("run", "--as-user", "no-such-user-x", "--", "touch", "ran.md", cwd=c.mem)


@case("flag: run --remote with a token in it", 2, "a credential on memsync's command line")
def _(c: Ctx) -> Result:
    return c.cli("run", "--remote", "https://me:tok-Q4wQ4wQ4w@example.invalid/hub.git", "--", "true", cwd=c.mem)


@case("path: clone into a non-empty directory", 2, "already exists and is not empty")
def _(c: Ctx) -> Result:
    write(c.tmp, "busy/keep.md", "mine\n")
    r = c.cli("clone", "research", str(c.tmp / "busy"), cwd=c.tmp)
    assert (c.tmp / "busy" / "keep.md").read_text() == "mine\n"
    return r


@case("path: not a memory directory", 3, "is not a memory directory")
def _(c: Ctx) -> Result:
    (c.tmp / "plain").mkdir()
    return c.cli("status", cwd=c.tmp / "plain")


@case("path: --memory PATH holds another memory", 2, "holds the memory 'research', not 'other-mem'")
def _(c: Ctx) -> Result:
    return c.cli("run", "--memory", f"other-mem:{c.mem}", "--", "true", cwd=c.tmp)


@case("path: restore of a file that never existed", 2, "does not exist at version")
def _(c: Ctx) -> Result:
    return c.cli("restore", "nothere.md", "--at", "HEAD", cwd=c.mem)


@case("path: unknown revision", 2, "unknown version 'nosuchrev'")
def _(c: Ctx) -> Result:
    return c.cli("diff", "nosuchrev", cwd=c.mem)


# ---------------------------------------------------------------- remotes
@case("remote: unsupported scheme", 2, "unsupported remote scheme 'ftp'")
def _(c: Ctx) -> Result:
    return c.cli("push", "--remote", "ftp://example.com/hub.git", cwd=c.mem)


@case("remote: URL without a host", 2, "remote URL git:// has no host")
def _(c: Ctx) -> Result:
    return c.cli("list", "--remote", "git://", cwd=c.tmp)


@case("remote: path that does not exist", 4, "does not exist")
def _(c: Ctx) -> Result:
    return c.cli("push", "--remote", str(c.tmp / "no-hub.git"), cwd=c.mem)


@case("remote: a directory that is not a repository", 4, "no git repository there")
def _(c: Ctx) -> Result:
    (c.tmp / "not-a-repo" / ".git").mkdir(parents=True)
    return c.cli("list", "--remote", str(c.tmp / "not-a-repo"), cwd=c.tmp)


@case("remote: credential in --remote is refused, never echoed", 2, "error: --remote https://user:***@127.0.0.1:9")
def _(c: Ctx) -> Result:
    r = c.cli("push", "--remote", "https://user:s3cr3t-pw@127.0.0.1:9/x.git", cwd=c.mem)
    assert "s3cr3t-pw" not in r.out + r.err
    (c.tmp / "cred").mkdir()
    init = c.cli("init", "--name", "cred-mem", "--remote", "https://tok3n-value@127.0.0.1:9/x.git",
                 cwd=c.tmp / "cred")
    assert init.code == 2 and "tok3n-value" not in init.out + init.err
    assert not (c.tmp / "cred" / ".vm0").exists() and not (c.tmp / "cred" / ".git").exists()
    return r


# ---------------------------------------------------------------- file contents
@case("file: non-UTF-8 file name", 0, "")
def _(c: Ctx) -> Result:
    name = b"caf\xe9-\xff.md"
    (c.mem / os.fsdecode(name)).write_bytes(b"latin-1 name\n")
    r = c.cli("push", cwd=c.mem)
    names = subprocess.run(["git", "ls-tree", "-z", "--name-only", "memory/research"], cwd=hub_path(),
                           capture_output=True, check=True).stdout
    assert name in names.split(b"\0"), "stored with its exact bytes"
    copy = c.clone()
    assert (copy / os.fsdecode(name)).read_bytes() == b"latin-1 name\n"
    return r


@case("file: nested .git directory in a subfolder", 0, "sub/ (it holds its own .git")
def _(c: Ctx) -> Result:
    write(c.mem, "sub/.git/config", "[core]\n")
    write(c.mem, "sub/notes.md", "inside a nested repository\n")
    write(c.mem, "top.md", "top\n")
    r = c.cli("push", cwd=c.mem)
    tree = hub_tree()
    assert tree["top.md"] == b"top\n" and not any(p.startswith("sub/") for p in tree)
    assert (c.mem / "sub" / "notes.md").exists(), "left on disk, not deleted"
    return r


@case("file: files named like git internals", 0, "")
def _(c: Ctx) -> Result:
    for name in (".gitmodules", "HEAD", "config", "objects/pack/x.md", "refs/heads/main", "hooks/pre-commit"):
        write(c.mem, name, f"just a file called {name}\n")
    r = c.cli("push", cwd=c.mem)
    copy = c.clone()
    for name in (".gitmodules", "HEAD", "config", "objects/pack/x.md", "refs/heads/main", "hooks/pre-commit"):
        assert (copy / name).read_text() == f"just a file called {name}\n"
    assert not (copy / ".git" / "hooks" / "pre-commit").exists()
    return r


@case("file: symlinks pointing outside the memory", 0, "")
def _(c: Ctx) -> Result:
    outside = c.tmp / "outside"
    write(outside, "secret.txt", "outside the memory\n")
    os.symlink(outside / "secret.txt", c.mem / "link-file")
    os.symlink(outside, c.mem / "link-dir")
    r = c.cli("push", cwd=c.mem)
    entries = git("ls-tree", "memory/research", cwd=hub_path())
    assert "120000 blob" in entries and "link-dir" in entries
    assert hub_tree()["link-file"] == str(outside / "secret.txt").encode(), "the link, not its target"
    copy = c.clone()
    assert os.readlink(copy / "link-dir") == str(outside) and os.listdir(outside) == ["secret.txt"]
    return r


@case("file: 1 GiB sparse file over max_file_size", 0, "big.bin (1073741824 bytes, larger than max_file_size")
def _(c: Ctx) -> Result:
    with open(c.mem / "big.bin", "wb") as fh:
        fh.truncate(1 << 30)
    write(c.mem, "small.md", "small\n")
    started = time.monotonic()
    r = c.cli("push", cwd=c.mem)
    assert time.monotonic() - started < 30
    assert "small.md" in hub_tree() and "big.bin" not in hub_tree()
    assert (c.mem / "big.bin").stat().st_size == 1 << 30
    return r


@case("file: a FIFO never blocks (libgit2 does not report it)", 0, "")
def _(c: Ctx) -> Result:
    os.mkfifo(c.mem / "pipe")
    write(c.mem, "next.md", "next\n")
    r = c.sub("push", timeout=30)
    assert "next.md" in hub_tree() and "pipe" not in hub_tree()
    return r


@case("file: path too long for the clone's location", 7, "File name too long")
def _(c: Ctx) -> Result:
    deep = "/".join(["d" * 200] * 18) + "/f.md"  # 3,600 characters: fine here
    write(c.mem, deep, "deep\n")
    assert c.cli("push", cwd=c.mem).code == 0
    parent = c.tmp / ("p" * 250) / ("q" * 250)
    parent.mkdir(parents=True)
    r = c.cli("clone", "research", cwd=parent)  # .../p*250/q*250/research/d*200/...: > PATH_MAX
    assert list(parent.iterdir()) == [], "no half-made clone or staging directory left"
    return r


@case("file: unreadable file (chmod 000) is left out with a warning", 0, "secret.md (cannot read: Permission denied)")
def _(c: Ctx) -> Result:
    write(c.mem, "secret.md", "for root only\n")
    (c.mem / "secret.md").chmod(0)
    write(c.mem, "visible.md", "visible\n")
    libc = ctypes.CDLL(None, use_errno=True)

    def without_root_file_access() -> None:  # root reads any file: drop CAP_DAC_OVERRIDE/READ_SEARCH
        for cap in (1, 2):
            libc.prctl(24, cap, 0, 0, 0)  # PR_CAPBSET_DROP: gone after exec

    r = c.sub("push", preexec=without_root_file_access if os.geteuid() == 0 else None)
    assert "visible.md" in hub_tree() and "secret.md" not in hub_tree()
    assert (c.mem / "secret.md").stat().st_mode & 0o777 == 0, "left as it was"
    return r


@case("file: empty memory", 0, "Memory is empty")
def _(c: Ctx) -> Result:
    (c.tmp / "empty-mem").mkdir()
    assert c.cli("init", cwd=c.tmp / "empty-mem").code == 0
    assert c.cli("push", cwd=c.tmp / "empty-mem").code == 0
    r = c.cli("clone", "empty-mem", str(c.tmp / "empty-copy"), cwd=c.tmp)
    assert {p.name for p in (c.tmp / "empty-copy").iterdir()} == {".git", ".vm0"}
    status = c.cli("status", cwd=c.tmp / "empty-copy")
    assert status.code == 0 and "Files: 0" in status.out
    r.err += "Memory is empty" if "Files: 0" in r.out else ""
    return r


@case("file: thousands of files in one folder", 0, "")
def _(c: Ctx) -> Result:
    for i in range(3000):
        (c.mem / "many").mkdir(exist_ok=True)
        (c.mem / "many" / f"f{i:05d}.md").write_text(f"{i}\n")
    started = time.monotonic()
    r = c.cli("push", cwd=c.mem)
    assert time.monotonic() - started < 60
    names = git("ls-tree", "--name-only", "memory/research:many", cwd=hub_path()).split()
    assert len(names) == 3000
    return r


@case("file: file replaced by a directory between versions", 0, "")
def _(c: Ctx) -> Result:
    copy = c.clone()
    write(c.mem, "thing", "a file\n")
    assert c.cli("push", cwd=c.mem).code == 0
    assert c.cli("pull", cwd=copy).code == 0 and (copy / "thing").is_file()
    (c.mem / "thing").unlink()
    write(c.mem, "thing/inner.md", "now a directory\n")
    r = c.cli("push", cwd=c.mem)
    assert hub_tree()["thing/inner.md"] == b"now a directory\n" and "thing" not in hub_tree()
    pulled = c.cli("pull", cwd=copy)
    assert pulled.code == 0, pulled.err
    assert (copy / "thing" / "inner.md").read_text() == "now a directory\n"
    return r


@case("file: directory replaced by a file between versions", 0, "")
def _(c: Ctx) -> Result:
    copy = c.clone()
    (c.mem / "runs" / "first.md").unlink()
    (c.mem / "runs").rmdir()
    write(c.mem, "runs", "runs is a file now\n")
    r = c.cli("push", cwd=c.mem)
    pulled = c.cli("pull", cwd=copy)
    assert pulled.code == 0, pulled.err
    assert (copy / "runs").read_text() == "runs is a file now\n"
    return r


@case("file: case-only rename", 0, "")
def _(c: Ctx) -> Result:
    copy = c.clone()
    write(c.mem, "Notes.md", "case\n")
    assert c.cli("push", cwd=c.mem).code == 0
    assert c.cli("pull", cwd=copy).code == 0
    (c.mem / "Notes.md").rename(c.mem / "notes.md")
    r = c.cli("push", cwd=c.mem)
    assert "notes.md" in hub_tree() and "Notes.md" not in hub_tree()
    assert c.cli("pull", cwd=copy).code == 0
    assert (copy / "notes.md").read_text() == "case\n" and not (copy / "Notes.md").exists()
    return r


# ---------------------------------------------------------------- the checks every row gets
def _blob_ids() -> dict[str, str]:
    """path -> blob id of the memory on the hub; paths may be any bytes (non-UTF-8 names)."""
    raw = subprocess.run(["git", "ls-tree", "-r", "-z", "memory/research"], cwd=hub_path(),
                         capture_output=True, check=True).stdout
    found = {}
    for entry in filter(None, raw.split(b"\0")):
        meta, path = entry.split(b"\t", 1)
        found[os.fsdecode(path)] = meta.split()[2].decode()
    return found


def test_the_table_has_at_least_30_bad_inputs() -> None:
    assert len(CASES) >= 30
    assert len({c.id for c in CASES}) == len(CASES)


@pytest.mark.parametrize("bad", CASES, ids=[c.id for c in CASES])
def test_bad_input(bad: Case, memory: Path, tmp_path: Path, cli: Cli, figures: Figures) -> None:
    figures.add("bad inputs tried")
    before = _blob_ids()
    result = bad.act(Ctx(memory, tmp_path, cli))
    assert result.code == bad.code, result.err
    assert bad.says in result.err + result.out, result.err
    assert "Traceback" not in result.err and "unexpected" not in result.err, result.err
    if bad.code != 0:
        first = result.err.splitlines()[0]
        assert first.startswith("error: ") and "\nhint: " in result.err, result.err
        assert sum(line.startswith("error: ") for line in result.err.splitlines()) == 1
    # nothing lost: the memory's files are where they were, and the hub still has them
    tree = _blob_ids()
    for path, blob in before.items():
        if not bad.id.startswith("file: directory replaced"):
            assert tree.get(path) == blob, path
    assert str(pygit2.hash((memory / "summary.md").read_bytes())) == before["summary.md"]
    git("fsck", "--strict", cwd=hub_path())
    figures.add("bad inputs handled")


def test_git_internal_names_never_reach_the_repository(memory: Path, cli: Cli) -> None:
    """A `.git` file (not directory) at the top or inside a folder is ignored by git itself and
    never overwrites the memory's own repository."""
    head = (memory / ".git" / "HEAD").read_bytes()
    write(memory, "deeper/.git", "gitdir: /tmp/elsewhere\n")
    assert cli("push", cwd=memory).code == 0
    assert (memory / ".git" / "HEAD").read_bytes() == head
    assert not any(".git" in p.split("/") for p in hub_tree())
    assert pygit2.Repository(str(memory / ".git")).head.shorthand == "memory/research"
