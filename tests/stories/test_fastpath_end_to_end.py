"""The hot verbs' own dispatch (cli/fastpath.py) against the typer CLI, end to end: for a matrix of
argument lists of push, pull, status, run and `hooks run`, on a real memory and hub, the state put
back between the two paths, the fast path either declines or prints and exits exactly as typer does
(exit code, stdout and stderr). The arguments each path hands the verbs' bodies, and the two
readings of one declaration: tests/unit/cli/test_fastpath.py."""

from __future__ import annotations

import io
import re
import shutil
import sys
from pathlib import Path

import pytest

from memsync.cli import fastpath
from tests.conftest import Cli, Result, hub_path, write

# -- end to end: the same memory, hub and arguments through both paths --------------------------------
_VOLATILE = [
    (re.compile(r"\d{8}T\d{6,9}Z-[0-9a-f]+"), "RUN-ID"),
    (re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z"), "TIME"),
    (re.compile(r"\b[0-9a-f]{8,40}\b"), "VERSION"),
    (re.compile(r"after \d+\.\ds"), "after Ns"),
]


def _same(text: str) -> str:
    for pattern, word in _VOLATILE:
        text = pattern.sub(word, text)
    return text


class TwoPaths:
    """Runs one argument list through typer and through the fast path, from the same state."""

    def __init__(self, root: Path, cli: Cli, capsys: pytest.CaptureFixture[str],
                 monkeypatch: pytest.MonkeyPatch) -> None:
        self.root, self.cli, self.capsys, self.monkeypatch = root, cli, capsys, monkeypatch
        self.saved = root.parent / "saved"
        shutil.copytree(root, self.saved / "memory", symlinks=True)
        shutil.copytree(hub_path().parent, self.saved / "home", symlinks=True)

    def _restore(self) -> None:
        for live, kept in ((self.root, self.saved / "memory"), (hub_path().parent, self.saved / "home")):
            shutil.rmtree(live)
            shutil.copytree(kept, live, symlinks=True)

    def fast(self, words: list[str]) -> Result | None:
        self.monkeypatch.chdir(self.root)
        self.monkeypatch.setattr(sys, "stdin", io.StringIO("{}"))
        self.capsys.readouterr()
        code = fastpath.dispatch(list(words))
        captured = self.capsys.readouterr()
        return None if code is None else Result(code, captured.out, captured.err)

    def both(self, words: list[str]) -> tuple[Result, Result | None]:
        self._restore()
        self.monkeypatch.setattr(sys, "stdin", io.StringIO("{}"))
        by_typer = self.cli(*words, cwd=self.root)
        self._restore()
        return by_typer, self.fast(words)


@pytest.fixture
def two_paths(memory: Path, cli: Cli, capsys: pytest.CaptureFixture[str],
              monkeypatch: pytest.MonkeyPatch) -> TwoPaths:
    write(memory, "summary.md", "# Summary\n\nfirst line\nan uncommitted edit\n")
    write(memory, "notes/new.md", "a new file\n")
    return TwoPaths(memory, cli, capsys, monkeypatch)


END_TO_END: list[list[str]] = [
    ["push"], ["push", "-f", "-m", "by hand"], ["push", "--message=edited"], ["push", "--bogus"],
    ["push", "-m"], ["push", "stray"],
    ["pull"], ["pull", "--remote", "HUB"], ["pull", "a", "b"], ["pull", "--json"],
    ["clone", "research", "copy", "--remote", "HUB", "--full-history"], ["clone", "Bad_Name"], ["clone", "research"],
    ["clone"],
    ["status"], ["status", "--json"], ["status", "--remote=HUB"], ["status", "--remote", "/nonexistent/hub.git"],
    ["status", "--json", "--json"], ["status", "extra"],
    ["run", "--", "true"], ["run", "--offline", "--no-push", "--checkpoint", "0", "--", "sh", "-c", "exit 3"],
    ["run", "--checkpoint", "abc", "--", "true"], ["run", "--memory", "Bad_Name", "--", "true"],
    ["run", "--run-id", "../bad", "--", "true"], ["run", "--", "/nonexistent/command"],
    ["hooks", "run", "stop"], ["hooks", "run", "stop", "--agent", "nobody", "--memory", "m", "--dir", "."],
    ["hooks", "run", "--help"],
]


@pytest.mark.parametrize("words", END_TO_END, ids=[" ".join(w) for w in END_TO_END])
@pytest.mark.slow
def test_both_paths_print_the_same_and_exit_the_same(two_paths: TwoPaths, words: list[str]) -> None:
    words = [str(hub_path()) if w == "HUB" else w.replace("=HUB", f"={hub_path()}") for w in words]
    by_typer, fast = two_paths.both(words)
    if fast is None:
        return  # declined: typer's own CLI runs it
    assert fast.code == by_typer.code
    assert _same(fast.out) == _same(by_typer.out)
    assert _same(fast.err) == _same(by_typer.err)


def test_the_end_to_end_matrix_goes_through_the_fast_path(two_paths: TwoPaths) -> None:
    """The matrix above compares something: the good lists are taken by the fast path."""
    for words in (["status"], ["push"], ["pull"], ["clone", "research", "copy"], ["run", "--", "true"],
                  ["hooks", "run", "stop"]):
        assert two_paths.fast(words) is not None, words
