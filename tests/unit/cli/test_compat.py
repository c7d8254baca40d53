"""memsync/cli/compat.py against the installed typer: each internal it relies on is there and does
what compat expects. A typer release that moves one fails here, not in a user's command."""

from __future__ import annotations

import importlib.metadata
import os
from pathlib import Path
from typing import Annotated

import pytest
import typer

from memsync.cli import app as cli_app
from memsync.cli import compat


def test_typer_is_the_minor_version_the_pin_allows() -> None:
    version = importlib.metadata.version("typer")
    major, minor = (int(part) for part in version.split(".")[:2])
    assert (major, minor) == (0, 29), f"typer {version}: check memsync/cli/compat.py, then move the pin"


def test_lean_coercion_is_installed() -> None:
    from typer.core import _TyperParameter

    assert _TyperParameter.get_runtime_param.__qualname__ == "lean_coercion.<locals>.get_runtime_param"
    from typer._coercion import RuntimeParam

    assert hasattr(RuntimeParam, "_coerce_value")


def test_plain_values_skip_typer_s_coercion_and_others_still_get_it(tmp_path: Path) -> None:
    """A number typed on the command line is converted; an invalid one is still typer's usage error."""
    app = typer.Typer()
    seen: list[object] = []

    @app.command()
    def probe(n: Annotated[int, typer.Option("--n")] = 1,
              where: Annotated[Path | None, typer.Option("--where")] = None) -> None:
        seen.extend([n, where])

    command = compat.click_command(app)
    command.main(["--n", "5", "--where", str(tmp_path)], standalone_mode=False)
    assert seen == [5, tmp_path]
    with pytest.raises(Exception, match="int"):  # still typer's own (pydantic's) refusal
        command.main(["--n", "five"], standalone_mode=False)
    assert seen == [5, tmp_path]


def test_command_names_and_the_click_command() -> None:
    assert compat.command_name("install_completion") == "install-completion"
    command = compat.click_command(cli_app.app)
    assert {"push", "run", "log"} <= set(command.commands)


def test_the_command_class_can_take_arguments_off_before_parsing() -> None:
    assert callable(getattr(compat.TyperCommand, "parse_args", None))
    from memsync.cli.forensics import _PathsAfterDashes

    assert issubclass(_PathsAfterDashes, compat.TyperCommand)


def test_completion_script_and_install(tmp_path: Path) -> None:
    script = compat.completion_script("bash", "memsync", "_MEMSYNC_COMPLETE")
    assert "_MEMSYNC_COMPLETE" in script and "memsync" in script
    compat.completion_init()
    shell, path = compat.install_completion("bash", "memsync", "_MEMSYNC_COMPLETE")
    assert shell == "bash"
    assert path.is_file() and path.is_relative_to(Path(os.environ["HOME"]))
