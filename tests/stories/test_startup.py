"""Lean start-up: a command imports only what it needs (checked by module, not by timing).

`python -X importtime` lists every module a process imports; bench/ measures the time itself.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import write

HEAVY = ("rich", "yaml", "watchdog", "filelock", "pydantic", "mcp", "anthropic", "anyio",
         "starlette", "jinja2", "uvicorn")


def imported(*args: str, cwd: Path) -> set[str]:
    """Top-level packages a `python -m memsync ARGS` process imported (and its exit code checked)."""
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "memsync", *args], cwd=cwd,
                          env=dict(os.environ), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    names = set()
    for line in proc.stderr.splitlines():
        if line.startswith("import time:") and line.count("|") == 2:
            names.add(line.rsplit("|", 1)[1].strip().split(".")[0])
    assert "memsync" in names  # the listing really is there
    return names


@pytest.mark.parametrize("args", [("--version",), ("--help",), ("push", "--help"), ("mcp", "--help"),
                                  ("ui", "--help")])
def test_version_and_help_import_neither_pygit2_nor_extras(tmp_path: Path, args: tuple[str, ...]) -> None:
    found = imported(*args, cwd=tmp_path)
    assert found.isdisjoint((*HEAVY, "pygit2", "cffi")), sorted(found & {*HEAVY, "pygit2", "cffi"})


def test_push_with_nothing_to_commit_skips_rich_yaml_pydantic(memory: Path) -> None:
    found = imported("push", cwd=memory)
    assert "pygit2" in found
    assert found.isdisjoint(("rich", "yaml", "watchdog", "pydantic", "mcp", "anthropic", "starlette",
                             "jinja2", "uvicorn")), sorted(found)


def test_storage_yaml_that_is_not_plain_still_goes_through_yaml(memory: Path) -> None:
    write(memory, ".vm0/storage.yaml", "name: research\ntype: memory\nsecrets: 'warn'  # quoted\n")
    assert "yaml" in imported("status", cwd=memory)


def test_a_number_on_the_command_line_needs_no_pydantic(memory: Path) -> None:
    """typer coerces `--checkpoint 0` (a str) through pydantic, ~0.3 s of import per run."""
    found = imported("run", "--offline", "--no-push", "--checkpoint", "0", "--", sys.executable, "-c", "pass",
                     cwd=memory)
    assert "pydantic" not in found


def test_the_integrations_cost_the_core_commands_nothing(memory: Path) -> None:
    """hooks, mcp, redact and completion are imported only when they are the command being run."""
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "memsync", "status"], cwd=memory,
                          env=dict(os.environ), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    loaded = {line.rsplit("|", 1)[1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
    assert "memsync.cli.syncing" in loaded
    assert not loaded & {"memsync.cli.hooks", "memsync.cli.mcp", "memsync.cli.redact"}
    # nor does status load what only committing and merging use
    assert not loaded & {"memsync.core.snapshot", "memsync.checks.guard", "memsync.checks.protect",
                         "memsync.core.unverified", "memsync.git.integrate"}


@pytest.mark.parametrize(("module", "verb"), [("memsync.cli.app", "list"), ("memsync.cli.syncing", "status")])
def test_a_ctrl_c_surfacing_as_an_import_failure_is_still_a_ctrl_c(tmp_path: Path, module: str, verb: str) -> None:
    """A SIGINT that lands inside a C extension's import (CPython's PyCapsule_Import) comes out as
    an ImportError ("PyCapsule_Import could not import module _socket"), not a KeyboardInterrupt;
    it used to end in a traceback and exit 1. Here the import of memsync's CLI receives a real
    SIGINT and then fails the way that import does."""
    script = (
        "import os, signal, sys\n"
        "class Interrupted:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        f"        if name == {module!r}:\n"
        "            try:\n"
        "                os.kill(os.getpid(), signal.SIGINT)\n"
        "            except KeyboardInterrupt:\n"
        "                pass\n"
        "            raise ImportError('PyCapsule_Import could not import module \"_socket\"')\n"
        "        return None\n"
        "sys.meta_path.insert(0, Interrupted())\n"
        f"sys.argv = ['memsync', {verb!r}]\n"
        "from memsync.entry import main\n"
        "main()\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 130, proc.stderr
    assert proc.stderr == "error: interrupted\n"


@pytest.mark.parametrize("args", [("status",), ("push",), ("pull",), ("run", "--offline", "--no-push", "--", "true"),
                                  ("hooks", "run", "stop")])
@pytest.mark.slow
def test_the_hot_verbs_start_without_typer(memory: Path, args: tuple[str, ...]) -> None:
    """push, pull, status, run and `hooks run` are dispatched by cli/fastpath.py: typer's import
    and its command tree (~60 ms of a cold command) are not paid, nor the other verbs' modules."""
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "memsync", *args], cwd=memory,
                          env=dict(os.environ), capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr[-2000:]
    loaded = {line.rsplit("|", 1)[1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
    assert "memsync.cli.fastpath" in loaded
    assert not {name.split(".")[0] for name in loaded} & {"typer", "click", "rich", "pydantic"}, sorted(loaded)
    assert not loaded & {"memsync.cli.app", "memsync.cli.storage", "memsync.cli.forensics", "memsync.cli.watch",
                         "memsync.cli.hooks", "memsync.cli.run", "memsync.history.log", "memsync.integrations"}


def test_status_imports_only_what_reading_a_memory_needs(memory: Path) -> None:
    """HTTPS credentials (netrc, the git credential helper's subprocess), SSH host keys (cffi's
    Python part, hmac) and run ids (secrets) are imported where they are used: a status on a
    memory whose hub is on this machine uses none of them."""
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "memsync", "status"], cwd=memory,
                          env=dict(os.environ), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    loaded = {line.rsplit("|", 1)[1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
    unused = {"netrc", "subprocess", "cffi", "hmac", "secrets"}
    assert not loaded & unused, sorted(loaded & unused)
    # the gathered-conflict reader (a memory without a gathered file), push pacing (only a push
    # or a run paces), the secret scanner (a status scans nothing),
    # and OpenSSL's hashes (SSH host keys, a second hub's tracking name)
    unused = {"memsync.checks.gathered", "memsync.core.pacing", "memsync.checks.secrets", "memsync.checks.secret_rules",
              "hashlib"}
    assert not loaded & unused, sorted(loaded & unused)


def test_a_plain_run_imports_no_read_only_user_switch_or_history_reader(memory: Path) -> None:
    """`run -- CMD` with a writable memory, no --as-user and nothing failing: the read-only undo
    (and the history reader it uses), the user switch and the disk-full explainer are imported
    where those cases are met; watchdog, once the command has lasted a moment (run/session.py)."""
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "memsync", "run", "--offline", "--", "true"],
                          cwd=memory, env=dict(os.environ), capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr[-2000:]
    loaded = {line.rsplit("|", 1)[1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
    assert "memsync.run.execute" in loaded
    unused = {"memsync.core.readonly", "memsync.run.runas", "memsync.git.history", "memsync.git.diskfull", "watchdog"}
    assert not loaded & unused, sorted(loaded & unused)


@pytest.mark.parametrize("case", ["exit handler", "thread", "buffered"])
def test_a_hot_verb_leaves_without_finalisation_but_loses_nothing(case: str) -> None:
    """entry._leave ends the process without Python's finalisation (~15-20 ms of a cold command):
    exit handlers still run, buffered output is written, and a live non-daemon thread is waited
    for by the ordinary exit instead."""
    setup = {
        "exit handler": "import atexit; atexit.register(lambda: sys.stdout.write('handler ran\\n'))",
        "thread": "import threading, time\n"
                  "threading.Thread(target=lambda: (time.sleep(0.3), sys.stdout.write('thread done\\n'))).start()",
        "buffered": "sys.stdout.write('x' * 200000 + '\\n')",
    }[case]
    script = f"import sys\n{setup}\nsys.stdout.write('said\\n')\nfrom memsync.entry import _leave\n_leave(3)\n"
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 3, proc.stderr
    expected = {"exit handler": "said\nhandler ran\n", "thread": "said\nthread done\n",
                "buffered": "x" * 200000 + "\nsaid\n"}[case]
    assert proc.stdout == expected


@pytest.mark.parametrize("args", [("status",), ("diff",)])
def test_the_collector_is_off_while_importing_and_on_for_the_command(memory: Path, args: tuple[str, ...]) -> None:
    """util/startup.py: the cold start's imports run without the cyclic collector, and the
    command's body (here the fast path's status and typer's diff) with it, as always."""
    script = (
        "import gc, sys\n"
        "from memsync.util import startup\n"
        "real = startup.resume_gc\n"
        "def resume():\n"
        "    heavy = 'pygit2' in sys.modules or 'typer' in sys.modules\n"
        "    sys.stderr.write(f'before: {gc.isenabled()} imported: {heavy}\\n')\n"
        "    real()\n"
        "    sys.stderr.write(f'after: {gc.isenabled()}\\n')\n"
        "startup.resume_gc = resume\n"
        f"sys.argv = ['memsync', *{list(args)!r}]\n"
        "from memsync.entry import main\n"
        "main()\n")
    proc = subprocess.run([sys.executable, "-c", script], cwd=memory, env=dict(os.environ), capture_output=True,
                          text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "before: False imported: True\nafter: True\n" in proc.stderr  # (typer's, or the fast path's pygit2)


def test_a_log_of_versions_that_recorded_their_numbers_opens_no_cache(memory: Path) -> None:
    """Each version memsync made records what it changed (Memsync-Changes): `log` reads that and
    neither diffs the trees nor opens the kept summaries (history/summaries.py, SQLite)."""
    found = imported("log", "-n", "5", cwd=memory)
    assert "pygit2" in found and "sqlite3" not in found


def test_masking_a_plain_command_line_compiles_no_rule(tmp_path: object) -> None:
    """`memsync run -- true` records its command line masked; with nothing there that any rule
    starts with, the scanner's rules are not compiled (~10 ms of a cold run)."""
    code = (
        "import re, memsync.checks.secret_rules as r, memsync.run.cmdline as c\n"
        "from memsync.util.lazyre import LazyRe\n"
        "assert c.shown_command(['sh', '-c', 'echo done > notes.md']) == \"sh -c 'echo done > notes.md'\"\n"
        "lazy = [v for v in vars(r).values() if isinstance(v, LazyRe)]\n"
        "lazy += [x for rule in r._TOKEN_RULES for x in rule if isinstance(x, LazyRe)]\n"
        "lazy += [x for rule in r._KEYWORD_RES for x in rule if isinstance(x, LazyRe)]\n"
        "print(len(lazy), sum(x.compiled for x in lazy))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=dict(os.environ),
                         timeout=60, check=True).stdout.split()
    assert int(out[0]) > 40 and out[1] == "0", out
    masked = subprocess.run([sys.executable, "-c", "import memsync.run.cmdline as c; "
                             "print(c.shown_command(['curl', '-H', 'Authorization: Bearer abc.def']))"],
                            capture_output=True, text=True, env=dict(os.environ), timeout=60, check=True).stdout
    assert "abc.def" not in masked and "<redacted>" in masked
