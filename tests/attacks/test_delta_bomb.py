"""Memory bounded by the pack, not only by the checkout (docs/SECURITY.md, "A pack that states
more than it holds"): a blob stored as a delta copying a 64 KiB base 16,000 times (a 66 KB pack,
a 1,000 MiB blob) is refused before libgit2 resolves it, on clone, fetch and list."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from memsync.errors import EXIT_REMOTE
from tests.conftest import Cli, git, write
from tests.helpers.figures import Figures, figures
from tests.helpers.packbomb import write_bomb
from tests.helpers.servers import GitDaemon, make_bare_hub

pytestmark = [pytest.mark.attack, pytest.mark.slow]
__all__ = ["figures"]

PEAK_LIMIT_KIB = 100 * 1024


def _peak(args: list[str], cwd: Path) -> tuple[int, int, str]:
    """(exit code, peak RSS in KiB, stderr) of `memsync ARGS` in a process of its own."""
    probe = ("import resource, subprocess, sys\n"
             "r = subprocess.run([sys.executable, '-m', 'memsync', *sys.argv[1:]], capture_output=True, text=True)\n"
             "sys.stderr.write(r.stderr)\n"
             "print(r.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n")
    done = subprocess.run([sys.executable, "-c", probe, *args], capture_output=True, text=True, cwd=cwd,
                          timeout=300, check=True)
    code, peak = done.stdout.split()
    return int(code), int(peak), done.stderr


def test_clone_fetch_and_list_refuse_a_delta_bomb(git_daemon: GitDaemon, tmp_path: Path, cli: Cli,
                                                  figures: Figures, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: `clone` and `list` held 1,035 MB for a minute (libgit2's indexer resolving the
    delta to hash it). Now: exit 4 at once, the process under 100 MB, nothing written. The clone
    and the pull run over protocol v2 (git/fetchv2.py, the pack read as it streams), checked
    before libgit2's indexer takes it, in a thread beside (and, MEMSYNC_PACK_INDEX_THREAD=0, in
    the reading thread); the pull also
    through libgit2 (MEMSYNC_V2_FETCH=0, the pack read as libgit2 writes it)."""
    hub = make_bare_hub(git_daemon.base_path / "hub.git")
    url = git_daemon.url("hub.git")
    seed = tmp_path / "seed"
    seed.mkdir()
    assert cli("init", "--name", "research", "--remote", url, cwd=seed).code == 0
    write(seed, "notes.md", "before the bomb\n")
    assert cli("push", cwd=seed).code == 0
    write_bomb(hub, "refs/heads/memory/bomb")
    tip = git("rev-parse", "memory/research", cwd=hub)
    write_bomb(hub, "refs/heads/memory/research")  # the memory's next version holds one too
    clone = ["clone", "bomb", str(tmp_path / "clone"), "--remote", url]
    for args, v2, beside in ((clone, "1", "1"), (clone, "1", "0"), (["list", "--remote", url], "1", "1"),
                             (["pull"], "1", "1"), (["pull"], "1", "0"), (["pull"], "0", "1")):
        monkeypatch.setenv("MEMSYNC_V2_FETCH", v2)
        monkeypatch.setenv("MEMSYNC_PACK_INDEX_THREAD", beside)  # the v2 fetch's indexer in a thread, or not
        figures.add("security attacks")
        code, peak, said = _peak(args, seed if args == ["pull"] else tmp_path)
        assert code == EXIT_REMOTE, (args, said)
        assert "would make 1,048,576,000 bytes" in said and "a delta" in said, said
        assert peak < PEAK_LIMIT_KIB, f"{args[0]}: peak RSS {peak} KiB"
        figures.add("security attacks refused")
    assert not (tmp_path / "clone").exists()
    assert (seed / "notes.md").read_text() == "before the bomb\n"
    assert git("rev-parse", "HEAD", cwd=seed) == tip, "the pull wrote nothing"


def test_a_pack_is_read_by_headers_only(tmp_path: Path) -> None:
    """The check itself: the bomb's pack is refused; an ordinary pack of a memory passes."""
    from memsync.git.packcheck import DeltaTooLarge, bound, check_pack

    bare = make_bare_hub(tmp_path / "bomb.git")
    write_bomb(bare, "refs/heads/memory/bomb", copies=600)  # 37.5 MiB: over the 32 MiB floor
    (pack,) = (bare / "objects" / "pack").glob("*.pack")
    with pytest.raises(DeltaTooLarge, match="39,321,600 bytes"):
        check_pack(pack, bound())
    check_pack(pack, bound(64 * 1024 * 1024))  # a memory whose max_file_size allows it
    work = tmp_path / "work"
    git("init", "-q", str(work), cwd=tmp_path)
    for i in range(30):
        write(work, f"n{i}.md", "".join(f"line {j} of note {i}\n" for j in range(200)))
        git("add", ".", cwd=work)
        git("-c", "user.name=a", "-c", "user.email=a@b", "commit", "-qm", f"c{i}", cwd=work)
    git("gc", "-q", "--aggressive", cwd=work)
    for ordinary in (work / ".git" / "objects" / "pack").glob("*.pack"):
        check_pack(ordinary, bound())
