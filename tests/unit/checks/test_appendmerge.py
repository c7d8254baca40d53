"""checks/appendmerge: every line each writer appended is in the merge exactly once, in order."""

from __future__ import annotations

import random
from pathlib import Path

from memsync.checks.appendmerge import merge_appends
from tests.conftest import git


def test_both_appended_keeps_ours_then_theirs() -> None:
    assert merge_appends(b"# log\n", b"# log\n- a\n", b"# log\n- b\n") == b"# log\n- a\n- b\n"


def test_one_side_unchanged_takes_the_other_byte_for_byte() -> None:
    assert merge_appends(b"x\n", b"x\n", b"x\ny") == b"x\ny"
    assert merge_appends(b"x\n", b"x\ny", b"x\n") == b"x\ny"
    assert merge_appends(None, b"same\n", b"same\n") == b"same\n"


def test_a_last_line_without_newline_is_not_repeated() -> None:
    assert merge_appends(b"a\nx", b"a\nx\nmine\n", b"a\nx\ntheirs\n") == b"a\nx\nmine\ntheirs\n"


def test_lines_theirs_placed_before_ours_are_not_repeated() -> None:
    """Where git's union repeats lines: theirs is no longer 'base plus lines at the end'."""
    base = b"L\na1\n"
    ours = b"L\na1\na2\n"
    theirs = b"L\nh1\na1\nh2\n"
    merged = merge_appends(base, ours, theirs)
    assert sorted(merged.splitlines()) == sorted([b"L", b"h1", b"a1", b"a2", b"h2"])


def test_git_union_repeats_what_append_keeps_once(tmp_path: Path) -> None:
    """A side that is not 'base plus lines at the end' (an earlier merge gave both sides h0, in
    different places, on an older base): `git merge-file --union` repeats lines, append does not."""
    base, ours, theirs = b"L\n", b"L\nh0\na1\na2\n", b"L\na1\nh0\nh1\n"
    for name, data in (("base", base), ("ours", ours), ("theirs", theirs)):
        (tmp_path / name).write_bytes(data)
    git("merge-file", "--union", "ours", "base", "theirs", cwd=tmp_path)  # git itself, the reference
    union = (tmp_path / "ours").read_bytes().splitlines()
    assert union.count(b"a1") == 2 and union.count(b"h0") == 2
    merged = merge_appends(base, ours, theirs).splitlines()
    assert sorted(merged) == [b"L", b"a1", b"a2", b"h0", b"h1"]


def test_blank_lines_of_both_writers_are_kept() -> None:
    assert merge_appends(b"h\n", b"h\n\n## A\n", b"h\n\n## B\n") == b"h\n\n## A\n\n## B\n"


def test_a_deletion_on_one_side_only_is_kept() -> None:
    assert merge_appends(b"a\nsecret\nb\n", b"a\nb\n", b"a\nsecret\nb\nc\n") == b"a\nb\nc\n"


def test_checkpointing_writers_each_line_exactly_once() -> None:
    """The checkpoint loop of many runs, simulated: each run's side is what it pulled plus its own
    appends; each checkpoint merges it with the hub's file on the base of its previous checkpoint
    (what merge-base finds: the run's last commit, which the hub holds)."""
    rng = random.Random(31)
    for _round in range(40):
        hub = b"# log\n"
        runs: dict[int, tuple[bytes, bytes]] = {}  # run -> (its last checkpoint, its file)
        appended: list[bytes] = []
        for step in range(60):
            run = rng.randrange(6)
            if run not in runs:
                runs[run] = (hub, hub)
            base, mine = runs[run]
            for _ in range(rng.randrange(1, 3)):
                line = f"- run {run} step {step} {rng.random():.6f}\n".encode()
                mine += line
                appended.append(line)
            if rng.random() < 0.5:  # a checkpoint
                hub = merge_appends(base, mine, hub)
                runs[run] = (mine, mine)
            else:
                runs[run] = (base, mine)
        for base, mine in runs.values():  # each run's final exchange
            hub = merge_appends(base, mine, hub)
        lines = hub.splitlines(keepends=True)
        assert lines[0] == b"# log\n"
        assert sorted(lines[1:]) == sorted(appended)
        for run in runs:  # each writer's order
            own = [line for line in lines if line.startswith(f"- run {run} ".encode())]
            assert own == [line for line in appended if line.startswith(f"- run {run} ".encode())]
