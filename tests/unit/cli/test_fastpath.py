"""The hot verbs' own dispatch (cli/fastpath.py) against the typer CLI it stands in for.

Both are made from one declaration per verb (cli/options.py): first the command typer builds from
it is held equal to the fast path's reading of it, option by option. Then, for a matrix of argument
lists of push, pull, clone, status, run and `hooks run` (good ones, and bad ones typer turns into usage
errors), the fast path either declines or does exactly what typer does with the body's arguments
(each body replaced by a recorder, so every list is checked in microseconds). End to end on a real
memory and hub (a run starts its command): tests/stories/test_fastpath_end_to_end.py.
"""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Callable
from typing import Any

import pytest

from memsync.cli import app, fastpath, hookcall, logview, options, running, syncing
from memsync.run.options import RunOptions
from memsync.util import records

# (verb, arguments, whether the fast path must take it)
PARSED: list[tuple[list[str], bool]] = [
    (["push"], True), (["push", "-f"], True), (["push", "--force"], True), (["push", "-m", "note"], True),
    (["push", "--message", "a b"], True), (["push", "--message=x=y"], True), (["push", "-m", ""], True),
    (["push", "--remote", "/tmp/hub.git"], True), (["push", "--remote=git://h/x"], True),
    (["push", "-f", "-m", "m", "--remote", "r"], True), (["push", "--remote="], True),
    (["push", "-fm", "x"], False), (["push", "-mx"], False), (["push", "-m"], False), (["push", "-m", "-f"], False),
    (["push", "--force=1"], False), (["push", "--bogus"], False), (["push", "extra"], False),
    (["push", "--"], False), (["push", "--help"], False), (["push", "-h"], False), (["push", "-f", "-f"], False),
    (["push", "-m", "a", "-m", "b"], False), (["push", "--forc"], False),
    (["pull"], True), (["pull", "research"], True), (["pull", "research", "--remote", "r"], True),
    (["pull", "--remote", "r", "research"], True), (["pull", "-"], True), (["pull", ""], True),
    (["pull", "a", "b"], False), (["pull", "--json"], False), (["pull", "--remote"], False),
    (["pull", "--", "x"], False), (["pull", "--help"], False),
    (["clone", "research"], True), (["clone", "research", "copy"], True),
    (["clone", "--remote", "r", "research", "copy", "--full-history"], True), (["clone", "-"], True),
    (["clone"], False), (["clone", "--remote", "r"], False), (["clone", "a", "b", "c"], False),
    (["clone", "--full-history=1", "a"], False), (["clone", "a", "--json"], False), (["clone", "--help"], False),
    (["status"], True), (["status", "--json"], True), (["status", "--remote", "r", "--json"], True),
    (["status", "--json", "--json"], False), (["status", "x"], False), (["status", "-j"], False),
    (["status", "--json=1"], False),
    (["run"], True), (["run", "--"], True), (["run", "--", "true"], True), (["run", "true"], True),
    (["run", "--offline", "--no-push", "--", "sh", "-c", "exit 3"], True),
    (["run", "sh", "--offline", "-c", "x"], True), (["run", "--", "a", "--", "b"], True),
    (["run", "a", "--", "b"], True), (["run", "--memory", "a", "--memory=b:./b:ro", "--", "x"], True),
    (["run", "--checkpoint", "0", "--", "x"], True), (["run", "--checkpoint=2.5", "x"], True),
    (["run", "--checkpoint", "1e3", "x"], True), (["run", "--run-id", "r-1", "--remote", "h", "--as-user", "u",
                                                   "--max-push-rate", "6/min", "--keep-ssh-agent", "--create",
                                                   "--", "x"], True),
    (["run", "-", "x"], True),
    (["run", "--checkpoint", "abc", "--", "x"], False), (["run", "--checkpoint", "--", "x"], False),
    (["run", "--bogus", "--", "x"], False), (["run", "--help"], False), (["run", "--offline", "--offline", "x"], False),
    (["run", "--run-id", "a", "--run-id", "b", "x"], False), (["run", "--memory"], False),
    (["run", "-x", "--", "y"], False),
    (["hooks", "run", "session-start", "--agent", "claude-code", "--memory", "m", "--dir", "/d"], True),
    (["hooks", "run"], True), (["hooks", "run", "stop", "--unknown", "x", "-"], True),
    (["hooks", "run", "--help"], False), (["hooks", "run", "stop", "-h"], False), (["hooks", "run", "--"], False),
    (["hooks", "run", "stop", "-xh"], False), (["hooks", "run", "stop", "--help=1"], False),
    (["hooks", "--help"], False), (["hooks", "status"], False),
    ([], False), (["--help"], False), (["--version", "status"], False), (["list"], False),
    (["log"], True), (["log", "notes.md", "-n", "3", "--json"], True), (["log", "--run", "r1", "--flagged"], True),
    (["log", "--max-count=5"], True), (["log", "-n", "+3"], False), (["log", "-n", "1_0"], False),
    (["log", "-n"], False), (["log", "-n3"], False), (["log", "a", "b"], False),
    (["Status"], False),
]


