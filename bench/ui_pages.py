"""How fast `memsync ui` answers on a memory of 5,000 versions and 10,000 files (docs/PERFORMANCE.md,
"The page").

    python bench/ui_pages.py                  # 5,000 versions x 10,000 files, 5 rounds
    python bench/ui_pages.py --versions 500 --files 1000 --rounds 2

The memory is written straight into a bare hub by `git fast-import` (a few seconds): a first
version with every file, then versions that each change one to three files; every 25th is a run's
(Memsync-Run-Id, exit code), every 250th shrinks crdts.md and carries the guard's flag. The page
is served in this process (uvicorn in a thread, as `memsync ui` serves it) and every view is
fetched over HTTP with the page's cookie: once cold (nothing cached: the first visit after the
history arrived) and `--rounds` times warm; the median is printed.
"""

from __future__ import annotations

import argparse
import http.client
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

SIZE = 180  # bytes of a generated file


def body(n: int, rev: int) -> bytes:
    text = f"# note {n}\n\nrevision {rev}: " + "state-based merge, causal delivery, tombstones. " * 4
    return text.encode()[:SIZE - 1] + b"\n"


def stream(files: int, versions: int) -> bytes:
    """A fast-import stream of memory/bench."""
    out: list[bytes] = []
    when = 1_790_000_000

    def commit(n: int, message: str, changes: list[tuple[str, bytes]]) -> None:
        out.append(b"commit refs/heads/memory/bench\n")
        out.append(f"mark :{n}\ncommitter operator <op@example.com> {when + n * 60} +0000\n".encode())
        data = message.encode()
        out.append(b"data %d\n%s\n" % (len(data), data))
        if n > 1:
            out.append(f"from :{n - 1}\n".encode())
        for path, content in changes:
            out.append(f"M 100644 inline {path}\n".encode())
            out.append(b"data %d\n%s\n" % (len(content), content))

    first = [(f"notes/d{i // 100:03d}/f{i:05d}.md", body(i, 0)) for i in range(files)]
    first.append(("crdts.md", b"x" * 7285))
    commit(1, "Seed\n\nMemsync-Actor: operator\nMemsync-Host: bench\n", first)
    crdts = 7285
    for n in range(2, versions + 1):
        changed = [(f"notes/d{(k % files) // 100:03d}/f{k % files:05d}.md", body(k, n))
                   for k in (n * 7, n * 13, n * 31)[: 1 + n % 3]]
        trailers = "Memsync-Actor: operator\nMemsync-Host: bench\n"
        if n % 25 == 0:
            trailers = (f"Memsync-Actor: run\nMemsync-Run-Id: 2026112{n // 1000}T00{n:05d}Z-bench\n"
                        "Memsync-Exit-Code: 0\n")
        if n % 250 == 0:
            trailers += f"Memsync-Flag: shrink crdts.md {crdts}->1509\n"
            crdts = 1509
            changed.append(("crdts.md", b"y" * crdts))
        elif n % 250 == 100:
            crdts = 7285
            changed.append(("crdts.md", b"x" * crdts))
        commit(n, f"Version {n}\n\n{trailers}", changed)
    return b"".join(out)


def build(home: Path, files: int, versions: int) -> float:
    hub = home / "hub.git"
    subprocess.run(["git", "init", "-q", "--bare", str(hub)], check=True)
    start = time.perf_counter()
    subprocess.run(["git", "fast-import", "--quiet"], cwd=hub, input=stream(files, versions), check=True)
    return time.perf_counter() - start


def fetch(port: int, cookie: str, path: str) -> float:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    start = time.perf_counter()
    conn.request("GET", path, headers={"Host": f"127.0.0.1:{port}", "Cookie": cookie})
    r = conn.getresponse()
    r.read()
    took = time.perf_counter() - start
    conn.close()
    if r.status != 200:
        raise SystemExit(f"GET {path}: HTTP {r.status}")
    return took


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--versions", type=int, default=5000)
    ap.add_argument("--files", type=int, default=10000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        os.environ["MEMSYNC_HOME"] = str(home)
        took = build(home, args.files, args.versions)
        print(f"built {args.versions} versions x {args.files} files with git fast-import in {took:.1f} s")
        from memsync.ui.server import Page

        page = Page(None, None)
        threading.Thread(target=page.run, daemon=True).start()
        while not page.started():
            time.sleep(0.01)
        cookie = f"memsync_ui_{page.port}={page.token}"
        tip = page.view.tip("bench")
        run_id = f"2026112{(args.versions // 25 * 25) // 1000}T00{args.versions // 25 * 25:05d}Z-bench"
        views = {"memories": "/", "timeline": "/m/bench", "timeline, page 60": "/m/bench?page=60",
                 "timeline + a file's chart": "/m/bench?file=crdts.md", "version (diff)": f"/m/bench/v/{tip}",
                 "file history (often changed)": "/m/bench/f/crdts.md",
                 "file history (changed once)": "/m/bench/f/notes/d000/f00001.md",
                 "run": f"/m/bench/run/{run_id}", "conflicts": "/m/bench/conflicts"}
        print(f"{'view':<32} {'cold':>8} {'warm (median)':>14}")
        for name, path in views.items():
            cold = fetch(page.port, cookie, path)
            warm = statistics.median(fetch(page.port, cookie, path) for _ in range(args.rounds))
            print(f"{name:<32} {cold * 1000:>6.0f} ms {warm * 1000:>11.0f} ms")
        page.stop()
    sys.stdout.flush()


if __name__ == "__main__":
    main()
