"""The hot verbs' command lines, declared once: push, pull, clone, status, run and log.

Each verb is one `Verb`: its parameters' spellings and help here, their types and defaults in the
verb's options record (sync/options.py, run/options.py), and a parameter the core never sees (the
command `run` runs, `--json`) with its type and default here. Both parsers are built from it: the
typer command (cli/verbs.typer_command, for help, completion and usage errors) and the fast path's
(cli/fastpath.py, for the exact forms a script writes, without importing typer).
tests/unit/cli/test_fastpath.py holds the two equal, option by option.

No typer here: the fast path imports this module.
"""

from __future__ import annotations

import typing
from collections.abc import Callable
from typing import Any

from memsync.history.options import LogOptions
from memsync.run.options import RunOptions
from memsync.sync.options import CloneOptions, PullOptions, PushOptions, StatusOptions
from memsync.util.records import MISSING, fields, recordclass

__all__ = ["HOT", "REQUIRED", "Param", "Shape", "Verb"]

FLAG, VALUE, MANY, WORD, REST = "flag", "value", "many", "word", "rest"  # Shape.arity
REQUIRED = MISSING  # the default of an argument that must be given (a record field without a default)


@recordclass(frozen=True)
class Param:
    """One parameter: an option (its spellings) or an argument (none). A field of the verb's
    record takes its type and default from there; any other gives them here."""

    name: str
    spellings: tuple[str, ...]
    help: str
    complete: str | None = None  # a function of cli/completing.py that completes it
    kind: Any = None
    default: Any = None


@recordclass(frozen=True)
class Shape:
    """What both parsers make of a parameter."""

    name: str
    spellings: tuple[str, ...]
    kind: Any  # the declared type: bool, str | None, float, list[str] | None
    default: Any
    arity: str  # FLAG, VALUE (one value), MANY (a repeatable value), WORD (one word, in order), REST
    number: type | None  # float or int: the value is read with it (None: a string, a flag, a list)


@recordclass(frozen=True)
class Verb:
    """One verb: its parameters, the record its options arrive in, and the function both parsers
    call (`module:function`)."""

    name: str
    record: type
    params: tuple[Param, ...]
    function: str
    interspersed: bool = True  # False: options end at the first word (run: the command's own follow)

    def shapes(self) -> list[Shape]:
        defaults = {f.name: f.default for f in fields(self.record)}
        shaped = []
        for p in self.params:
            kind, default = (_kind(self.record, p.name), defaults[p.name]) if p.name in defaults \
                else (p.kind, p.default)
            plural = any(typing.get_origin(a) is list for a in (kind, *typing.get_args(kind)))
            if not p.spellings:
                arity = REST if plural else WORD
            else:
                arity = FLAG if kind is bool else MANY if plural else VALUE
            number = next((t for t in (float, int) if t in (kind, *typing.get_args(kind))), None) if arity == VALUE \
                else None
            shaped.append(Shape(p.name, p.spellings, kind, default, arity, number))
        return shaped

    def body(self) -> Callable[..., Any]:
        """The function both parsers call: `body(options=record, **the other parameters)`."""
        module, _, function = self.function.partition(":")
        # __import__, not importlib.import_module: the import statement's own path, which
        # `python -X importtime` lists (tests/stories/test_startup.py reads that list)
        found: Callable[..., Any] = getattr(__import__(module, fromlist=[function]), function)
        return found

    def arguments(self, given: dict[str, Any]) -> dict[str, Any]:
        """The body's arguments for the given parameters (a missing one: its default): the record
        made of those that are its fields, the others as they are."""
        own = {f.name for f in fields(self.record)}
        others = {s.name: given.get(s.name, s.default) for s in self.shapes() if s.name not in own}
        return {"options": self.record(**{k: v for k, v in given.items() if k in own}), **others}


# The annotations the records use, read without typing.get_type_hints (it compiles each string:
# a cost every hot command would pay); any other goes through it.
_PLAIN: dict[str, Any] = {"bool": bool, "float": float, "int": int, "str": str, "str | None": str | None,
                          "float | None": float | None, "int | None": int | None}


