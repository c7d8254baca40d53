"""A small process that starts the bench's timed commands, so their peak RSS is their own.

Linux keeps a process's peak RSS across exec: a child spawned by the bench process starts with
the bench's own peak (hundreds of MB once it has read a 100,000-file tree) as its ru_maxrss. This
helper is started first, while the bench is small, stays small (stdlib only, no site), and spawns
every timed command: requests and answers are JSON lines on stdin/stdout.
"""

import json
import os
import subprocess
import sys
import tempfile
import time


def main() -> None:
    for line in sys.stdin:
        req = json.loads(line)
        with tempfile.TemporaryFile() as errors:
            start = time.perf_counter()
            proc = subprocess.Popen(req["argv"], cwd=req["cwd"], env=req["env"], stdin=subprocess.DEVNULL,
                                    stdout=subprocess.DEVNULL, stderr=errors)
            _, status, usage = os.wait4(proc.pid, 0)
            elapsed = time.perf_counter() - start
            proc.returncode = os.waitstatus_to_exitcode(status)
            errors.seek(0)
            tail = errors.read()[-2000:].decode(errors="replace")
        answer = {"seconds": elapsed, "rss_kb": int(usage.ru_maxrss), "code": proc.returncode, "stderr": tail}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
