"""Tests for memsync.checks.guard: integrity flags and their trailers."""

from __future__ import annotations

import random
from typing import get_args

import pytest

from memsync.checks.guard import (
    Actor,
    FileChange,
    Flag,
    FlagKind,
    integrity_flags,
    survival,
)

KINDS: tuple[FlagKind, ...] = get_args(FlagKind)

# --- helpers --------------------------------------------------------------------------


def text(n_bytes: int, seed: str = "note") -> bytes:
    """Distinct lines of text, exactly ``n_bytes`` long."""
    lines = []
    size = 0
    i = 0
    while size < n_bytes:
        line = f"- {seed} {i}: remembered fact number {i} about the project\n"
        lines.append(line)
        size += len(line)
        i += 1
    return "".join(lines).encode()[:n_bytes]


def kinds(changes: list[FileChange], actor: Actor = "run") -> list[tuple[str, str]]:
    return [(f.kind, f.path) for f in integrity_flags(changes, actor)]


NOTES = b"""# Project notes

## Build
- run `make dev` before the tests; the CI image lacks libfoo
- the staging database is reset every Monday at 06:00 UTC
- never push to release/* directly: open a PR against main

## People
- Ana owns the billing service and prefers async review
- Bo is on call in even weeks; page through the bot, not DMs

## Decisions
- 2024-03-02: we keep SQLite for the agent cache (see ADR 7)
- 2024-04-11: retries are capped at 5 with jitter
- 2024-05-20: summaries are written in English even for German repos

## Open questions
- why does the nightly export sometimes skip the last shard?
- is the rate limit per token or per IP?
"""


# --- the incident ---------------------------------------------------------------------


def test_story4_shrink_flagged_with_exact_trailer() -> None:
    change = FileChange("summary.md", text(7285), text(1509, seed="fresh"))
    flags = integrity_flags([change], "run")
    assert flags == [Flag("shrink", "summary.md", 7285, 1509)]
    assert flags[0].trailer() == "shrink summary.md 7285->1509"


# --- shrink thresholds ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("old", "new", "flagged"),
    [
        (2048, 1024, True),  # exactly half and exactly 1 KiB lost
        (2048, 1025, False),  # lost 1023: just under 1 KiB (and just under half)
        (3000, 1500, True),  # exactly half, well over 1 KiB
        (3000, 1501, False),  # just under half, over 1 KiB
        (3000, 1499, True),  # just over half
        (10_000, 8_976, False),  # lost exactly 1 KiB but only ~10 %
        (1500, 476, True),  # lost exactly 1024, 68 %
        (1500, 477, False),  # lost 1023, 68 %
        (1023, 0, False),  # emptied, but under 1 KiB: not a shrink (see rewrite)
        (1024, 0, True),  # emptied, exactly 1 KiB
    ],
)
def test_shrink_thresholds(old: int, new: int, flagged: bool) -> None:
    # binary content: rewrite never applies, so only the shrink rule is exercised
    change = FileChange("a.bin", b"\0" * old, b"\0" * new)
    expected = [Flag("shrink", "a.bin", old, new)] if flagged else []
    assert integrity_flags([change], "run") == expected


@pytest.mark.parametrize("actor", ["run", "operator", "watch"])
def test_shrink_applies_to_every_actor(actor: Actor) -> None:
    assert kinds([FileChange("n.md", text(4000), text(1000))], actor) == [("shrink", "n.md")]


def test_growth_and_new_files_are_not_flagged() -> None:
    changes = [
        FileChange("grow.md", text(1000), text(9000)),
        FileChange("new.md", None, text(5000)),
        FileChange("same.md", text(5000), text(5000)),
    ]
    assert integrity_flags(changes, "run") == []


# --- delete ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("actor", "created_in_same_run", "flagged"),
    [
        ("run", False, True),
        ("run", True, False),  # the run deleting its own scratch file
        ("operator", False, False),
        ("watch", False, False),
        ("operator", True, False),
    ],
)
def test_delete(actor: Actor, created_in_same_run: bool, flagged: bool) -> None:
    change = FileChange("runs/a.md", b"x", None, created_in_same_run)
    expected = [Flag("delete", "runs/a.md", None, None)] if flagged else []
    assert integrity_flags([change], actor) == expected
    if flagged:
        assert expected[0].trailer() == "delete runs/a.md"


def test_created_in_same_run_is_never_flagged() -> None:
    changes = [
        FileChange("scratch.md", text(8000), text(100), created_in_same_run=True),
        FileChange("scratch2.md", NOTES, text(800, "other"), created_in_same_run=True),
    ]
    assert integrity_flags(changes, "run") == []


