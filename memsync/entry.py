"""The `memsync` command's entry point: as little as possible before the CLI is imported.

A Ctrl-C during start-up (importing typer and pygit2 takes a moment) exits 130 with one line, as
it does later, even when it lands inside a C extension's import and surfaces as its failure;
`memsync --version` answers without importing the CLI at all, and the hot verbs (push, pull,
status, run, log, `hooks run`) without typer (cli/fastpath.py) and leave without the interpreter's
finalisation (`_leave`). With MEMSYNC_SERVER set, the
command goes to a resident `memsync serve` (handoff.py) when one is there.
"""

from __future__ import annotations

import os
import sys

_interrupted = False


def _on_sigint(signum: int, frame: object) -> None:
    global _interrupted
    _interrupted = True
    raise KeyboardInterrupt


def main() -> None:
    import _signal  # type: ignore[import-not-found]  # not `signal`: see handoff.py

    _signal.signal(_signal.SIGINT, _on_sigint)
    try:
        from memsync import __version__

        if sys.argv[1:] == ["--version"]:
            sys.stdout.write(f"memsync {__version__}\n")
            return
        if os.environ.get("MEMSYNC_SERVER"):
            from memsync.serve import handoff

            if handoff.wanted(sys.argv[1:]):
                served = handoff.served(sys.argv[1:], __version__)
                if served is not None:
                    sys.stdout.flush()
                    os._exit(served)
        from memsync.util.startup import pause_gc, resume_gc

        pause_gc()  # until the command's body runs (util/startup.py); a served command never gets here
        from memsync.cli.fastpath import dispatch

        fast = dispatch(sys.argv[1:])  # the hot verbs without typer's command tree; None: typer's CLI
        if fast is not None:
            _leave(fast)
        else:
            from memsync.cli import base
            from memsync.cli.app import main as cli_main
            from memsync.serve.start import resident_server

            base.resident_server = resident_server
            resume_gc()
            code = cli_main()
    except KeyboardInterrupt:
        _say_interrupted()
    except Exception:
        if not _interrupted:
            raise
        # a Ctrl-C inside a C extension's import comes out as that import's failure (e.g.
        # "PyCapsule_Import could not import module _socket"): still a Ctrl-C
        _say_interrupted()
    sys.exit(code)


def _leave(code: int) -> None:
    """The end of a hot verb, its work done and said. Python's own finalisation (freeing every
    module, and pygit2's libgit2 state, OpenSSL's certificate store among it) is a measurable part
    of a cold command (docs/PERFORMANCE.md) and does nothing memsync needs, so the process ends
    without it: exit handlers run first, and both streams are flushed. A flush that fails (a
    closed pipe) or a thread that is not a daemon's still running takes the ordinary exit, as
    before."""
    import atexit

    threading = sys.modules.get("threading")
    if threading is not None and any(t.is_alive() and not t.daemon and t is not threading.main_thread()
                                     for t in threading.enumerate()):
        sys.exit(code)
    atexit._run_exitfuncs()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        sys.exit(code)
    os._exit(code)


def _say_interrupted() -> None:
    sys.stderr.write("error: interrupted\n")
    sys.stderr.flush()
    os._exit(130)
