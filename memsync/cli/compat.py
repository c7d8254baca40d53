"""Every typer internal memsync relies on, in one place, pinned in pyproject.toml and checked by
tests/unit/cli/test_compat.py against the installed typer: a typer release that moves one of them
fails that test rather than a user's command.

- fast coercion of plain option values (typer._coercion, typer.core._TyperParameter);
- the command name typer derives from a function, and the click command of one verb (typer.main);
- shell completion scripts and their installation (typer._completion_shared, _completion_classes);
- a command class whose argument parsing can be adjusted (typer.core.TyperCommand.parse_args).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import typer
from typer.core import TyperCommand

__all__ = ["TyperCommand", "click_command", "command_name", "completion_init", "completion_script",
           "install_completion", "install_except_hook", "lean_coercion"]


def command_name(function_name: str) -> str:
    """The name typer gives a command registered from a function (`install_completion` -> `install-completion`)."""
    from typer.main import get_command_name

    return str(get_command_name(function_name))


def click_command(app: typer.Typer) -> Any:
    """The click command typer builds for `app`."""
    from typer.main import get_command

    return get_command(app)


def install_except_hook() -> None:
    """typer's except hook, as typer's own `Typer.__call__` installs it."""
    from typer.main import except_hook

    if sys.excepthook != except_hook:
        sys.excepthook = except_hook


def completion_init() -> None:
    """Register typer's completion classes (a shell asking for completions)."""
    from typer._completion_classes import completion_init as init

    init()


def completion_script(shell: str, prog_name: str, complete_var: str) -> str:
    from typer._completion_shared import get_completion_script

    return str(get_completion_script(prog_name=prog_name, complete_var=complete_var, shell=shell))


def install_completion(shell: str, prog_name: str, complete_var: str) -> tuple[str, Path]:
    """(the shell, the file the script went to)."""
    from typer._completion_shared import install

    chosen, path = install(shell=shell, prog_name=prog_name, complete_var=complete_var)
    return str(chosen), Path(path)


def lean_coercion() -> None:
    """Start-up: typer builds a pydantic TypeAdapter (importing pydantic: docs/PERFORMANCE.md) for every
    parameter a command has, even unset ones. Unset values and values that already have the
    declared plain type need no coercion; anything else still goes through typer's own."""
    try:
        from typer._coercion import RuntimeParam, build_runtime_param
        from typer.core import _TyperParameter
    except ImportError:  # another typer: keep its behaviour
        return
    import types
    import typing

    def plain_types(annotation: Any) -> tuple[type, ...]:
        if annotation in (str, int, float):
            return (annotation,)
        if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
            args = typing.get_args(annotation)
            if all(a in (str, int, float, type(None)) for a in args):
                return tuple(a for a in args if a is not type(None))
        return ()

    class _Lazy(RuntimeParam):
        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            kinds = plain_types(self.annotation)
            if type(value) in kinds:
                return value
            if type(value) is str and len(kinds) == 1 and kinds[0] in (int, float):
                try:  # `--checkpoint 0`: a number typed on the command line, as int()/float() read it
                    return kinds[0](value)
                except ValueError:
                    pass  # typer's own coercion words the usage error
            if self.annotation in (Path, Path | None) and (type(value) is str or isinstance(value, Path)):
                return Path(value)  # `clone NAME DEST`: what pydantic makes of it, without importing it
            if (isinstance(value, (list, tuple)) and all(type(v) is str for v in value)
                    and self.annotation in (list[str], list[str] | None)):
                return list(value)
            if param._runtime_param is self:
                param._runtime_param = build_runtime_param(param.type_descriptor)
            return param._runtime_param._coerce_value(value, param=param, ctx=ctx)

    def get_runtime_param(self: Any) -> Any:
        if self._runtime_param is None:
            descriptor = self.type_descriptor
            if descriptor.file_annotation is None:
                self._runtime_param = _Lazy(descriptor.parameter_info, descriptor.annotation)
            else:
                self._runtime_param = build_runtime_param(descriptor)
        return self._runtime_param

    setattr(_TyperParameter, "get_runtime_param", get_runtime_param)  # noqa: B010
