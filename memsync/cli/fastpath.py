"""The hot verbs (push, pull, clone, status, run, log, `hooks run`) without typer: a sandbox runs memsync cold,
a new Python per command, and importing typer and building its command tree is a large part of
each (docs/PERFORMANCE.md, "Figures behind the code's speed mechanisms").

`dispatch` reads exactly the forms a script or a hook writes (`--force`, `-m MSG`,
`--remote URL` or `--remote=URL`, `run [OPTIONS] [--] CMD...`) and calls the same body as the typer
command, with the same options record, through the same error handling (failures.py). Both
parsers are made from one declaration per verb (cli/options.py). Anything else (help, completion,
an unknown or repeated option, a value that looks like an option, a cluster like `-fm`, a number
that does not parse) is declined: the typer CLI runs it, so every usage error and every help text
stays typer's own. tests/unit/cli/test_fastpath.py checks the two paths against each other.

Hand-rolled, not argparse: the parser only has to accept a few exact forms and decline the rest,
and argparse would add its own import (gettext, re) and its own notion of abbreviations
(`--rem` for `--remote`) that typer does not share.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable
from typing import Any

from memsync.cli.options import FLAG, HOT, MANY, REQUIRED, REST, WORD, Shape, Verb

__all__ = ["dispatch", "parse"]


def _is_option(word: str) -> bool:
    return word.startswith("-") and word != "-"


def parse(verb: Verb, words: list[str]) -> dict[str, Any] | None:
    """The parameters given by `words` (what follows the verb), or None to decline."""
    shapes = verb.shapes()
    spelled = {spelling: s for s in shapes for spelling in s.spellings}
    words_in_order = [s for s in shapes if s.arity == WORD]
    rest = next((s for s in shapes if s.arity == REST), None)
    given: dict[str, Any] = {}
    i = 0
    while i < len(words):
        if rest is not None and words[i] == "--":
            given[rest.name] = words[i + 1:]
            break
        if not _is_option(words[i]):
            if rest is not None and not verb.interspersed:  # options end at the command
                given[rest.name] = words[i:]
                break
            word = next((s for s in words_in_order if s.name not in given), None)
            if word is None:
                return None
            given[word.name] = words[i]
            i += 1
            continue
        taken = _option(spelled, words, i, given)
        if taken is None:
            return None
        i += taken
    if any(s.default is REQUIRED and s.name not in given for s in words_in_order):
        return None  # typer says which argument is missing
    return given


def _option(spelled: dict[str, Shape], words: list[str], i: int, given: dict[str, Any]) -> int | None:
    """Reads the option at words[i] into `given`: how many words it took, or None to decline."""
    name, eq, attached = words[i].partition("=") if words[i].startswith("--") else (words[i], "", "")
    shape = spelled.get(name)
    if shape is None or (shape.arity == FLAG and eq):
        return None
    if shape.arity == FLAG:
        if shape.name in given:
            return None
        given[shape.name] = True
        return 1
    if eq:
        value, taken = attached, 1
    elif i + 1 < len(words) and not words[i + 1].startswith("-"):
        value, taken = words[i + 1], 2
    else:
        return None
    if shape.arity == MANY:
        given.setdefault(shape.name, []).append(value)
    elif shape.name in given:
        return None
    elif shape.number is int:
        if not (value.isascii() and value.isdigit()):  # `-n +3`, `-n 1_0`, `-n ３`: typer's to judge
            return None
        given[shape.name] = int(value)
    elif shape.number is float:
        try:
            given[shape.name] = float(value)  # as typer's lean coercion reads it (compat.lean_coercion)
        except ValueError:
            return None
    else:
        given[shape.name] = value
    return taken


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

        return _call(run_hook, {"args": args}, report_failures=False)
    verb = HOT.get(words[0])
    if verb is None:
        return None
    given = parse(verb, words[1:])
    if given is None:
        return None
    body = verb.body()
    if words[0] in ("push", "status"):  # the memory's lock first, and the walk under it (core/lockfirst.py)
        from pathlib import Path

        from memsync.core.lockfirst import walking

        with walking(Path.cwd()):
            return _call(body, verb.arguments(given))
    return _call(body, verb.arguments(given))


def _call(body: Callable[..., Any], params: dict[str, Any], report_failures: bool = True) -> int:
    """As app.main runs a typer command: Ctrl-C as a memsync error while it runs, failures as
    `error:`/`hint:` lines and exit codes (failures.py)."""
    from memsync.cli.failures import Stop, call_command, interrupt, unexpected
    from memsync.cli.output import err
    from memsync.errors import EXIT_INTERRUPTED, MemsyncError
    from memsync.util.startup import resume_gc

    resume_gc()  # the imports are done: the body runs with the collector on (util/startup.py)
    previous = signal.signal(signal.SIGINT, interrupt) if threading.current_thread() is threading.main_thread() \
        else None
    try:
        result = call_command(body, **params) if report_failures else body(**params)
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
