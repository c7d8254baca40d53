"""Shell completion: scripts valid for each shell, installed by a documented command, answered
by memsync itself."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest


def memsync(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "memsync", *args], capture_output=True, text=True,
                          timeout=60, env={**os.environ, **(env or {})})


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_script_is_valid_for_its_shell(shell: str, tmp_path: Path) -> None:
    r = memsync("completion", "show", shell)
    assert r.returncode == 0, r.stderr
    script = tmp_path / f"memsync.{shell}"
    script.write_text(r.stdout)
    assert "_MEMSYNC_COMPLETE=complete_" + shell in r.stdout
    syntax = {"bash": ["bash", "-n"], "zsh": ["zsh", "-n"], "fish": ["fish", "--no-execute"]}[shell]
    if shutil.which(syntax[0]):
        check = subprocess.run([*syntax, str(script)], capture_output=True, text=True, timeout=30)
        assert check.returncode == 0, check.stderr
    else:  # the shell is not installed here: check the registration line at least
        expected = {"bash": "complete -o default -F _memsync_completion memsync",
                    "zsh": "compdef _memsync_completion memsync",
                    "fish": "complete --command memsync"}[shell]
        assert expected in r.stdout


def test_memsync_answers_completion_requests() -> None:
    r = memsync(env={"_MEMSYNC_COMPLETE": "complete_bash", "COMP_WORDS": "memsync pu", "COMP_CWORD": "1"})
    assert r.returncode == 0
    assert set(r.stdout.split()) == {"push", "pull"}
    r = memsync(env={"_MEMSYNC_COMPLETE": "complete_bash", "COMP_WORDS": "memsync hooks ", "COMP_CWORD": "2"})
    assert set(r.stdout.split()) == {"install", "uninstall", "status"}  # `run` is the agents', hidden


def test_install_writes_the_script_and_sources_it_once(tmp_path: Path) -> None:
    home = Path(os.environ["HOME"])
    for _ in range(2):
        r = memsync("completion", "install", "bash")
        assert r.returncode == 0, r.stderr
        assert "bash completion installed" in r.stdout
    script = home / ".bash_completions" / "memsync.sh"
    assert "_memsync_completion" in script.read_text()
    assert (home / ".bashrc").read_text().count(f"source '{script}'") == 1
    check = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True, timeout=30)
    assert check.returncode == 0


def test_an_unknown_shell_is_a_usage_error() -> None:
    r = memsync("completion", "show", env={"SHELL": "/bin/tcsh"})
    assert r.returncode == 2
    assert r.stderr.startswith("error: unsupported shell 'tcsh'") and "hint:" in r.stderr


@pytest.mark.slow
def test_memory_names_and_run_ids_are_completed(memory: Path, tmp_path: Path) -> None:
    """From this machine only: the hub's branches (or the listing cache), the memory's run ids."""
    r = subprocess.run([sys.executable, "-m", "memsync", "run", "--run-id", "nightly-7", "--", "true"], cwd=memory,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr

    def complete(words: str, cwd: Path) -> set[str]:
        env = {**os.environ, "_MEMSYNC_COMPLETE": "complete_bash", "COMP_WORDS": words,
               "COMP_CWORD": str(len(words.split(" ")) - 1)}
        proc = subprocess.run([sys.executable, "-m", "memsync"], capture_output=True, text=True, timeout=60,
                              env=env, cwd=cwd)
        assert proc.returncode == 0, proc.stderr
        return set(proc.stdout.split())

    assert complete("memsync clone re", tmp_path) == {"research"}
    assert complete("memsync run --memory r", tmp_path) == {"research"}
    assert complete("memsync log --run ni", memory) == {"nightly-7"}
    assert complete("memsync revert run:n", memory) == {"run:nightly-7"}
    assert complete("memsync restore x --at ru", memory) == {"run:nightly-7"}
    assert complete("memsync log --run ni", tmp_path) == set()  # outside a memory: nothing, no error
