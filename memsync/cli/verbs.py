"""The CLI's verbs, one module per group; each attaches its commands to the app.

Command modules import typer and memsync.cli.output only at the top; the core they call is imported
inside each command, so `memsync --help` does not pay for pygit2, rich or yaml. A command is a
module-level function, attached to the app in its module's `register`; a hot verb's command is
made from its declaration (options.py) by hotverbs.py, and the fast path reads the same.

A new verb module is one line: in `register` below if it is a core verb, else in OCCASIONAL.
"""

from __future__ import annotations

import typer

from memsync.cli.base import CommandWrapper

# Verbs whose modules are imported only when they are the one being run (or for the whole
# app: help, an unknown name), so that the integrations cost the core commands nothing.
OCCASIONAL = {"redact": "redact", "hooks": "hooks", "completion": "hooks", "mcp": "mcp", "serve": "serve",
              "proposals": "proposals", "review": "proposals", "accept": "proposals", "reject": "proposals",
              "consolidate": "proposals", "ui": "ui"}
_registered: set[str] = set()


def register(app: typer.Typer, wrap: CommandWrapper) -> None:
    """Attach the core verbs to `app`; the occasional ones come with `register_for`."""
    from memsync.cli import forensics, run, storage, watch

    for module in (storage, run, forensics, watch):
        module.register(app, wrap)


def register_for(app: typer.Typer, wrap: CommandWrapper, words: list[str]) -> None:
    """Attach what the command line `words` needs: its occasional verb, or every verb when it
    names none that is known (help, a typo: the whole app answers)."""
    import importlib

    core = {info.name or (info.callback.__name__.replace("_", "-") if info.callback else "")
            for info in app.registered_commands}
    first = words[0] if words else ""
    if first in core:
        return
    wanted = {OCCASIONAL[first]} if first in OCCASIONAL else set(OCCASIONAL.values())
    for name in dict.fromkeys(OCCASIONAL.values()):
        if name in wanted and name not in _registered:
            _registered.add(name)
            importlib.import_module(f"memsync.cli.{name}").register(app, wrap)
