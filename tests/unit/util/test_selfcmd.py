"""util/selfcmd: memsync started again never imports from the working directory, and the hooks'
status check accepts exactly such a command line."""

from __future__ import annotations

import shlex
import sys

from memsync.agents.hookstatus import safe_command
from memsync.util.selfcmd import SAFE_PATH_FLAG, memsync_command


def test_the_command_is_this_interpreter_with_the_safe_path_flag() -> None:
    argv = memsync_command("hooks", "run")
    assert argv[:4] == [sys.executable, SAFE_PATH_FLAG, "-m", "memsync"] and argv[4:] == ["hooks", "run"]
    assert SAFE_PATH_FLAG in ("-P", "-I")
    assert safe_command(shlex.join(argv))
