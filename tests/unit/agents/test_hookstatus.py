"""agents/hookstatus: which installed hook commands keep the project's folder off sys.path."""

from __future__ import annotations

import pytest

from memsync.agents.hookstatus import safe_command


@pytest.mark.parametrize(("command", "safe"), [
    ("memsync hooks run --agent claude", True),
    ("/usr/bin/python3 -P -m memsync hooks run", True),
    ("/usr/bin/python3 -I -m memsync hooks run", True),
    ("/usr/bin/python3 -m memsync hooks run", False),  # an older memsync: imports from the project
    ("python3 -P memsync.py", False),
    ("'unterminated", False),
    ("", False),
])
def test_only_commands_that_keep_the_folder_off_the_path_are_safe(command: str, safe: bool) -> None:
    assert safe_command(command) is safe
