"""A first checkout (clone) leaves libgit2's content filters out only when none could apply.

They cost ~45% of a first checkout (filters.py), so memsync skips them when core.autocrlf is off,
core.eol unset and no attributes file names a filter attribute. Each test here sets one of those
and checks that the clone still writes converted bytes, as git would; a plain memory's files are
written byte for byte either way.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pygit2
from pygit2.enums import ConfigLevel

from tests.conftest import Cli, write


def pushed(cli: Cli, tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "research"
    root.mkdir()
    assert cli("init", cwd=root).code == 0
    for rel, text in files.items():
        write(root, rel, text)
    r = cli("push", cwd=root)
    assert r.code == 0, r.err
    return root


def cloned(cli: Cli, tmp_path: Path) -> Path:
    dest = tmp_path / "copy"
    r = cli("clone", "research", str(dest))
    assert r.code == 0, r.err
    status = cli("status", "--json", cwd=dest)
    assert status.code == 0 and json.loads(status.out)["uncommitted"] == [], status.out  # as written, so recorded
    return dest


def test_a_gitattributes_rule_in_the_memory_still_converts(cli: Cli, tmp_path: Path) -> None:
    pushed(cli, tmp_path, {"notes/.gitattributes": "*.txt text eol=crlf\n", "notes/a.txt": "one\ntwo\n",
                           "b.txt": "one\ntwo\n"})
    dest = cloned(cli, tmp_path)
    assert (dest / "notes" / "a.txt").read_bytes() == b"one\r\ntwo\r\n"
    assert (dest / "b.txt").read_bytes() == b"one\ntwo\n"  # outside the rule's folder


def test_core_autocrlf_still_converts(cli: Cli, tmp_path: Path) -> None:
    pushed(cli, tmp_path, {"a.txt": "one\ntwo\n"})
    Path(os.environ["GIT_CONFIG_GLOBAL"]).write_text("[core]\n\tautocrlf = true\n")
    dest = cloned(cli, tmp_path)
    assert (dest / "a.txt").read_bytes() == b"one\r\ntwo\r\n"


def test_the_users_attributes_file_still_converts(cli: Cli, tmp_path: Path) -> None:
    pushed(cli, tmp_path, {"a.txt": "one\ntwo\n", "c.md": "x\n"})
    attributes = Path(pygit2.settings.search_path[ConfigLevel.XDG]) / "attributes"  # where libgit2 looks
    attributes.parent.mkdir(parents=True, exist_ok=True)
    attributes.write_text("*.txt text eol=crlf\n")
    dest = cloned(cli, tmp_path)
    assert (dest / "a.txt").read_bytes() == b"one\r\ntwo\r\n"
    assert (dest / "c.md").read_bytes() == b"x\n"


def test_without_any_rule_the_bytes_are_the_hubs(cli: Cli, tmp_path: Path) -> None:
    content = {"a.txt": "one\r\ntwo\n", "bin.dat": "\x00\x01\r\n", "deep/er/c.md": "$Id$\n"}
    pushed(cli, tmp_path, content)
    dest = cloned(cli, tmp_path)
    for rel, text in content.items():
        assert (dest / rel).read_bytes() == text.encode()
