"""The Anthropic SDK's own test suite for its filesystem memory tool, run against MemsyncMemoryTool.

tests/helpers/sdk_suite.py fetches the test file of exactly the installed `anthropic` version from
its source distribution on PyPI (cached in .pytest_cache); the SDK's test classes run here
unchanged with their fixtures replaced: `sync_local_filesystem_tool` and
`async_local_filesystem_tool` give MemsyncMemoryTool / AsyncMemsyncMemoryTool with
`report_versions=False` on a memory at `<temp_directory>/memories`, and the SDK's directory
snapshot leaves out memsync's own entries (.git, .vm0, .gitattributes), which are not the
memory's files.

The tests that reach into the SDK's private implementation (`_validate_path`, or an `os.open`
patched for the SDK's own call) cannot drive memsync's code; each is skipped here, naming its
equivalent at memsync's own seams in tests/unit/integrations/test_claude_reference.py.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from memsync.integrations.claude import AsyncMemsyncMemoryTool, MemsyncMemoryTool
from tests.helpers import sdk_suite

try:
    SDK_VERSION, sdk = sdk_suite.load()
except (sdk_suite.Unavailable, OSError) as exc:  # no network: the only reason to skip
    pytest.skip(f"the anthropic SDK's memory tool tests could not be fetched: {exc}", allow_module_level=True)

_AFTER_CHECK = "tests/unit/integrations/test_claude_reference.py::test_a_link_planted_after_the_check"
PRIVATE = {  # SDK test -> its equivalent at memsync's seams
    "test_read_rejects_symlink_created_after_validation": _AFTER_CHECK,
    "test_read_rejects_file_replaced_with_symlink_before_open":
        "tests/unit/integrations/test_claude_reference.py::test_a_link_planted_before_the_open",
    "test_view_rejects_directory_symlink_created_after_validation": _AFTER_CHECK,
    "test_validate_path_returns_resolved_path_not_symlink_target":
        "tests/unit/integrations/test_claude_reference.py::test_the_checked_path_is_the_one_used",
}
OWN_ENTRIES = (".git", ".vm0", ".gitattributes")

temp_directory = sdk.temp_directory  # the SDK's own fixture, unchanged


def _memsync_snapshot(base_path: str) -> dict[str, str]:
    """The SDK's get_directory_snapshot without memsync's own entries."""
    found: dict[str, str] = {}
    for root, dirs, files in os.walk(base_path):
        if Path(root) == Path(base_path) / "memories":
            dirs[:] = [d for d in dirs if d not in OWN_ENTRIES]
            files = [f for f in files if f not in OWN_ENTRIES]
        for file in files:
            full_path = os.path.join(root, file)
            with open(full_path) as fh:
                found[os.path.relpath(full_path, base_path)] = fh.read()
    return found


def _options() -> dict[str, Any]:
    return {"report_versions": False, "create": True, "checkpoint_seconds": 0, "checkpoint_writes": 0,
            "run_id": "sdk-suite"}


@pytest.fixture
def sync_local_filesystem_tool(temp_directory: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    monkeypatch.setattr(sdk, "get_directory_snapshot", _memsync_snapshot)
    tool = MemsyncMemoryTool("memories", Path(temp_directory) / "memories", **_options())
    tool.open()
    tool.base_path = Path(temp_directory)  # type: ignore[attr-defined]
    tool.memory_root = Path(temp_directory) / "memories"  # type: ignore[attr-defined]
    yield tool
    tool.close()


@pytest.fixture
def async_local_filesystem_tool(temp_directory: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    monkeypatch.setattr(sdk, "get_directory_snapshot", _memsync_snapshot)
    tool = AsyncMemsyncMemoryTool("memories", Path(temp_directory) / "memories", **_options())
    tool._backend.open()
    tool.base_path = Path(temp_directory)  # type: ignore[attr-defined]
    tool.memory_root = anyio.Path(Path(temp_directory) / "memories")  # type: ignore[attr-defined]
    yield tool
    tool._backend.close()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _suite(base: type) -> type:
    """The SDK's test class as it is, its private-method tests skipped with their equivalent named."""
    namespace: dict[str, Any] = {}
    for name, equivalent in PRIVATE.items():
        if hasattr(base, name):
            namespace[name] = pytest.mark.skip(reason=f"calls the SDK's private methods; equivalent: {equivalent}")(
                getattr(base, name))
    return type(base.__name__, (base,), namespace)


TestBetaLocalFilesystemMemoryTool = _suite(sdk.TestBetaLocalFilesystemMemoryTool)
TestBetaAsyncLocalFilesystemMemoryTool = pytest.mark.anyio(_suite(sdk.TestBetaAsyncLocalFilesystemMemoryTool))
