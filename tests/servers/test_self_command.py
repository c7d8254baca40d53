"""Nothing memsync starts again imports code from where it happens to run (issue 21, part 3).

Claude Code and Codex run hooks with the project as the working directory, and `memsync serve`
re-executes itself in its own working directory after an upgrade. A repository that holds a
`memsync/` package, a `yaml.py` or a `typer/` package must not get its code run by either:
each case plants them in the working directory and checks that none of them ran.
"""

from __future__ import annotations

import json
import os
import shlex
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import Cli, write
from tests.helpers.figures import Figures, figures

pytestmark = pytest.mark.stress  # the security suite: counted in the reliability figures
__all__ = ["figures"]

PLANTED = "import pathlib; pathlib.Path({marker!r}).write_text('ran from the working directory')\n"


def plant(project: Path, marker: Path) -> None:
    """Modules memsync imports, as a hostile repository would hold them."""
    code = PLANTED.format(marker=str(marker))
    write(project, "memsync/__init__.py", code)
    write(project, "memsync/__main__.py", code)
    write(project, "yaml.py", code)
    write(project, "typer/__init__.py", code)
    write(project, "pygit2/__init__.py", code)


def commands(settings: Path) -> list[str]:
    data = json.loads(settings.read_text())
    return [h["command"] for groups in data["hooks"].values() for g in groups for h in g["hooks"]
            if "memsync hooks run" in h["command"]]


@pytest.mark.parametrize("agent, settings", [("claude-code", ".claude/settings.json"), ("codex", ".codex/hooks.json")])
def test_installed_hooks_never_import_from_the_project(cli: Cli, tmp_path: Path, agent: str, settings: str,
                                                       figures: Figures) -> None:
    home = Path(os.environ["HOME"])
    assert cli("hooks", "install", agent).code == 0
    installed = commands(home / settings)
    assert installed
    project = tmp_path / "cloned-repo"
    marker = tmp_path / "pwned"
    plant(project, marker)
    for command in installed:
        figures.add("security attacks")
        # exactly as the agent runs it: the settings' string through a shell, in the project
        r = subprocess.run(command, shell=True, cwd=project, capture_output=True, text=True, timeout=60,
                           input=json.dumps({"session_id": "s1", "hook_event_name": "Stop", "cwd": str(project)}))
        assert not marker.exists(), f"{command} ran the project's code: {r.stderr}"
        assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
        words = shlex.split(command)
        assert words[0] == sys.executable and words[1] in ("-P", "-I"), command
        figures.add("security attacks refused")


@pytest.mark.skipif(not hasattr(socket, "SO_PEERCRED"), reason="Linux peer credentials")
def test_serve_restarts_without_the_working_directorys_code(tmp_path: Path, figures: Figures) -> None:
    """An upgrade under a running server (a loaded module's mtime changes): the server execs itself
    again in its working directory, which holds a planted `memsync/`; the new process is memsync's."""
    import memsync.util.names as touched

    figures.add("security attacks")
    workdir = tmp_path / "somewhere"
    marker = tmp_path / "pwned"
    plant(workdir, marker)
    sock = tmp_path / "s.sock"
    # started as the console script would start it: nothing from the working directory at first
    # --idle: each incarnation stops by itself once idle (no signal racing the new one's start-up)
    proc = subprocess.Popen([sys.executable, "-P", "-m", "memsync", "serve", "--socket", str(sock), "--idle", "4"],
                            cwd=workdir, stderr=subprocess.PIPE, text=True)
    path = Path(touched.__file__)
    st = path.stat()
    try:
        assert _listening(sock, proc), "serve did not listen"
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
        # any client makes it look at its code, decline and restart; _listening's own probe may
        # already have done so (a slow server takes it in after the touch), the socket then gone
        # until the new process listens: a connection to either is the trigger
        assert _listening(sock, proc), "no server to touch off the restart"
        assert proc.stderr is not None
        said = []
        for line in proc.stderr:  # the old process's last line, then the new one's first
            said.append(line)
            if "serving on" in line and any("starting again" in earlier for earlier in said):
                break
        restarted = _listening(sock, proc)
        assert not marker.exists(), "the restarted server ran the working directory's code"
        assert restarted, "the restarted server did not listen again"
        _, err = proc.communicate(timeout=60)
    finally:
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0 and "no command for 4 s; stopping" in err, err
    figures.add("security attacks refused")


def _listening(sock: Path, proc: subprocess.Popen[str]) -> bool:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            try:
                probe.connect(str(sock))
                return True
            except OSError:
                time.sleep(0.05)
    return False


def test_hooks_status_names_hooks_an_earlier_memsync_installed(cli: Cli) -> None:
    """Hooks written as `python -m memsync …` keep importing from the project until reinstalled:
    `hooks status` says so, and `hooks install` replaces them."""
    settings = Path(os.environ["HOME"]) / ".claude" / "settings.json"
    assert cli("hooks", "install", "claude-code").code == 0
    fresh = cli("hooks", "status")
    assert fresh.code == 0 and "python -m memsync" not in fresh.err, fresh.err
    settings.write_text(settings.read_text().replace(" -P -m memsync ", " -m memsync ")
                        .replace(" -I -m memsync ", " -m memsync "))
    old = cli("hooks", "status")
    assert old.code == 0
    assert f"warning: {settings}: these hooks run `python -m memsync`" in old.err, old.err
    assert cli("hooks", "install", "claude-code").code == 0
    assert all(shlex.split(c)[1] in ("-P", "-I") for c in commands(settings))
    assert "python -m memsync" not in cli("hooks", "status").err
