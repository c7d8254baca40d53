"""The hot verbs (push, pull, status, run, `hooks run`) without typer: a sandbox runs memsync cold,
a new Python per command, and importing typer and building its command tree is ~60 ms of each.

`dispatch` reads exactly the forms a script or a hook writes (`--force`, `-m MSG`,
`--remote URL` or `--remote=URL`, `run [OPTIONS] [--] CMD...`) and calls the same body as the typer
command (syncing.py, running.py, hookcall.py) through the same error handling (failures.py).
Anything else (help, completion, an unknown or repeated option, a value that looks like an
option, a cluster like `-fm`, a number that does not parse) is declined: the typer CLI runs it,
so every usage error and every help text stays typer's own. tests/test_fastpath.py checks the two
paths against each other.

Hand-rolled, not argparse: the parser only has to accept a few exact forms and decline the rest,
and argparse would add its own import (~5 ms: gettext, re) and its own notion of abbreviations
(`--rem` for `--remote`) that typer does not share.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable
from typing import Any

from memsync.util.records import dataclass, field

__all__ = ["dispatch", "parse"]


@dataclass(frozen=True)
class Verb:
    """What one hot verb accepts: spellings of its flags and of its options with a value (each
    mapped to the body's parameter), the options that may repeat, and its words."""

    flags: dict[str, str]
    values: dict[str, str]
    repeated: frozenset[str] = frozenset()
    numbers: frozenset[str] = frozenset()  # float options
    positional: str | None = None  # one optional word (pull NAME)
    rest: str | None = None  # run: the first word that is not an option (or what follows `--`) on
    defaults: dict[str, Any] = field(default_factory=dict)


REMOTE = {"--remote": "remote"}
VERBS: dict[str, Verb] = {
    "push": Verb({"-f": "force", "--force": "force"}, {"-m": "message", "--message": "message", **REMOTE},
                 defaults={"force": False, "message": None, "remote": None}),
    "pull": Verb({}, REMOTE, positional="name", defaults={"name": None, "remote": None}),
    "status": Verb({"--json": "json"}, REMOTE, defaults={"json": False, "remote": None}),
    "run": Verb({"--offline": "offline", "--no-push": "no_push", "--keep-ssh-agent": "keep_ssh_agent",
                 "--create": "create"},
                {"--memory": "memory", "--run-id": "run_id", "--checkpoint": "checkpoint", "--as-user": "as_user",
                 "--max-push-rate": "max_push_rate", **REMOTE},
                repeated=frozenset({"memory"}), numbers=frozenset({"checkpoint"}), rest="command",
                defaults={"command": None, "memory": None, "run_id": None, "offline": False, "no_push": False,
                          "checkpoint": 30.0, "remote": None, "keep_ssh_agent": False, "as_user": None,
                          "max_push_rate": None, "create": False}),
}


def _is_option(word: str) -> bool:
    return word.startswith("-") and word != "-"


def parse(verb: Verb, words: list[str]) -> dict[str, Any] | None:
    """The body's keyword arguments for `words` (what follows the verb), or None to decline."""
    given: dict[str, Any] = {}
    i = 0
    while i < len(words):
        word = words[i]
        if verb.rest is not None and word == "--":
            given[verb.rest] = words[i + 1:]
            break
        if not _is_option(word):
            if verb.rest is not None:  # options end at the command (typer: allow_interspersed_args=False)
                given[verb.rest] = words[i:]
                break
            if verb.positional is None or verb.positional in given:
                return None
            given[verb.positional] = word
            i += 1
            continue
        name, eq, attached = word.partition("=") if word.startswith("--") else (word, "", "")
        if name in verb.flags and not eq:
            key = verb.flags[name]
            if key in given:
                return None
            given[key] = True
        elif name in verb.values:
            if eq:
                value = attached
            elif i + 1 < len(words) and not words[i + 1].startswith("-"):
                i += 1
                value = words[i]
            else:
                return None
            key = verb.values[name]
            if key in verb.repeated:
                given.setdefault(key, []).append(value)
            elif key in given:
                return None
            elif key in verb.numbers:
                try:
                    given[key] = float(value)  # as typer's lean coercion reads it (compat.lean_coercion)
                except ValueError:
                    return None
            else:
                given[key] = value
        else:
            return None
        i += 1
    return {**verb.defaults, **given}


def _hook_words(words: list[str]) -> list[str] | None:
    """`hooks run` passes every word on to the hook (typer: ignore_unknown_options); declined when
    typer would read one itself: `--`, the help option, a short-option cluster (`-xh` holds -h)."""
    for word in words:
        if word == "--" or word.startswith("--help") or (word.startswith("-") and not word.startswith("--")
                                                          and word != "-"):
            return None
    return words


def dispatch(words: list[str]) -> int | None:
    """The exit code of a hot verb run here, or None: the typer CLI runs `words`."""
    if not words or os.environ.get("_MEMSYNC_COMPLETE"):
        return None
    if words[:2] == ["hooks", "run"]:
        args = _hook_words(words[2:])
        if args is None:
            return None
        from memsync.cli.hookcall import run_hook

        return _call(run_hook, {"args": args}, guarded=False)
    verb = VERBS.get(words[0])
    if verb is None:
        return None
    params = parse(verb, words[1:])
    if params is None:
        return None
    if words[0] == "run":
        from memsync.cli.running import run

        return _call(run, params)
    if words[0] in ("push", "status"):  # the memory's lock first, and the walk under it (core/lockfirst.py)
        from pathlib import Path

        from memsync.core.lockfirst import walking

        with walking(Path.cwd()):
            return _call(getattr(_syncing(), words[0]), params)
    return _call(getattr(_syncing(), words[0]), params)


def _syncing() -> Any:
    from memsync.cli import syncing

    return syncing


def _call(body: Callable[..., Any], params: dict[str, Any], guarded: bool = True) -> int:
    """As app.main runs a typer command: Ctrl-C as a memsync error while it runs, failures as
    `error:`/`hint:` lines and exit codes (failures.py)."""
    from memsync.cli.failures import Stop, call_guarded, interrupt, unexpected
    from memsync.cli.output import err
    from memsync.errors import EXIT_INTERRUPTED, MemsyncError
    from memsync.util.startup import resume_gc

    resume_gc()  # the imports are done: the body runs with the collector on (util/startup.py)
    previous = signal.signal(signal.SIGINT, interrupt) if threading.current_thread() is threading.main_thread() \
        else None
    try:
        result = call_guarded(body, **params) if guarded else body(**params)
    except Stop as stop:
        return stop.code
    except MemsyncError as exc:  # raised outside a command body
        err(f"error: {exc.message}")
        return exc.exit_code
    except KeyboardInterrupt:
        err("error: interrupted")
        return EXIT_INTERRUPTED
    except Exception as exc:
        return unexpected(exc)
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
    return result if isinstance(result, int) else 0
