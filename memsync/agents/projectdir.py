"""Where Claude Code keeps a repository's auto memory on this machine, as Claude Code decides it.

- The folder is ~/.claude/projects/<slug>/memory, the slug made from the repository's main
  worktree (every worktree of a repository shares it): each character other than an ASCII letter
  or digit becomes `-`; a slug longer than 200 characters keeps its first 200 and gains `-` and a
  hash of the path. Claude Code's Node build hashes with a 32-bit string hash written in base 36;
  its native build with another one, so an existing folder that shares the first 200 characters
  is taken when there is exactly one.
- `autoMemoryDirectory` moves it, read as Claude Code reads it: an absolute path (`~/` expanded)
  from the user's own settings only: the project's settings.local.json when the repository does
  not track it, then ~/.claude/settings.json; never the shared .claude/settings.json, nor a
  settings file reached through a `.claude` link that leads out of the project.
- memsync syncs a moved folder only inside the agent's own memory locations (below Claude Code's
  home, or below the project, never either one itself nor `.git`): a repository that sets
  `autoMemoryDirectory: ~/.ssh` must never have memsync push the user's keys to a hub.
"""

from __future__ import annotations

import os
import re
import unicodedata
from pathlib import Path

from memsync.errors import ConfigError

__all__ = ["LOCAL_SETTINGS", "auto_memory_dir", "moved_by", "project_slug", "slug_hash"]

LOCAL_SETTINGS = ".claude/settings.local.json"
MAX_SLUG = 200


def slug_hash(text: str) -> str:
    """Claude Code's (Node) path hash: `h = ((h << 5) - h + c) | 0` over UTF-16 code units,
    `Math.abs(h).toString(36)`."""
    data = text.encode("utf-16-le", "surrogatepass")
    h = 0
    for i in range(0, len(data), 2):
        h = ((h << 5) - h + int.from_bytes(data[i:i + 2], "little")) & 0xFFFFFFFF
    if h >= 1 << 31:
        h -= 1 << 32
    n = abs(h)
    digits = ""
    while True:
        n, d = divmod(n, 36)
        digits = "0123456789abcdefghijklmnopqrstuvwxyz"[d] + digits
        if n == 0:
            return digits


def project_slug(project: Path) -> str:
    """Claude Code's directory name for a project under ~/.claude/projects
    (/home/ana/src/app -> -home-ana-src-app); past 200 characters, cut and hashed."""
    text = unicodedata.normalize("NFC", str(project))
    slug = re.sub(r"[^A-Za-z0-9]", "-", text)
    if len(slug) <= MAX_SLUG:
        return slug
    return f"{slug[:MAX_SLUG]}-{slug_hash(text)}"


def _default(home: Path, root: Path) -> Path:
    slug = project_slug(root)
    projects = home / "projects"
    if len(slug) > MAX_SLUG and not (projects / slug).exists():
        try:
            same = [p for p in projects.iterdir() if p.name.startswith(slug[:MAX_SLUG] + "-")]
        except OSError:
            same = []
        if len(same) == 1:  # written by a build that hashes otherwise
            return same[0] / "memory"
    return projects / slug / "memory"


def _setting(path: Path) -> str | None:
    import json

    try:
        data = json.loads(path.read_text(encoding="utf-8")[:1 << 20] or "{}")
    except (OSError, ValueError):  # missing or not JSON: no setting (Claude Code reads it so too)
        return None
    value = data.get("autoMemoryDirectory") if isinstance(data, dict) else None
    if not isinstance(value, str) or not value.strip():
        return None
    chosen = os.path.expanduser(value.strip())
    return chosen if os.path.isabs(chosen) and "\0" not in chosen else None  # Claude Code ignores others


def moved_by(home: Path, toplevel: Path) -> tuple[Path, Path] | None:
    """(the folder `autoMemoryDirectory` names, the settings file that says so), or None."""
    from memsync.git.repofiles import is_tracked

    local = toplevel / LOCAL_SETTINGS
    candidates = []
    if _inside(local.parent.resolve(), toplevel.resolve()) and not is_tracked(toplevel, local):
        candidates.append(local)
    candidates.append(home / "settings.json")
    for settings in candidates:
        value = _setting(settings)
        if value is not None:
            return Path(os.path.normpath(value)), settings
    return None


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def allowed_location(chosen: Path, home: Path, root: Path) -> bool:
    """Below the agent's home or the project, and neither one itself nor inside `.git`."""
    real = chosen.resolve()
    for base in (home.resolve(), root.resolve()):
        if real != base and _inside(real, base) and ".git" not in real.relative_to(base).parts:
            return True
    return False


def auto_memory_dir(home: Path, root: Path, toplevel: Path | None = None) -> Path:
    """The repository's auto memory folder on this machine (see the module's notes); ConfigError
    if the user's settings move it somewhere memsync will not sync."""
    moved = moved_by(home, toplevel or root)
    if moved is None:
        return _default(home, root)
    chosen, settings = moved
    if not allowed_location(chosen, home, root):
        raise ConfigError(f"{settings} sets autoMemoryDirectory to {chosen}, outside Claude Code's memory "
                          "locations: memsync syncs a folder below ~/.claude or below the project only",
                          "choose such a folder, or install the hooks with an explicit --dir "
                          "(--scope user or local)")
    return chosen
