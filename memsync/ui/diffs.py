"""A version's patches as lines for a template to show: each line with its kind (added,
removed, hunk header, context), decoded for display, long files cut."""

from __future__ import annotations

from memsync.git.history import FilePatch
from memsync.util.records import field, recordclass

MAX_LINES = 2000  # per file; the rest is counted, not shown


@recordclass
class ShownPatch:
    path: str
    kind: str
    added: int
    deleted: int
    binary: bool
    lines: list[tuple[str, str]] = field(default_factory=list)  # (css class, text)
    cut: int = 0


def render_patches(patches: list[FilePatch]) -> list[ShownPatch]:
    shown = []
    for p in patches:
        s = ShownPatch(p.path, p.kind, p.added, p.deleted, p.binary)
        if not p.binary:
            text = p.data.decode("utf-8", errors="replace").split("\n")
            start = next((i for i, line in enumerate(text) if line.startswith("@@")), len(text))
            body = text[start:]  # git's header lines (diff --git, index, ---, +++) come before the first hunk
            if body and body[-1] == "":
                body.pop()
            for line in body[:MAX_LINES]:
                kind = ("add" if line.startswith("+") else "del" if line.startswith("-")
                        else "hunk" if line.startswith("@@") else "ctx")
                s.lines.append((kind, line))
            s.cut = max(len(body) - MAX_LINES, 0)
        shown.append(s)
    return shown
