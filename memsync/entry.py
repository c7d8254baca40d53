"""The `memsync` command's entry point: as little as possible before the CLI is imported.

A Ctrl-C during start-up (importing typer and pygit2 takes a moment) exits 130 with one line, as
it does later; `memsync --version` answers without importing the CLI at all.
"""

from __future__ import annotations

import os
import sys


def main() -> None:
    try:
        if sys.argv[1:] == ["--version"]:
            from memsync import __version__

            sys.stdout.write(f"memsync {__version__}\n")
            return
        from memsync.cli import main as cli_main

        code = cli_main()
    except KeyboardInterrupt:
        sys.stderr.write("error: interrupted\n")
        sys.stderr.flush()
        os._exit(130)
    sys.exit(code)
