"""The `memsync` command's entry point: as little as possible before the CLI is imported.

A Ctrl-C during start-up (importing typer and pygit2 takes a moment) exits 130 with one line, as
it does later; `memsync --version` answers without importing the CLI at all. With MEMSYNC_SERVER
set, the command goes to a resident `memsync serve` (handoff.py) when one is there.
"""

from __future__ import annotations

import os
import sys


def main() -> None:
    try:
        from memsync import __version__

        if sys.argv[1:] == ["--version"]:
            sys.stdout.write(f"memsync {__version__}\n")
            return
        if os.environ.get("MEMSYNC_SERVER"):
            from memsync import handoff

            if handoff.wanted(sys.argv[1:]):
                served = handoff.served(sys.argv[1:], __version__)
                if served is not None:
                    sys.stdout.flush()
                    os._exit(served)
        from memsync.cli import main as cli_main

        code = cli_main()
    except KeyboardInterrupt:
        sys.stderr.write("error: interrupted\n")
        sys.stderr.flush()
        os._exit(130)
    sys.exit(code)
