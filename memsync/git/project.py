"""Which repository a coding agent's project is: the identity its memory is keyed by.

Claude Code keys its auto memory by git repository (every worktree and subdirectory of one
repository shares it); memsync names the hub memory after the repository's identity, so two
different repositories never share a memory and two clones of one repository (other machines,
other paths) do. The identity is the repository's remote URL, normalised; a repository without a
remote gets a random id kept in its own configuration (`memsync.projectId`), shared by its
worktrees.
"""

from __future__ import annotations

import re
import uuid
from pathlib import Path
from urllib.parse import urlsplit

import pygit2

from memsync.util.records import recordclass

__all__ = ["ProjectIdentity", "identify", "normalise_remote"]

ID_KEY = "memsync.projectId"
_SCP = re.compile(r"^(?:[^@/]+@)?(?P<host>[^:/]+):(?P<path>(?!//).+)$")


@recordclass(frozen=True)
class ProjectIdentity:
    root: Path  # the main worktree's top level (a linked worktree's own when the main one is bare)
    key: str  # "remote:github.com/org/api" or "id:<uuid>"; "path:<dir>" outside any repository
    label: str  # a short readable name: the repository's name
    toplevel: Path  # this worktree's top level: where the agent reads the project's settings


def normalise_remote(url: str) -> str:
    """One spelling per repository: host (lower case, default port dropped) and path, without
    scheme, user, trailing slash or `.git` (git@github.com:Org/Api.git == https://github.com/org/api)."""
    text = url.strip()
    if "://" in text:
        parts = urlsplit(text)
        host = (parts.hostname or "").lower()
        try:
            port = parts.port
        except ValueError:
            port = None
        if port and port not in (22, 80, 443, 9418):
            host = f"{host}:{port}"
        path = parts.path
        if parts.scheme.lower() == "file" or not host:
            host, path = "file", str(Path(parts.path).resolve())
    else:
        scp = _SCP.match(text)
        if scp and not text.startswith(("/", ".")):
            host, path = scp.group("host").lower(), scp.group("path")
        else:
            host, path = "file", str(Path(text).expanduser().resolve())
    path = re.sub(r"/+", "/", "/" + path).rstrip("/")
    if path.endswith(".git"):
        path = path[:-4]
    return f"{host}{path}".lower() if host != "file" else f"file:{path}"


def identify(start: Path, *, assign: bool = True) -> ProjectIdentity:
    """The identity of the repository holding `start`; a directory in none is keyed by its path.
    `assign=False`: a repository without a remote or an id yet gets none (key "id:"): for callers
    that only need its directories, which must not write to its config."""
    found = pygit2.discover_repository(str(start))
    if found is None:
        root = start.resolve()
        return ProjectIdentity(root, f"path:{root}", root.name, root)
    repo = pygit2.Repository(found)
    root = _main_worktree(repo, start)
    top = Path(repo.workdir).resolve() if repo.workdir else start.resolve()
    remote = _remote_url(repo)
    if remote is not None:
        key = normalise_remote(remote)
        return ProjectIdentity(root, f"remote:{key}", key.rsplit("/", 1)[-1] or root.name, top)
    return ProjectIdentity(root, f"id:{_stable_id(repo, assign)}", root.name, top)


def _main_worktree(repo: pygit2.Repository, start: Path) -> Path:
    git_dir = Path(repo.path).resolve()
    common = git_dir
    commondir = git_dir / "commondir"
    if commondir.is_file():  # a linked worktree: .git/worktrees/NAME/commondir -> ../..
        common = (git_dir / commondir.read_text(encoding="utf-8").strip()).resolve()
    if common.name == ".git":
        return common.parent
    return Path(repo.workdir).resolve() if repo.workdir else start.resolve()


def _remote_url(repo: pygit2.Repository) -> str | None:
    names = sorted((n for n in repo.remotes.names() if n), key=lambda n: (n != "origin", n))
    for name in names:
        url = repo.remotes[name].url
        if url:
            return str(url)
    return None


def _stable_id(repo: pygit2.Repository, assign: bool) -> str:
    config = repo.config  # a worktree's is its main repository's: one id for all of them
    try:
        value = str(config[ID_KEY])
        if re.fullmatch(r"[0-9a-f]{32}", value):
            return value
    except KeyError:
        pass
    if not assign:
        return ""
    value = uuid.uuid4().hex
    config[ID_KEY] = value
    return value