def _kind(record: type, name: str) -> Any:
    written = next(c.__annotations__[name] for c in record.__mro__ if name in getattr(c, "__annotations__", {}))
    if not isinstance(written, str):
        return written
    return _PLAIN[written] if written in _PLAIN else typing.get_type_hints(record)[name]


REMOTE = Param("remote", ("--remote",), "Hub URL: a path, file://, git://, http(s)://, ssh:// or user@host:path.")
JSON = Param("json", ("--json",), "Print JSON instead of text.", kind=bool, default=False)

HOT: dict[str, Verb] = {v.name: v for v in (
    Verb("push", PushOptions, (
        Param("force", ("-f", "--force"), "Make a new version even if nothing changed (never rewrites remote "
              "history)."),
        Param("message", ("-m", "--message"), "Commit message."),
        REMOTE), "memsync.cli.syncing:push"),
    Verb("pull", PullOptions, (
        Param("name", (), "Outside a memory: clone NAME into ./NAME.", complete="memory_names"),
        REMOTE), "memsync.cli.syncing:pull"),
    Verb("clone", CloneOptions, (
        Param("name", (), "The memory's name on the remote.", complete="memory_names"),
        Param("dest", (), "Directory to create (default: ./NAME)."),
        REMOTE,
        Param("full_history", ("--full-history",), "Fetch every version now. By default a network hub sends the "
              "newest one and older ones come the first time something reads them (log, diff, restore, revert)."),
    ), "memsync.cli.syncing:clone"),
    Verb("status", StatusOptions, (JSON, REMOTE), "memsync.cli.syncing:status"),
    Verb("run", RunOptions, (
        Param("command", (), "The agent command, after --.", kind=list[str] | None, default=None),
        Param("memory", ("--memory",), "NAME[:PATH][:ro]; repeatable. Default: the memory in the current "
              "directory. PATH defaults to ./NAME; cloned if absent, pulled if present; :ro = read-only.",
              complete="memory_specs", kind=list[str] | None, default=None),
        Param("run_id", ("--run-id",), "Run id (default: UTC time + random)."),
        Param("offline", ("--offline",), "Do not pull first; run on the local copies."),
        Param("no_push", ("--no-push",), "Commit locally only."),
        Param("checkpoint", ("--checkpoint",), "Commit and push settled changes at least this often while the "
              "command runs; 0 = off."),
        Param("remote", ("--remote",), "Hub URL for memories cloned by this run."),
        Param("keep_ssh_agent", ("--keep-ssh-agent",), "Leave SSH_AUTH_SOCK in the command's environment "
              "(removed by default)."),
        Param("as_user", ("--as-user",), "Run CMD as this user (memsync must run as root); writable memories "
              "are lent to it for the run."),
        Param("max_push_rate", ("--max-push-rate",), "Push checkpoints at most this often, e.g. 6/min (also /s, "
              "/h); the others wait for the next push, the final push always happens. Default: "
              "$MEMSYNC_MAX_PUSH_RATE, else storage.yaml max_push_rate, else no limit."),
        Param("create", ("--create",), "Start a --memory the hub does not have (empty); without it such a "
              "memory is refused, naming those the hub has."),
        Param("propose", ("--propose",), "Make the run's changes a proposal (proposals/<name>/<run-id> on the "
              "hub) for review; the memory does not move until `memsync accept`."),
    ), "memsync.cli.running:run", interspersed=False),
    Verb("log", LogOptions, (
        Param("path", (), "Only versions that changed this file, with its size and sha256 at each."),
        Param("run", ("--run",), "Only this run's versions (checkpoints, final, merges).", complete="run_ids"),
        Param("flagged", ("--flagged",), "Only versions the integrity guard flagged or a protect policy refused."),
        JSON,
        Param("limit", ("-n", "--max-count"), "Show at most N versions."),
    ), "memsync.cli.logview:log"),
)}
