"""A tiny scripted "agent" that follows the memory contract (`memsync contract`).

It reads summary.md, appends its notes to runs/$MEMSYNC_RUN_ID.md, adds a line to log.md and
publishes an updated summary by writing a hidden temp file and renaming it.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

memory = Path(os.environ["MEMSYNC_MEMORY_DIR"])
run_id = os.environ["MEMSYNC_RUN_ID"]
topic = sys.argv[1] if len(sys.argv) > 1 else "general"

summary = (memory / "summary.md").read_text(encoding="utf-8")
known = summary.count("\n- ")
print(f"[agent {run_id}] read summary.md ({len(summary)} bytes, {known} facts); researching {topic!r}")
time.sleep(0.5)  # "thinking"

runs = memory / "runs"
runs.mkdir(exist_ok=True)
(runs / f"{run_id}.md").write_text(
    f"# Run {run_id}\n\n- Studied {topic}.\n- Found {known} facts already in summary.md.\n", encoding="utf-8")
with open(memory / "log.md", "a", encoding="utf-8") as log:
    log.write(f"- {run_id}: studied {topic}\n")

fact = f"- {topic}: noted by run {run_id}.\n"
tmp = memory / ".tmp.summary.md"
tmp.write_text(summary.replace("## Open questions", fact + "\n## Open questions", 1), encoding="utf-8")
os.replace(tmp, memory / "summary.md")
print(f"[agent {run_id}] wrote runs/{run_id}.md and published summary.md")
