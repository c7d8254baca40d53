"""The picture of a memory's size over versions: points computed here, drawn as SVG by a
template (no script needed to see it).

The sizes follow the first-parent chain back from a version: the newest point's size comes from
`tree_stats` (cached per version), each older one from its child's by the bytes that child added
and removed (summaries.py keeps those per version), so a window of N versions costs N summaries,
not N tree walks. A chosen file's size is read at each point."""

from __future__ import annotations

from memsync.git import history
from memsync.git.repo import GitRepo
from memsync.git.trailers import every, parse
from memsync.ui import views
from memsync.util.records import field, recordclass

WIDTH, HEIGHT, PAD = 760, 180, 36


@recordclass
class Point:
    oid: str
    x: float
    y: float
    size: int
    shrink: str | None  # the flag, when the integrity guard flagged a shrink here
    fy: float | None = None  # the chosen file's y (None: absent at this version)
    fsize: int | None = None


@recordclass
class Chart:
    points: list[Point] = field(default_factory=list)
    path: str | None = None  # the chosen file
    top: int = 0  # the largest size drawn (axis label)
    line: str = ""  # "x,y x,y ..." of the memory's size
    file_line: str = ""

    @property
    def width(self) -> int:
        return WIDTH

    @property
    def height(self) -> int:
        return HEIGHT


def chain(git: GitRepo, start: str, n: int) -> list[str]:
    """Up to `n` versions along the first-parent chain from `start`, newest first."""
    found: list[str] = []
    oid: str | None = start
    while oid is not None and len(found) < n:
        found.append(oid)
        oid = history.first_parent(git, oid)
    return found


def size_chart(git: GitRepo, start: str, n: int, path: str | None = None) -> Chart:
    if path:
        views.check_path(path)
    oids = chain(git, start, n)
    sizes: list[int] = []
    shrinks: list[str | None] = []
    _, size = git.tree_stats(oids[0])
    cache = views._summaries()
    try:
        for oid in oids:
            sizes.append(size)
            s = views.summary(git, oid, cache)
            size = size - s.bytes_added + s.bytes_removed
            flags = every(parse(git.commit_info(oid).message), "Memsync-Flag")
            shrinks.append(next((f for f in flags if f.startswith("shrink")), None))
    finally:
        cache.close()
    fsizes: list[int | None] = []
    if path:
        for oid in oids:
            blob = history.blob_at(git, oid, path)
            fsizes.append(None if blob is None else len(blob[0]))
    return _draw(oids[::-1], sizes[::-1], shrinks[::-1], fsizes[::-1], path)


def _draw(oids: list[str], sizes: list[int], shrinks: list[str | None], fsizes: list[int | None],
          path: str | None) -> Chart:
    top = max([*sizes, *(f for f in fsizes if f is not None), 1])
    span = max(len(oids) - 1, 1)

    def y(v: int) -> float:
        return round(HEIGHT - PAD - (HEIGHT - 2 * PAD) * v / top, 1)

    chart = Chart(path=path, top=top)
    for i, oid in enumerate(oids):
        x = round(PAD + (WIDTH - 2 * PAD) * i / span, 1)
        p = Point(oid, x, y(sizes[i]), sizes[i], shrinks[i])
        if fsizes and fsizes[i] is not None:
            p.fsize = fsizes[i]
            p.fy = y(fsizes[i] or 0)
        chart.points.append(p)
    chart.line = " ".join(f"{p.x},{p.y}" for p in chart.points)
    chart.file_line = " ".join(f"{p.x},{p.fy}" for p in chart.points if p.fy is not None)
    return chart
