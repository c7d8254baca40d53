"""sync/redaction_log: a refused redaction is remembered only while the hub holds it and only as
memsync wrote it (the file is in .git, which anyone writing the clone can edit); kept histories
are listed and dropped."""

from __future__ import annotations

import json
from pathlib import Path

from memsync.core.memory import open_memory
from memsync.sync import redaction_log
from memsync.sync.redaction_log import Incoming


def _incoming(record: str, **changes: object) -> Incoming:
    fields: dict[str, object] = dict(record=record, old_head=record, new_head="f" * 40, versions=2, replayed=0,
                                     files=[f"notes/{i}.md" for i in range(7)], bytes_removed=40)
    fields.update(changes)
    return Incoming(**fields)  # type: ignore[arg-type]


def test_a_refusal_is_noted_while_the_hub_holds_it(memory: Path) -> None:
    mem = open_memory(memory)
    tip = mem.git.ref_oid(mem.tracking_ref)
    assert tip is not None
    redaction_log.note_refused(mem, _incoming(tip))
    found = redaction_log.refused(mem)
    assert found is not None and found.record == tip
    assert found.summary().startswith("7 file(s) (notes/0.md, ") and "and 2 more" in found.summary()
    assert [n.state for n in redaction_log.notes(mem)] == ["refused"]
    redaction_log.note_refused(mem, _incoming("e" * 40))  # a record the hub no longer holds
    assert redaction_log.refused(mem) is None
    redaction_log.clear_refused(mem)
    assert redaction_log.notes(mem) == []


def test_an_edited_note_is_not_trusted(memory: Path) -> None:
    mem = open_memory(memory)
    tip = mem.git.ref_oid(mem.tracking_ref) or ""
    path = mem.git.git_dir / redaction_log.REFUSED_FILE
    for bad in ({"record": tip[:8]}, {"versions": "2"}, {"files": [1, 2]}, {"unknown": 1}):
        data = {**json_of(_incoming(tip)), **bad}
        path.write_text(json.dumps(data))
        assert redaction_log.refused(mem) is None, bad
    path.write_text("{not json")
    assert redaction_log.refused(mem) is None


def json_of(incoming: Incoming) -> dict[str, object]:
    from memsync.util.records import asdict

    return dict(asdict(incoming))


def test_kept_histories_are_listed_and_dropped(memory: Path) -> None:
    mem = open_memory(memory)
    head = mem.git.head_oid() or ""
    ref = redaction_log.keep_backup(mem, head)
    assert ref.startswith(redaction_log.BACKUP_PREFIX) and ref.endswith(head[:8])
    assert redaction_log.backups(mem) == [(ref, head)]
    assert [n.state for n in redaction_log.notes(mem)] == ["followed"]
    with mem.locked():
        assert redaction_log.drop_backups(mem) == [ref]
    assert redaction_log.backups(mem) == []
