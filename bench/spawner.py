"""A small process that starts the bench's timed commands, so their peak RSS is their own.

Linux keeps a process's peak RSS across exec: a child spawned by the bench process starts with
the bench's own peak (hundreds of MB once it has read a 100,000-file tree) as its ru_maxrss. This
helper is started first, while the bench is small, stays small (stdlib only, no site), and spawns
every timed command: requests and answers are JSON lines on stdin/stdout.

Two peaks are reported per command. `rss_kb` is wait4()'s ru_maxrss: the largest single process
of the command's tree (a shell line's biggest git), exact however short its peak. `tree_kb` is the
largest sum of the resident sets of every process of the tree alive at one time, sampled every
SAMPLE_S from /proc: `git push` and the `git pack-objects` it runs are alive together, so their
sum is what the machine holds, which the largest one alone understates (a peak shorter than a
sample can be missed, which `rss_kb` never misses: the figure to compare is the larger of the two).
"""

import json
import os
import subprocess
import sys
import tempfile
import time

SAMPLE_S = 0.02


def _children() -> dict[int, list[int]]:
    found: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(b")") + 2:].split()[1])
        found.setdefault(ppid, []).append(int(name))
    return found


def _tree_rss_kb(root: int) -> int:
    """The resident sets of `root` and all its descendants now, summed (kB)."""
    children = _children()
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        todo.extend(children.get(pid, ()))
        try:
            with open(f"/proc/{pid}/statm", "rb") as fh:
                total += int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024
        except (OSError, ValueError, IndexError):
            continue
    return total


def main() -> None:
    for line in sys.stdin:
        req = json.loads(line)
        with tempfile.TemporaryFile() as errors:
            start = time.perf_counter()
            proc = subprocess.Popen(req["argv"], cwd=req["cwd"], env=req["env"], stdin=subprocess.DEVNULL,
                                    stdout=subprocess.DEVNULL, stderr=errors)
            tree = 0
            while True:  # sampled only when asked: a timed command's wall time is not polled
                pid, status, usage = os.wait4(proc.pid, os.WNOHANG if req.get("tree") else 0)
                if pid:
                    break
                tree = max(tree, _tree_rss_kb(proc.pid))
                time.sleep(SAMPLE_S)
            elapsed = time.perf_counter() - start
            proc.returncode = os.waitstatus_to_exitcode(status)
            errors.seek(0)
            tail = errors.read()[-2000:].decode(errors="replace")
        answer = {"seconds": elapsed, "rss_kb": int(usage.ru_maxrss), "tree_kb": tree, "code": proc.returncode,
                  "stderr": tail}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
