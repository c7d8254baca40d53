"""The Anthropic SDK's own tests for its filesystem memory tool, for the installed `anthropic`.

The wheel ships no tests, so the source distribution of exactly the installed version is fetched
from PyPI with pip (`pip download --no-deps --no-binary :all:`), once, into pytest's cache folder
(.pytest_cache, never committed). Only tests/lib/tools/memory_tools/test_filesystem.py is taken
from it and imported as a module; nothing of it is kept in memsync's tree.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import subprocess
import sys
import tarfile
from pathlib import Path
from types import ModuleType

MEMBER = "tests/lib/tools/memory_tools/test_filesystem.py"
CACHE = Path(__file__).resolve().parents[2] / ".pytest_cache" / "d" / "anthropic-sdist"


class Unavailable(Exception):
    """The source distribution could not be had (no network, PyPI down): the reason."""


def test_file(version: str, cache: Path = CACHE) -> Path:
    """The SDK's test_filesystem.py of `version`, downloaded and extracted once."""
    target = cache / version / "test_filesystem.py"
    if target.is_file():
        return target
    download = cache / version / "sdist"
    download.mkdir(parents=True, exist_ok=True)
    archives = sorted(download.glob(f"anthropic-{version}.tar.gz"))
    if not archives:
        command = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:",
                   "--disable-pip-version-check", "--dest", str(download),
                   f"anthropic=={version}"]
        done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
        archives = sorted(download.glob(f"anthropic-{version}.tar.gz"))
        if not archives:
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            raise Unavailable(f"pip could not download the sdist of anthropic=={version}: {last}")
    with tarfile.open(archives[0]) as tar:
        member = tar.extractfile(f"anthropic-{version}/{MEMBER}")
        if member is None:
            raise Unavailable(f"the sdist of anthropic=={version} has no {MEMBER}")
        data = member.read()
    partial = target.with_suffix(".part")
    partial.write_bytes(data)
    partial.replace(target)
    return target


def load() -> tuple[str, ModuleType]:
    """(the installed version, its test module imported under a private name)."""
    version = importlib.metadata.version("anthropic")
    path = test_file(version)
    spec = importlib.util.spec_from_file_location("anthropic_sdk_test_filesystem", path)
    if spec is None or spec.loader is None:
        raise Unavailable(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return version, module


if __name__ == "__main__":  # .ci/run: fetch it before the suite, so that CI never skips it
    print(test_file(importlib.metadata.version("anthropic")))
