"""Issue 14's targets, judged from a bench run's JSON (bench/results/latest.json), and the README's
benchmark table rendered from the same JSON.

    python bench/targets.py                  # print the targets table of latest.json
    python bench/targets.py --readme         # rewrite README.md between the bench markers

Everything here reads the JSON only, so the README is regenerated from recorded results and an
older results file (one without some items) still renders, with "-" where nothing was measured.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
README = HERE.parent / "docs" / "PERFORMANCE.md"
LATEST = HERE / "results" / "latest.json"
START, END = "<!-- bench:start -->", "<!-- bench:end -->"
TRANSPORTS = ("file", "git://")
JUDGED = ("met/NOT met is judged on memsync cold, what a fresh sandbox gets (nothing there starts "
          "`memsync serve`), on every transport measured; the served column is judged apart")


@dataclass(frozen=True)
class Target:
    operation: str  # what memsync does
    reference: str  # what git does, as the user would type it
    where: str  # "10k", "history" or "100k": which set-up the figures come from
    item: str  # the bench item
    git: str  # the reference candidate; {t} = transport
    limit: float
    rss: bool = False  # compare peak RSS instead of wall time


TARGETS = (
    Target("push 10 changed", "git add -A && git commit && git push", "10k", "push 10 changed", "git {t}", 1.3),
    Target("push, no change", "git fetch -q && git status --porcelain -b", "10k", "push, no change",
           "git fetch+status {t}", 1.5),
    Target("status", "git fetch -q && git status --porcelain -b", "10k", "status", "git {t}", 1.5),
    Target("pull 10 changed", "git pull --ff-only", "10k", "pull 10 changed", "git {t}", 1.5),
    Target("run -- true", "git pull; true; git add/commit/push", "10k", "run -- true", "git {t}", 1.5),
    Target("log -n 20", "git log -n 20 --stat", "history", "log -n 20", "git log --stat", 1.5),
    Target("clone", "git clone --depth 1", "history", "clone", "git --depth 1 {t}", 1.0),
    Target("peak RSS of clone", "git clone", "100k", "clone", "git {t}", 1.0, rss=True),
)


@dataclass
class Figure:
    transport: str  # "" when the item has none (log)
    memsync: float  # ms, or MB for RSS
    git: float

    @property
    def ratio(self) -> float:
        return self.memsync / self.git if self.git else math.inf


RSS_FLOORED = ("peak RSS not usable in this run: commands were spawned by the bench itself, whose "
               "own peak RSS is the floor of every figure")


@dataclass
class TargetRow:
    target: Target
    at: str
    cold: list[Figure]
    served: list[Figure]
    unusable: bool = False  # the run's figures cannot judge this target (RSS_FLOORED)

    @property
    def judged(self) -> list[Figure]:
        """A sandbox runs memsync cold: the target is met only there."""
        return self.cold

    @property
    def verdict(self) -> str:
        return self._verdict(self.cold)

    @property
    def served_verdict(self) -> str:
        """For an operator who keeps `memsync serve` running (a laptop, a long-lived CI runner)."""
        return self._verdict(self.served)

    def _verdict(self, found: list[Figure]) -> str:
        if not found or self.unusable:
            return "-"
        return "met" if all(f.ratio <= self.target.limit for f in found) else "NOT met"

    def as_json(self) -> dict[str, Any]:
        def figs(found: list[Figure]) -> list[dict[str, Any]]:
            return [{"transport": f.transport or None, "memsync": round(f.memsync, 1), "git": round(f.git, 1),
                     "ratio": round(f.ratio, 3)} for f in found]
        return {"operation": self.target.operation, "reference": self.target.reference, "at": self.at,
                "unit": "MB" if self.target.rss else "ms", "limit": self.target.limit,
                "cold": figs(self.cold), "served": figs(self.served), "verdict": self.verdict,
                "served_verdict": self.served_verdict, "judged_on": "cold"}


def _sizes(doc: dict[str, Any], item: str) -> list[int]:
    return sorted(int(k) for k, items in doc.get("timings", {}).items() if k.isdigit() and item in items)


def _pick(doc: dict[str, Any], t: Target) -> tuple[str | None, str]:
    """The timings scope a target reads and how to describe it."""
    if t.where == "history":
        info = doc.get("figures", {}).get("history")
        if not isinstance(info, dict) or "history" not in doc.get("timings", {}):
            return None, "history not in this run"
        at = f"{info['files']:,} files, {info['versions']:,} versions"
        return "history", at if info["versions"] == 5_000 else f"{at} (target: 5,000)"
    want = 10_000 if t.where == "10k" else 100_000
    sizes = _sizes(doc, t.item)
    if not sizes:
        return None, "not in this run"
    size = max(sizes) if t.where == "100k" else min(sizes, key=lambda n: abs(math.log(n / want)))
    at = f"{size:,} files"
    return str(size), at if size == want else f"{at} (target: {want:,})"


def target_rows(doc: dict[str, Any]) -> list[TargetRow]:
    rows = []
    for t in TARGETS:
        scope, at = _pick(doc, t)
        found: dict[str, dict[str, Any]] = doc["timings"][scope][t.item] if scope else {}
        key = "peak_rss_mb" if t.rss else "median_s"
        scale = 1.0 if t.rss else 1000.0
        cold: list[Figure] = []
        served: list[Figure] = []
        transports = ("",) if "memsync" in found else TRANSPORTS
        for tr in transports:
            suffix = f" {tr}" if tr else ""
            git = found.get(t.git.format(t=tr).strip())
            if git is None:
                continue
            # served, the work runs in a worker forked by the server: neither the client's nor the
            # server's own peak RSS is that worker's, so memory is judged on the cold command only
            variants = (("memsync", cold),) if t.rss else (("memsync", cold), ("memsync served", served))
            for name, into in variants:
                mine = found.get(f"{name}{suffix}")
                if mine is not None:
                    into.append(Figure(tr, mine[key] * scale, git[key] * scale))
        if scope and not cold and not served:
            at += ": not measured in this run"
        unusable = t.rss and doc.get("rss_method") != "spawner"
        if unusable:
            at += " (RSS floored: see below)"
        rows.append(TargetRow(t, at, cold, served, unusable))
    return rows


def _ratios(found: list[Figure]) -> str:
    if not found:
        return "-"
    return ", ".join(f"{f.transport} {f.ratio:.2f}x" if f.transport else f"{f.ratio:.2f}x" for f in found)


def console_table(rows: list[TargetRow], served_note: str = "") -> str:
    """The printed table (one row per target)."""
    headers = ["target", "vs git", "at", "memsync cold", "cold", "memsync served", "served", "limit"]
    data = [[r.target.operation, r.target.reference, r.at, _ratios(r.cold), r.verdict, _ratios(r.served),
             r.served_verdict, f"<={r.target.limit:.1f}x" + (" (RSS)" if r.target.rss else "")] for r in rows]
    widths = [max(len(h), *(len(d[i]) for d in data)) for i, h in enumerate(headers)]
    lines = [f"issue 14 targets ({JUDGED}{'; ' + served_note if served_note else ''})",
             "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip(),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.ljust(w) for c, w in zip(d, widths, strict=True)).rstrip() for d in data]
    if any(r.unusable for r in rows):
        lines.append(RSS_FLOORED)
    return "\n".join(lines)


# -- the README table -----------------------------------------------------------------------------
def _amount(value: float, rss: bool) -> str:
    if rss:
        return f"{value:.0f} MB"
    return f"{value / 1000:.2f} s" if value >= 1000 else f"{value:.0f} ms"


def _cell(found: list[Figure], rss: bool) -> str:
    if not found:
        return "-"
    first, rest = found[0], found[1:]
    text = f"{_amount(first.memsync, rss)}, {first.ratio:.2f}x"
    if rest:
        text += " (" + ", ".join(f"{f.transport} {f.ratio:.2f}x" for f in rest) + ")"
    return text


def _median_ms(doc: dict[str, Any], scope: str, item: str, cand: str) -> float | None:
    found = doc.get("timings", {}).get(scope, {}).get(item, {}).get(cand)
    return found["median_s"] * 1000 if found else None


def _ms(value: float | None) -> str:
    return "-" if value is None else _amount(value, False)


def _shown(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(HERE.parent))
    except ValueError:
        return str(path)


def markdown(doc: dict[str, Any], results: Path = LATEST) -> str:
    rows = target_rows(doc)
    out = ["memsync's median and its ratio to git's median in the same run (the embedded hub, `file://`",
           "for git; other transports' ratios in brackets), cold and served side by side. **Cold** is what",
           "a fresh sandbox gets: every command starts a new Python (nothing there starts `memsync serve`);",
           "a target is met only there. **Served** is what an operator gets who keeps `memsync serve`",
           "running (a laptop, a long-lived CI runner) and sets `MEMSYNC_SERVER`.",
           "",
           "| operation | vs | at | git CLI | memsync cold | cold | memsync served | served | target |",
           "|---|---|---|---:|---:|---|---:|---|---|"]
    for r in rows:
        found = r.cold or r.served
        git = _amount(found[0].git, r.target.rss) if found else "-"
        out.append(f"| {r.target.operation} | `{r.target.reference}` | {r.at} | {git} | {_cell(r.cold, r.target.rss)} "
                   f"| {r.verdict} | {_cell(r.served, r.target.rss)} | {r.served_verdict} "
                   f"| <= {r.target.limit:.1f}x |")
    out += ["", "Other figures of the same run:", "",
            "| operation | memsync | git CLI | snapshot |", "|---|---:|---:|---:|"]
    for size in _sizes(doc, "push 10 changed"):
        if size >= 10_000:
            sc = str(size)
            out.append(f"| push 10 changed files, {size:,}-file memory | "
                       f"{_ms(_median_ms(doc, sc, 'push 10 changed', 'memsync file'))} | "
                       f"{_ms(_median_ms(doc, sc, 'push 10 changed', 'git file'))} | "
                       f"{_ms(_median_ms(doc, sc, 'push 10 changed', 'snapshot'))} |")
    for size in _sizes(doc, "clone"):
        if size == 10_000:
            out.append(f"| clone, {size:,} files, one version "
                       f"| {_ms(_median_ms(doc, '10000', 'clone', 'memsync file'))} "
                       f"| {_ms(_median_ms(doc, '10000', 'clone', 'git file'))} "
                       f"| {_ms(_median_ms(doc, '10000', 'clone', 'snapshot'))} |")
    hist = doc.get("timings", {}).get("history", {}).get("clone", {})
    if "git full file" in hist:
        out.append(f"| clone at {doc['figures']['history']['versions']:,} versions: full `git clone` | | "
                   f"{_ms(hist['git full file']['median_s'] * 1000)} | |")
    sent = doc.get("figures", {}).get("bytes sent")
    if isinstance(sent, dict):
        out.append(f"| bytes sent for 10 changed files in a {sent['memory_mb']:.0f} MB memory | "
                   f"{sent['memsync'] / 1000:.0f} KB | {sent['git'] / 1000:.0f} KB "
                   f"| {sent['snapshot'] / 1e6:.0f} MB |")
    sizes = _sizes(doc, "push 10 changed")
    if sizes and max(sizes) >= 100_000:
        sc = str(max(sizes))
        push = doc["timings"][sc]["push 10 changed"]
        clone = doc["timings"][sc].get("clone", {})
        if "memsync file" in push and "memsync file" in clone:
            out.append(f"| peak RSS, push / clone at {max(sizes):,} files "
                       f"| {push['memsync file']['peak_rss_mb']:.0f} / "
                       f"{clone['memsync file']['peak_rss_mb']:.0f} MB | {push['git file']['peak_rss_mb']:.0f} / "
                       f"{clone['git file']['peak_rss_mb']:.0f} MB"
                       f"{' (RSS floored)' if doc.get('rss_method') != 'spawner' else ''} | |")
    start = doc.get("timings", {}).get("once", {}).get("start-up", {})
    if "memsync --version" in start and "import pygit2" in start:
        r = start["memsync --version"]["median_s"] / start["import pygit2"]["median_s"]
        out.append(f"| `memsync --version` vs `python -c \"import pygit2\"` | {r:.2f}x | | |")
    if any(r.unusable for r in rows):
        out += ["", f"RSS floored: {RSS_FLOORED} (fixed since: bench/spawner.py)."]
    m = doc.get("machine", {})
    argv = " ".join(doc.get("argv", []))
    out += ["", f"Machine: {m.get('cpus')} CPUs, Python {m.get('python')}, {m.get('git')}; run of "
                f"{doc.get('when')} (`bench/bench.py{' ' + argv if argv else ''}`, {doc.get('elapsed_s', 0):.0f} s).\n"
                f"Regenerated from `{_shown(results)}` by `python bench/bench.py --readme`."]
    return "\n".join(out)


def rewrite_readme(results: Path = LATEST, readme: Path = README) -> None:
    import json

    doc = json.loads(results.read_text(encoding="utf-8"))
    text = readme.read_text(encoding="utf-8")
    pattern = re.compile(re.escape(START) + r".*?" + re.escape(END), re.S)
    if len(pattern.findall(text)) != 1:
        raise SystemExit(f"{readme}: expected one {START} ... {END} block")
    new = pattern.sub(lambda _m: f"{START}\n{markdown(doc, results)}\n{END}", text)
    readme.write_text(new, encoding="utf-8")
    print(f"{readme}: benchmark table rewritten from {results}")


def main(argv: list[str] | None = None) -> int:
    import json

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", type=Path, default=LATEST)
    parser.add_argument("--readme", action="store_true", help="rewrite docs/PERFORMANCE.md's table instead of printing")
    args = parser.parse_args(argv)
    if args.readme:
        rewrite_readme(args.results)
        return 0
    print(console_table(target_rows(json.loads(args.results.read_text(encoding="utf-8")))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