def _recorders(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, dict[str, Any]]]:
    """Each hot verb's body replaced by one that records its arguments, by parameter name."""
    calls: list[tuple[str, dict[str, Any]]] = []

    def recorder(name: str, body: Callable[..., Any]) -> Callable[..., Any]:
        def record(*args: Any, **kwargs: Any) -> int:
            bound = inspect.signature(body).bind(*args, **kwargs)
            bound.apply_defaults()
            calls.append((name, {k: list(v) if isinstance(v, tuple) else v for k, v in bound.arguments.items()}))
            return 0
        return record

    for module, name in ((syncing, "push"), (syncing, "pull"), (syncing, "clone"), (syncing, "status"),
                         (running, "run"), (logview, "log"),
                         (hookcall, "run_hook")):
        monkeypatch.setattr(module, name, recorder(name, getattr(module, name)))
    return calls


def _normal(call: tuple[str, dict[str, Any]]) -> tuple[str, dict[str, Any]]:
    """None and an empty list mean the same to every body (`memory or []`, `command or []`)."""
    name, kwargs = call
    return name, {k: (None if v == [] else v) for k, v in kwargs.items()}


@pytest.mark.parametrize(("words", "taken"), PARSED, ids=[" ".join(w) or "(none)" for w, _ in PARSED])
def test_the_fast_path_calls_the_body_as_typer_does_or_declines(
        words: list[str], taken: bool, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    calls = _recorders(monkeypatch)
    typer_code = app.main(list(words))
    typer_calls = list(calls)
    calls.clear()
    code = fastpath.dispatch(list(words))
    capsys.readouterr()
    if not taken:
        assert code is None and not calls, (code, calls)
        return
    assert code == typer_code == 0
    assert len(calls) == len(typer_calls) == 1
    assert _normal(calls[0]) == _normal(typer_calls[0])


def test_every_hot_verb_has_arguments_in_the_matrix() -> None:
    assert {w[0] for w, taken in PARSED if taken} == {*options.HOT, "hooks"}


def _without_none(kind: Any) -> Any:
    if isinstance(kind, types.UnionType):
        kept = [a for a in typing.get_args(kind) if a is not type(None)]
        return kept[0] if len(kept) == 1 else kind
    return kind


HOT_SHAPES = {name: verb.shapes() for name, verb in options.HOT.items()}


@pytest.mark.parametrize("verb", sorted(options.HOT))
def test_typer_and_the_fast_path_read_the_same_declaration(verb: str) -> None:
    """Every option and argument of a hot verb as typer built it, against the fast path's reading
    of the same declaration: name, spellings, type, default and arity."""
    whole: Any = app._command_for(app._app_for([verb]))
    command = whole.commands[verb]
    declared = HOT_SHAPES[verb]
    built = {p.name: p for p in command.params if p.name != "help"}
    assert list(built) == [s.name for s in declared]
    for shape in declared:
        param = built[shape.name]
        what = (verb, shape.name)
        assert param.type_descriptor.annotation == _without_none(shape.kind), what
        assert param.default == (None if shape.default is options.REQUIRED else shape.default), what
        if shape.arity in (options.WORD, options.REST):
            required = shape.default is options.REQUIRED
            assert param.param_type_name == "argument" and param.required == required, what
            assert param.nargs == (-1 if shape.arity == options.REST else 1), what
            continue
        assert param.param_type_name == "option", what
        assert (list(param.opts), param.secondary_opts) == (list(shape.spellings), []), what
        assert param.is_flag == (shape.arity == options.FLAG), what
        assert param.multiple == (shape.arity == options.MANY), what
        plain = _without_none(shape.kind)
        assert param.nargs == 1 and shape.number == (plain if plain in (int, float) else None), what
    interspersed = command.context_settings.get("allow_interspersed_args", True)
    assert interspersed == options.HOT[verb].interspersed


def test_hooks_run_passes_every_word_on_as_the_fast_path_does() -> None:
    """`hooks run` is declared in hooks.py: one variadic argument, unknown options passed on."""
    whole: Any = app._command_for(app._app_for(["hooks"]))
    command = whole.commands["hooks"].commands["run"]
    assert [(p.name, p.nargs) for p in command.params if p.name != "help"] == [("args", -1)]
    assert command.context_settings.get("ignore_unknown_options") is True


def test_each_default_is_declared_once() -> None:
    """A record field's default is the record's: the declaration gives none of its own."""
    for verb in options.HOT.values():
        own = {f.name for f in records.fields(verb.record)}
        for param in verb.params:
            if param.name in own:
                assert param.kind is None and param.default is None, (verb.name, param.name)
    assert options.HOT["run"].arguments({})["options"] == RunOptions()
