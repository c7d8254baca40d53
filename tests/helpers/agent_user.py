"""A throwaway user for `run --as-user` tests: never `nobody`, since memsync ends every process
of the --as-user user after a run (other tests, and other programs, run as nobody)."""

from __future__ import annotations

import contextlib
import os
import pwd
import secrets
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

SYSTEM_PYTHON = "/usr/bin/python3"


def skip_unless_root() -> None:
    if os.geteuid() != 0 or not shutil.which("useradd") or not os.access(SYSTEM_PYTHON, os.X_OK):
        pytest.skip("needs root, useradd and a system Python")


@pytest.fixture(scope="module")
def agent_user() -> Iterator[pwd.struct_passwd]:
    """A user of its own for the agent, removed afterwards."""
    skip_unless_root()
    name = f"msrace{secrets.token_hex(4)}"
    for _ in range(20):  # useradd waits for no one: another process may hold /etc/passwd's lock
        made = subprocess.run(["useradd", "--system", "--no-create-home", "--home-dir", "/nonexistent",
                               "--shell", "/usr/sbin/nologin", name], capture_output=True, text=True, check=False)
        if made.returncode == 0:
            break
        time.sleep(0.2)
    else:
        pytest.skip(f"cannot create a user: {made.stderr.strip()}")
    entry = pwd.getpwnam(name)
    yield entry
    end_all(entry.pw_uid)
    for _ in range(20):
        if subprocess.run(["userdel", name], capture_output=True, check=False).returncode in (0, 6):
            break
        time.sleep(0.2)


def live(uid: int) -> list[int]:
    """Processes of `uid` that are not zombies (read from /proc, independently of memsync)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            status = (entry / "status").read_text() if entry.name.isdigit() else ""
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        if str(uid) in fields.get("Uid", "").split()[:3] and not fields.get("State", "").strip().startswith("Z"):
            found.append(int(entry.name))
    return found


def end_all(uid: int) -> None:
    for _ in range(100):
        pids = live(uid)
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, 9)
        time.sleep(0.05)
