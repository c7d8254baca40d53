"""The package's layers (docs/ARCHITECTURE.md), checked from the source: every import, function-level
ones included, points down; no cycles; pygit2 and cffi only in git/, typer only in cli/, rich only
in the CLI's output module."""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "memsync"

# Bottom to top. A module may import its own package and any package below it.
LAYERS = ["errors", "util", "checks", "git", "core", "sync", "live", "history", "run", "agents",
          "integrations", "ui", "cli", "serve", "api", "entry", "__main__"]
ONLY_IN = {"pygit2": ("git",), "cffi": ("git",), "_cffi_backend": ("git",), "typer": ("cli",),
           "rich": ("cli.output",), "starlette": ("ui",), "jinja2": ("ui",), "uvicorn": ("ui",)}


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


MODULES = _modules()


@functools.cache
def _parsed(path: Path) -> ast.Module:
    """Each module parsed once per session: every rule below walks the same trees."""
    return ast.parse(path.read_text(), str(path))


@functools.cache
def _imports(name: str, path: Path) -> tuple[tuple[str, int], ...]:
    """(imported module, line) for every import statement in the module, at any depth. Imports
    under `if TYPE_CHECKING:` are included: a type is a dependency too."""
    return tuple(_walk_imports(name, path))


def _walk_imports(name: str, path: Path) -> Iterator[tuple[str, int]]:
    tree = _parsed(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            for alias in node.names:
                full = f"{module}.{alias.name}"
                yield (full if full in MODULES else module), node.lineno


def _owner(module: str) -> str:
    """The memsync module that an imported name lives in (a package's name for its __init__)."""
    while module not in MODULES and "." in module:
        module = module.rpartition(".")[0]
    return module


def _layer(module: str) -> tuple[int, str]:
    parts = module.split(".")
    if len(parts) == 1:  # the package itself: only __version__, importable from anywhere
        return -1, "memsync"
    top = parts[1]
    return LAYERS.index(top), top


def _graph() -> dict[str, dict[str, int]]:
    graph: dict[str, dict[str, int]] = {}
    for name, path in MODULES.items():
        edges: dict[str, int] = {}
        for imported, line in _imports(name, path):
            if imported == "memsync" or imported.startswith("memsync."):
                owner = _owner(imported)
                if owner != name:
                    edges.setdefault(owner, line)
        graph[name] = edges
    return graph


def test_every_module_is_in_a_layer() -> None:
    unknown = [m for m in MODULES if m != "memsync" and m.split(".")[1] not in LAYERS]
    assert unknown == []


def test_the_package_root_imports_nothing_of_memsync() -> None:
    assert _graph()["memsync"] == {}


def test_imports_point_down() -> None:
    upward = []
    for name, edges in _graph().items():
        mine, _ = _layer(name)
        for target, line in edges.items():
            theirs, _ = _layer(target)
            if theirs > mine:
                upward.append(f"{MODULES[name].relative_to(PACKAGE.parent)}:{line} imports {target}")
    assert upward == []


def test_no_import_cycles() -> None:
    graph = _graph()
    cycles: list[list[str]] = []
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in graph.get(node, {}):
            if state.get(nxt) == 1:
                cycles.append([*stack[stack.index(nxt):], nxt])
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in graph:
        if node not in state:
            visit(node)
    assert cycles == []


@pytest.mark.parametrize("library", sorted(ONLY_IN))
def test_libraries_stay_behind_their_boundary(library: str) -> None:
    allowed = ONLY_IN[library]
    outside = []
    for name, path in MODULES.items():
        inside = any(name == f"memsync.{a}" or name.startswith(f"memsync.{a}.") for a in allowed)
        for imported, line in _imports(name, path):
            if (imported == library or imported.startswith(library + ".")) and not inside:
                outside.append(f"{path.relative_to(PACKAGE.parent)}:{line}")
    assert outside == []


def test_the_checker_sees_function_level_and_relative_imports(tmp_path: Path) -> None:
    """The parser itself: an import inside a function and a relative import are both found."""
    source = tmp_path / "probe.py"
    source.write_text("def f():\n    import pygit2\n    from .names import x\n")
    found = {m for m, _ in _imports("memsync.util.probe", source)}
    assert found == {"pygit2", "memsync.util.names"}


# libgit2 where pygit2 does not reach (its private cffi handles, the library through ctypes, a cffi
# FFI of memsync's own) goes through one module; ctypes elsewhere only for libc (util/sealed.py).
NATIVE_ONLY = {"pygit2.ffi": (), "pygit2._libgit2": (), "cffi": (), "_cffi_backend": (),
               # ctypes for libc (mlock, prctl, a blocked open's path), never for libgit2
               "ctypes": ("memsync.util.sealed", "memsync.util.processes", "memsync.util.fiforelease")}


def _imported_names(path: Path) -> Iterator[tuple[str, int]]:
    """Every absolute name an import statement brings in, `from pygit2 import ffi` as `pygit2.ffi`."""
    for node in ast.walk(_parsed(path)):
        if isinstance(node, ast.Import):
            yield from ((alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            yield node.module, node.lineno
            yield from ((f"{node.module}.{alias.name}", node.lineno) for alias in node.names)


def test_libgit2_beyond_pygit2_is_reached_through_git_native() -> None:
    outside = []
    for name, path in MODULES.items():
        if name == "memsync.git.native":
            continue
        for imported, line in _imported_names(path):
            for private, also in NATIVE_ONLY.items():
                if (imported == private or imported.startswith(private + ".")) and name not in also:
                    outside.append(f"{path.relative_to(PACKAGE.parent)}:{line} {imported}")
    assert outside == []
    names = {n for n, _ in _imported_names(MODULES["memsync.git.native"])}
    assert {"pygit2.ffi", "cffi"} <= names  # the check looks at real imports
