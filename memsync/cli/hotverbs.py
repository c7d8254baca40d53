"""The hot verbs' typer commands, made from their declarations (options.py): the fast path
(fastpath.py) reads the same declarations, so the two parsers cannot drift apart."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Annotated, Any

import typer

from memsync.cli.base import CommandWrapper
from memsync.cli.options import HOT, REQUIRED, REST, WORD, Verb

__all__ = ["hot_command", "typer_command"]


def hot_command(app: typer.Typer, wrap: CommandWrapper, name: str) -> None:
    """Attach the hot verb `name` as its declaration says (options.py)."""
    verb = HOT[name]
    settings = {} if verb.interspersed else {"context_settings": {"allow_interspersed_args": False}}
    app.command(name, **settings)(wrap(typer_command(verb)))  # type: ignore[arg-type]


def typer_command(verb: Verb) -> Callable[..., Any]:
    """A function typer reads as it reads a command written out: one `Annotated` parameter per
    declared parameter, with the declared default (typer reads the signature, `__signature__`
    included); it calls the verb's body with the options record, as the fast path does."""
    from memsync.cli import completing

    parameters = []
    for shape, param in zip(verb.shapes(), verb.params, strict=True):
        extra = {"autocompletion": getattr(completing, param.complete)} if param.complete else {}
        declared = typer.Argument(help=param.help, **extra) if shape.arity in (WORD, REST) \
            else typer.Option(*shape.spellings, help=param.help, **extra)
        default = inspect.Parameter.empty if shape.default is REQUIRED else shape.default
        parameters.append(inspect.Parameter(shape.name, inspect.Parameter.KEYWORD_ONLY, default=default,
                                            annotation=Annotated[shape.kind, declared]))

    def command(**given: Any) -> Any:
        code = verb.body()(**verb.arguments(given))
        if isinstance(code, int):
            raise typer.Exit(code)

    command.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    command.__name__ = command.__qualname__ = verb.name
    command.__doc__ = verb.body().__doc__
    return command
