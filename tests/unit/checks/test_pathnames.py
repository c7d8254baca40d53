"""checks/pathnames: the names no version may hold, as git would see them on any file system."""

from __future__ import annotations

import pytest

from memsync.checks.pathnames import bad_name, bad_path, refused_path, reserved_name


@pytest.mark.parametrize("name", [".git", ".GIT", ".Git.", ".git ", "git~1", ".git::$INDEX_ALLOCATION",
                                  ".g\u200cit", "\ufeff.git"])
def test_spellings_of_git(name: str) -> None:
    assert reserved_name(name) == ".git" and bad_name(name)


@pytest.mark.parametrize("name", [".vm0", ".VM0", ".vm0.", ".vm0 ", "vm0~1", ".vm0::$DATA", ".v\u200cm0"])
def test_spellings_of_vm0(name: str) -> None:
    assert reserved_name(name) == ".vm0"


@pytest.mark.parametrize("name", [".gitignore", ".github", "git", "vm0", ".vm0x", "my.git", "notes.md"])
def test_ordinary_names(name: str) -> None:
    assert reserved_name(name) is None and not bad_name(name)


def test_paths_are_judged_name_by_name() -> None:
    assert bad_path("notes/.GIT/config") and bad_path("a/../b") and bad_path("a//b") and bad_path("a/\0")
    assert not bad_path("notes/.gitignore") and not bad_path("runs/2026.md")


def test_the_refusal_says_which_name_and_why() -> None:
    assert "memsync's local configuration" in (refused_path("deep/.VM0/storage.yaml") or "")
    assert "reads as .git" in (refused_path("a/git~1/HEAD") or "")
    assert "not a name git stores" in (refused_path("a/./b") or "")
    assert refused_path("notes/fine.md") is None
