"""The memory contract: instructions an agent follows so that its notes survive and merge."""

from __future__ import annotations

CONTRACT = """\
## Memory

Your long-term memory is the directory {path}. It is saved after this run (and at checkpoints
during it) and the next run, in a fresh sandbox, starts with it. Its history is kept: nothing you
write is lost, but a careless overwrite is noticed and flagged.

- Read `summary.md` there before you start. If a search of the memory finds nothing, list the
  directory before concluding that it is empty: a failed search is not an empty memory.
- Append what you learned to `runs/$MEMSYNC_RUN_ID.md` (one file per run: never edit another
  run's file). The run id is in the environment variable MEMSYNC_RUN_ID.
- To update `summary.md`, edit it in place to add or correct what changed; never replace it
  with a shorter text written from scratch. Publish a rewritten summary atomically: write it
  to a hidden temp file in the same folder (`.tmp.summary.md`), then rename it over
  `summary.md`. Files named `.tmp.*`, `*.tmp` and editor swap files are never saved.
- Lines appended to `log.md` merge line by line when several runs write at once.
- Scratch work goes outside the memory (e.g. /tmp); keep the memory for what a later run needs.
- When another run changed a file at the same time as you, your version stays at the path and
  theirs is added to one file beside it: `summary.md` -> `summary.conflicts.md` (any other
  name: `NAME.conflicts.md`). Each entry there is one version, with the run it came from. Fold
  what matters into the file, then delete the whole `.conflicts.md` file (a version another run
  adds meanwhile is kept for the next run). Older memories may also hold
  `NAME.conflict-<run>-<time>.EXT` copies: fold and delete them the same way.
- Never write secrets (API keys, tokens, passwords) into the memory.
- Some changes wait for review. A run started as a proposal (`memsync run --propose`, or a
  consolidation: MEMSYNC_CONSOLIDATE=1 in your environment), and your edits to the files the
  operator marked for review, are saved as usual but stay on the hub as a proposal
  (`proposals/<memory>/$MEMSYNC_RUN_ID`) until a person accepts them: the next run does not see
  them before that. Do not try to accept or reject your own proposal; inside a run both refuse.
- When consolidating, fold notes together instead of dropping them: the reviewer is shown every
  line of the current memory that appears nowhere in your result.
"""


def render(path: str | None) -> str:
    return CONTRACT.format(path=f"`{path}`" if path else "`$MEMSYNC_MEMORY_DIR`")
