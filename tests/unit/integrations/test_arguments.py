"""integrations/arguments: a tool call's bad arguments are told to the model in one line."""

from __future__ import annotations

from memsync.integrations.arguments import MAX_SHOWN, invalid, unknown


def test_validation_errors_become_one_line() -> None:
    errors: list[dict[str, object]] = [{"loc": ("path",), "type": "missing", "msg": "Field required"},
              {"loc": ("view_range", 0), "type": "int_type", "msg": "Input should be a valid integer\nmore detail"},
              {"loc": (), "type": "x", "msg": "bad"},
              {"loc": ("a",), "type": "x", "msg": "y"}, {"loc": ("b",), "type": "x", "msg": "z"}]
    line = invalid("view", errors)
    assert "\n" not in line and line.startswith("Invalid arguments for view: path is required; ")
    assert "view_range.0: Input should be a valid integer;" in line and "arguments: bad" in line
    assert line.endswith(f"(and {len(errors) - MAX_SHOWN} more)")


def test_unknown_arguments_are_named_with_what_the_tool_takes() -> None:
    assert unknown("view", ["path"], {"path", "view_range"}) is None
    said = unknown("view", ["path", "x" * 100, "b", "c", "d"], {"path", "view_range"})
    assert said is not None and said.startswith("Unknown arguments for view: 'b', 'c', 'd' …")
    assert said.endswith("it takes path, view_range") and "x" * 41 not in said
    assert unknown("create", ["mode"], {"path"}) == "Unknown argument for create: 'mode'; it takes path"
