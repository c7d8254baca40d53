"""A hub on this machine with a policy of its own: pushed to through git's receive-pack.

memsync writes a hub on this machine in place (localhub.py), as libgit2's local transport does:
neither runs the hub's hooks nor applies its `receive.*` settings. A hub that has them (a
`pre-receive` protecting a branch, `receive.fsckObjects`, a size limit) is pushed to with
`git push`, whose local transport runs the hub's `git receive-pack`: the hooks run and the
settings apply exactly as for any git client. Without git installed such a push is refused.

The push is made from a scratch repository that borrows the memory's objects (objects/info/
alternates) and has no hooks or configuration of its own: the memory's `.git` is the agent's to
write (a `pre-push` hook, `core.hooksPath`, `url.*.insteadOf`) and none of it may act with the
operator's rights. No `-c` option is given either: git hands those to receive-pack too, where
they would switch the hub's own hooks off.
"""

from __future__ import annotations

import os
from pathlib import Path

import pygit2

from memsync.errors import PushRejected, RemoteError
from memsync.git.hub import HubUrl
from memsync.git.repo import GitRepo
from memsync.git.transport import HUB_PROTECTION, NotFastForward
from memsync.util.textsafe import terminal

# Hooks git's receive-pack runs (githooks(5)); any of them makes the hub's policy memsync's to honour.
RECEIVE_HOOKS = ("pre-receive", "update", "proc-receive", "post-receive", "post-update", "reference-transaction",
                 "push-to-checkout")
# memsync holds itself to its own protection (it never rewinds or deletes); the rest change no verdict
_NO_POLICY = frozenset([*(key.lower() for key in HUB_PROTECTION), "receive.autogc", "receive.unpacklimit",
                        "receive.updateserverinfo", "receive.keepalive", "receive.advertiseatomic",
                        "receive.advertisepushoptions"])
_TIMEOUT = 600  # seconds: a hook that never ends must not hold the hub's lock forever
_SHOWN = 5  # lines of the hub's refusal shown


def policy(hub: Path) -> list[str]:
    """What of the hub's own policy memsync's in-place write would skip: its receive hooks and
    `receive.*` / `transfer.fsckObjects` settings (memsync's own protection aside). Empty: none."""
    found: list[str] = []
    config_file = hub / "config"
    try:
        text = config_file.read_text(encoding="utf-8", errors="replace").lower()
    except OSError:
        text = ""
    hooks_dir = hub / "hooks"
    if "receive" in text or "fsckobjects" in text or "hookspath" in text:
        try:
            config = pygit2.Config(str(config_file))
            for entry in config:
                name = entry.name.lower()
                if (name.startswith("receive.") and name not in _NO_POLICY) or name == "transfer.fsckobjects":
                    found.append(f"{entry.name}={entry.value}")
                elif name == "core.hookspath" and entry.value:
                    hooks_dir = hub / os.path.expanduser(entry.value)
        except (pygit2.GitError, OSError, ValueError):
            found.append("an unreadable config")
    for name in RECEIVE_HOOKS:
        path = hooks_dir / name
        if os.access(path, os.X_OK) and path.is_file():
            found.append(f"hooks/{name}")
    return found


def push(git: GitRepo, hub: HubUrl, hub_path: Path, new: str, ref: str, rules: list[str]) -> None:
    """Push `new` to `ref` on the hub through git's receive-pack (its hooks and settings apply).
    NotFastForward if the hub's ref moved; PushRejected if the hub's policy refused it."""
    import shutil  # (only here: a status imports no subprocess)
    import subprocess
    import tempfile

    exe = shutil.which("git")
    if exe is None:
        raise RemoteError(f"{hub.display} has a policy of its own ({', '.join(rules)}), which only git's "
                          "receive-pack applies, and git is not installed",
                          "install git, or push to the hub through git://, ssh:// or https://")
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_") or k in ("GIT_CONFIG_GLOBAL",
                                                                                   "GIT_CONFIG_NOSYSTEM")}
    env["GIT_TERMINAL_PROMPT"] = "0"
    with tempfile.TemporaryDirectory(prefix="memsync-push-") as scratch:
        pygit2.init_repository(scratch, bare=True)
        for sample in Path(scratch, "hooks").glob("*"):
            sample.unlink()
        Path(scratch, "objects", "info", "alternates").write_text(
            os.path.join(git.git_dir, "objects") + "\n", encoding="utf-8")
        argv = [exe, "--git-dir", scratch, "push", "--porcelain", "--no-verify", str(hub_path), f"{new}:{ref}"]
        try:
            done = subprocess.run(argv, env=env, capture_output=True, text=True, errors="replace",
                                  timeout=_TIMEOUT, check=False, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired as exc:
            raise RemoteError(f"pushing to {hub.display} took longer than {_TIMEOUT} s (its hooks)",
                              "the commit stays local; ask the hub's owner, then `memsync push`") from exc
        except OSError as exc:
            raise RemoteError(f"cannot run git to push to {hub.display}: {exc.strerror}") from exc
    if done.returncode == 0:
        return
    status = next((line for line in done.stdout.splitlines() if line.startswith("!")), "")
    if "[rejected]" in status and ("fast-forward" in status or "fetch first" in status or "stale" in status):
        raise NotFastForward(f"the hub's {ref} moved on meanwhile")
    said = [terminal(line[len("remote: "):].strip())[:400] for line in done.stderr.splitlines()
            if line.startswith("remote: ") and line[len("remote: "):].strip()][-_SHOWN:]
    why = status.split("\t")[-1] if status else "git push failed"
    raise PushRejected(f"{hub.display} refused the push: {ref}: {terminal(why)}"
                       + (f" (server said: {' | '.join(said)})" if said else ""),
                       "the commit stays local; ask the hub's owner (hook or protected branch), then `memsync push`")


__all__ = ["RECEIVE_HOOKS", "policy", "push"]