def test_unknown_actor_rejected() -> None:
    with pytest.raises(ValueError, match="unknown actor"):
        integrity_flags([], "robot")  # type: ignore[arg-type]


# --- rewrite --------------------------------------------------------------------------


def _honest_edit(old: bytes) -> bytes:
    lines = old.decode().splitlines(keepends=True)
    lines[4] = "- the staging database is reset every Sunday at 06:00 UTC\n"  # fixed a fact
    lines[9] = "- Bo is on call in odd weeks; page through the bot\n"
    lines.insert(14, "- 2024-05-01: the agent cache moved to ~/.cache/agent\n")
    return "".join(lines).encode() + b"\n## Deploys\n- deploys freeze on Fridays after 15:00\n"


FRESH = b"""# Project notes

No notes yet. Starting a fresh file.

## Build
- tests pass with `pytest -q`
- the repo uses ruff for linting

## Open questions
- what does the nightly export do?
"""


@pytest.mark.parametrize(
    ("name", "old", "new", "flagged"),
    [
        ("honest edit", NOTES, _honest_edit(NOTES), False),
        ("append only", NOTES, NOTES + b"\n## More\n- another fact\n", False),
        (
            "reordered sections",
            NOTES,
            b"\n\n".join(reversed(NOTES.split(b"\n\n"))),
            False,
        ),
        ("re-indented, CRLF", NOTES, NOTES.replace(b"\n- ", b"\r\n    - "), False),
        ("replaced from scratch, headings kept", NOTES, FRESH, True),
        ("replaced from scratch, bigger", NOTES, FRESH * 3, True),
        ("emptied small file", NOTES, b"", True),
        ("old under 512 bytes", NOTES[:500], FRESH, False),
        ("old all blank", b"\n" * 600, FRESH, False),
    ],
)
def test_rewrite(name: str, old: bytes, new: bytes, flagged: bool) -> None:
    assert len(NOTES) >= 512
    expected = [Flag("rewrite", "notes.md", None, None)] if flagged else []
    assert integrity_flags([FileChange("notes.md", old, new)], "run") == expected, name


def test_rewrite_trailer() -> None:
    assert Flag("rewrite", "x.md", None, None).trailer() == "rewrite x.md"


def test_shrink_takes_precedence_over_rewrite() -> None:
    old = text(6000)
    assert kinds([FileChange("n.md", old, text(1000, "fresh"))]) == [("shrink", "n.md")]


def test_survival_values() -> None:
    assert survival(NOTES, NOTES) == 1.0
    assert survival(NOTES, b"") == 0.0
    assert survival(b"\n\n", b"anything") == 1.0
    assert 0.75 < survival(NOTES, _honest_edit(NOTES)) < 1.0  # 2 of 14 lines edited
    assert survival(NOTES, FRESH) < 0.25
    # multiset: a line present five times in old but once in new survives once
    assert survival(b"aaaa\n" * 5, b"aaaa\n") == pytest.approx(0.2)
    assert survival(b"aaaa\n" * 2 + b"bbbb\n" * 2, b"aaaa\n" * 9) == pytest.approx(0.5)
    assert survival(b"aaaa\nbbbb\n", b"  aaaa\r\nbbbb \n") == 1.0  # white space ignored
    # weighted by bytes: losing the long line matters more than losing the short one
    assert survival(b"x\n" + b"y" * 99 + b"\n", b"x\n") == pytest.approx(0.01)


def test_rewrite_boundary_around_quarter() -> None:
    # 100 old lines of equal length; keep k of them, replace the rest
    old_lines = [f"fact {i:04d} is worth keeping around".encode() for i in range(100)]
    old = b"\n".join(old_lines) + b"\n"

    def keep(k: int) -> bytes:
        new_lines = old_lines[:k] + [f"new {i:04d} written by the agent....".encode() for i in range(100 - k)]
        return b"\n".join(new_lines) + b"\n"

    assert kinds([FileChange("n.md", old, keep(24))]) == [("rewrite", "n.md")]
    assert kinds([FileChange("n.md", old, keep(25))]) == []


# --- binary ---------------------------------------------------------------------------


