"""`--json` is one schema: every command's JSON is validated against the schema the README
documents (exit codes as numbers, times as RFC 3339 UTC, cached remote values marked)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from tests.conftest import git, memsync_cmd

TIME = {"type": "string", "pattern": r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$"}
SHORT = {"type": "string", "pattern": "^[0-9a-f]{8}$"}
OID = {"type": "string", "pattern": "^[0-9a-f]{40}$"}
EXIT = {"type": ["integer", "null"]}


def _obj(props: dict[str, Any], optional: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": [k for k in props if k not in optional],
            "additionalProperties": False}


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    return {"anyOf": [schema, {"type": "null"}]}


STATUS = _obj({
    "name": {"type": "string"}, "type": {"enum": ["memory", "artifact"]}, "root": {"type": "string"},
    "remote": {"type": "string"}, "branch": {"type": "string"},
    "remote_version": _nullable(_obj({"oid": OID, "files": {"type": "integer"}, "size": {"type": "integer"},
                                      "time": TIME})),
    "last_run": _nullable(_obj({"run_id": {"type": "string"}, "version": SHORT, "time": TIME, "exit_code": EXIT})),
    "local_version": _nullable(OID), "ahead": {"type": "integer"}, "behind": {"type": "integer"},
    "uncommitted": {"type": "array", "items": _obj({"path": {"type": "string"},
                                                    "kind": {"enum": ["added", "modified", "deleted"]}})},
    "conflicts": {"type": "array", "items": {"type": "string"}},
    "to_fold": {"type": "array", "items": _obj({"file": {"type": "string"}, "paths": {"type": "array",
                                                "items": {"type": "string"}},
                                                "versions": {"type": "integer"}, "how": {"type": "string"}})},
    "remote_error": {"type": ["string", "null"]}, "remote_cached": {"type": "boolean"},
    "running": _nullable(_obj({"run_id": {"type": "string"}, "pid": {"type": "integer"},
                               "started": _nullable(TIME)})),
    "too_large": {"type": "array", "items": {"type": "string"}},
    "ignored": {"type": "array", "items": {"type": "string"}},
    "redactions": {"type": "array", "items": _obj({"state": {"enum": ["refused", "followed"]}, "version": OID,
                                                   "detail": {"type": "string"},
                                                   "ref": {"type": ["string", "null"]}})},
    "proposals": {"type": "array", "items": {"type": "string"}},
})
LIST = _obj({"remote": {"type": "string"}, "memories": {"type": "array", "items": _obj({
    "name": {"type": "string"}, "type": {"enum": ["memory", "artifact"]}, "version": SHORT,
    "files": {"type": "integer"}, "size": {"type": "integer"}, "updated": TIME,
    "last_run": {"type": ["string", "null"]}, "last_exit_code": EXIT,
    "error": {"type": ["string", "null"]}}, optional=("error",))},
    "more_after": {"type": ["string", "null"]}})
FILE_STATE = _obj({"path": {"type": "string"}, "state": {"enum": ["added", "modified", "deleted"]},
                   "size": {"type": ["integer", "null"]}, "sha256": {"type": ["string", "null"]}})
STRINGS = {"type": "array", "items": {"type": "string"}}
LOG = _obj({"memory": {"type": "string"}, "path": {"type": ["string", "null"]}, "head": _nullable(OID),
            "versions": {"type": "array", "items": _obj({
                "version": SHORT, "oid": OID, "time": TIME, "actor": {"enum": ["run", "operator", "watch", "git"]},
                "run_id": {"type": ["string", "null"]}, "exit_code": EXIT,
                "checkpoint": {"type": ["integer", "null"]}, "merge": {"type": "boolean"},
                "end": {"type": "boolean"}, "subject": {"type": "string"},
                "files_changed": {"type": "integer"}, "bytes_added": {"type": "integer"},
                "bytes_removed": {"type": "integer"}, "flags": STRINGS, "policies": STRINGS, "copies": STRINGS,
                "restored_from": STRINGS, "reverted": STRINGS, "file": _nullable(FILE_STATE),
                "accepted_proposal": {"type": ["string", "null"]}})}})
GC = _obj({"memory": {"type": "string"}, "hub": {"type": "string"}, "repacked": {"type": "array", "items": _obj({
    "what": {"type": "string"}, "objects": {"type": "integer"}, "packs_before": {"type": "integer"},
    "loose_before": {"type": "integer"}, "seconds": {"type": "number"}})}})


def _json(*args: str, cwd: Path, code: int = 0) -> Any:
    proc = memsync_cmd(*args, cwd=cwd)
    assert proc.returncode == code, proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.slow
def test_every_json_output_matches_its_schema(memory: Path, tmp_path: Path) -> None:
    assert memsync_cmd("run", "--run-id", "failing", "--", "sh", "-c", "echo x > x.md; exit 5",
                       cwd=memory).returncode == 5
    (memory / "draft.md").write_text("draft\n")
    status = _json("status", "--json", cwd=memory)
    jsonschema.validate(status, STATUS)
    assert status["last_run"]["exit_code"] == 5 and status["remote_cached"] is False
    log = _json("log", "--json", cwd=memory)
    jsonschema.validate(log, LOG)
    assert [v["exit_code"] for v in log["versions"]][:1] == [5]
    jsonschema.validate(_json("log", "x.md", "--json", cwd=memory), LOG)
    listing = _json("list", "--json", cwd=tmp_path)
    jsonschema.validate(listing, LIST)
    assert (listing["memories"][0]["last_run"], listing["memories"][0]["last_exit_code"]) == ("failing", 5)
    jsonschema.validate(_json("gc", "--json", cwd=memory), GC)


@pytest.mark.slow
def test_status_says_when_remote_values_are_cached(memory: Path, tmp_path: Path) -> None:
    gone = tmp_path / "gone.git"
    git("init", "-q", "--bare", str(gone), cwd=tmp_path)
    assert memsync_cmd("push", "--remote", str(gone), cwd=memory).returncode == 0
    shutil.rmtree(gone)
    status = _json("status", "--json", "--remote", str(gone), cwd=memory, code=4)
    jsonschema.validate(status, STATUS)
    assert status["remote_error"] and status["remote_cached"] is True
    assert status["remote_version"] is not None, "the last fetched version, marked as cached"
    text = memsync_cmd("status", "--remote", str(gone), cwd=memory)
    assert text.returncode == 4 and "as of the last successful fetch" in text.stdout
    # a hub never reached has nothing cached: another hub's version never stands in for it
    never = _json("status", "--json", "--remote", str(tmp_path / "never.git"), cwd=memory, code=4)
    jsonschema.validate(never, STATUS)
    assert never["remote_error"] and never["remote_cached"] is False and never["remote_version"] is None


@pytest.mark.slow
def test_times_are_one_format_in_text_too(memory: Path, tmp_path: Path) -> None:
    updated = next(line for line in memsync_cmd("status", cwd=memory).stdout.splitlines()
                   if line.startswith("Updated: "))
    assert re.fullmatch(r"Updated: \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", updated)
    row = memsync_cmd("list", cwd=tmp_path).stdout.splitlines()[1]
    assert re.search(r"  \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ  ", row), row