def test_binary_only_checked_for_shrink_and_delete() -> None:
    blob_a = b"\x89PNG\0" + bytes(range(256)) * 8
    blob_b = b"\x89PNG\0" + bytes(reversed(range(256))) * 8
    nul_late = text(9000) + b"\0"
    changes = [
        # totally different, same size: no rewrite
        FileChange("img.png", blob_a, blob_b),
        FileChange("old-text-new-bin.md", NOTES, b"\0" + FRESH),  # binary on one side
        FileChange("shrunk.png", blob_a * 4, blob_b),  # shrink still applies
        FileChange("gone.png", blob_a, None),  # delete still applies
        # NUL only after the first 8 KiB: text, so rewrite applies
        FileChange("late.txt", nul_late, text(9000, "zzz") + b"\0"),
    ]
    assert kinds(changes) == [
        ("delete", "gone.png"),
        ("rewrite", "late.txt"),
        ("shrink", "shrunk.png"),
    ]


def test_result_ordered_by_path() -> None:
    changes = [
        FileChange("z.md", b"x", None),
        FileChange("a/b.md", text(5000), b""),
        FileChange("m.md", b"y", None),
    ]
    assert [f.path for f in integrity_flags(changes, "run")] == [
        "a/b.md",
        "m.md",
        "z.md",
    ]


# --- trailers -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "flag",
    [
        Flag("shrink", "summary.md", 7285, 1509),
        Flag("delete", "runs/a.md", None, None),
        Flag("rewrite", "x.md", None, None),
        Flag("shrink", "notes with spaces/my file.md", 4096, 0),
        Flag("delete", "Notizen/Übersicht – März.md", None, None),
        Flag("rewrite", "日本語/メモ.md", None, None),
        Flag("rewrite", "emoji 🧠.md", 10, 2),
        Flag("delete", "report 12->34", None, None),  # looks like sizes
        Flag("shrink", "report 12->34", 5000, 10),
        Flag("delete", '"quoted".md', None, None),
        Flag("delete", " leading space.md", None, None),
        Flag("delete", "trailing space.md ", None, None),
        Flag("delete", "line\nbreak.md", None, None),
        Flag("delete", "tab\there.md", None, None),
        Flag("delete", 'back\\slash "and" quotes.md', None, None),
        Flag("delete", "surrogate-\udcff.md", None, None),
        Flag("delete", "nel\x85and\u2028sep.md", None, None),
        Flag("delete", "a -> b.md", None, None),
        Flag("delete", "12->34", None, None),
    ],
)
def test_trailer_round_trip(flag: Flag) -> None:
    value = flag.trailer()
    assert len(value.splitlines()) == 1
    value.encode("utf-8")  # writable into a commit message
    assert Flag.parse(value) == flag
    assert Flag.parse(f"  {value}  ") == flag  # git may leave surrounding white space


def test_trailer_round_trip_fuzz() -> None:
    rng = random.Random(4)
    alphabet = ' "\\\n\t\r->0123456789ab/ü🧠\u2028\x85\udcff\u3000'
    for _ in range(3000):
        path = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 10)))
        sizes = (rng.randint(0, 9999), rng.randint(0, 9999)) if rng.random() < 0.5 else None
        flag = Flag(rng.choice(KINDS), path, *(sizes or (None, None)))
        value = flag.trailer()
        assert len(value.splitlines()) == 1, value
        assert Flag.parse(value) == flag, value


@pytest.mark.parametrize(
    ("trailer", "expected"),
    [
        ("shrink summary.md 7285->1509", Flag("shrink", "summary.md", 7285, 1509)),
        # sizes are optional
        ("shrink summary.md", Flag("shrink", "summary.md", None, None)),
        ("delete my notes/a b.md", Flag("delete", "my notes/a b.md", None, None)),
        ('delete "a\\nb.md"', Flag("delete", "a\nb.md", None, None)),
        ('shrink "x 1->2" 10->3', Flag("shrink", "x 1->2", 10, 3)),
    ],
)
def test_trailer_parse(trailer: str, expected: Flag) -> None:
    assert Flag.parse(trailer) == expected


def test_spaces_and_unicode_are_written_bare() -> None:
    assert Flag("delete", "my notes/Übersicht.md", None, None).trailer() == "delete my notes/Übersicht.md"


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "shrink",
        "shrink ",
        "grow a.md",
        "Shrink a.md",
        'delete "unterminated',
        'delete "a" junk',
    ],
)
def test_trailer_parse_rejects(bad: str) -> None:
    with pytest.raises(ValueError):
        Flag.parse(bad)


@pytest.mark.parametrize(
    ("kind", "path", "old", "new"),
    [
        ("grow", "a", None, None),
        ("delete", "", None, None),
        ("shrink", "a", 5, None),
        ("shrink", "a", -1, 0),
    ],
)
def test_flag_validates(kind: str, path: str, old: int | None, new: int | None) -> None:
    with pytest.raises(ValueError):
        Flag(kind, path, old, new)  # type: ignore[arg-type]
