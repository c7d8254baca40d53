"""Where memories live: resolving the hub URL, redacting it, and the embedded default hub.

Resolution order (BRIEF): --remote flag, storage.yaml `remote`, MEMSYNC_REMOTE, embedded hub.
A credential written into a URL is split off here: it is used for the operation and never stored
or shown.

A remote may be a template holding `{name}` (one repository per memory, as some hosts prefer):
it is filled with the memory's name before anything else reads it. A name is lowercase letters,
digits and hyphens (util/names.py), so it cannot climb out of a path or change a URL's scheme,
host or account; `{name}` is still refused there (before the path), and so is any other brace.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from memsync.errors import UsageError
from memsync.util.lazyre import LazyRe
from memsync.util.records import field, recordclass

SCHEMES = ("file", "git", "http", "https", "ssh")
_DEFAULT_PORTS = {"git": 9418, "http": 80, "https": 443, "ssh": 22}
_SCP_RE: LazyRe[str] = LazyRe(r"^(?:(?P<user>[^@/]+)@)?(?P<host>[^:/]+):(?P<path>(?!//).+)$")


@recordclass(frozen=True)
class HubUrl:
    url: str  # what libgit2 is given: no password inside
    kind: str  # "file" | "git" | "http" | "ssh"
    password: str | None = field(default=None, repr=False, compare=False)

    @property
    def display(self) -> str:
        return safe_url(self.url)

    @property
    def local_path(self) -> Path | None:
        if self.kind != "file":
            return None
        return Path(urlsplit(self.url).path) if self.url.startswith("file://") else Path(self.url)

    @property
    def key(self) -> str:
        """One spelling per hub: a hub on this machine by its resolved path, an HTTP(S) hub by its
        URL without the account (`https://alice@host/x` and `https://host/x` are one hub), else its URL."""
        local = self.local_path
        if local is not None:
            return str(local.expanduser().resolve())
        return self.recordable

    @property
    def recordable(self) -> str:
        """The hub as storage.yaml keeps it: never a credential, and for HTTP(S) no account either
        (read back, `https://alice@host` would be taken for a token); the user then comes from
        MEMSYNC_USER or MEMSYNC_REMOTE, as for any HTTPS hub."""
        return without_account(self.url) if self.kind == "http" else self.url

    @property
    def port(self) -> int | None:
        """The TCP port a network hub is reached on (None: a hub on this machine)."""
        if self.kind == "file":
            return None
        if "://" not in self.url:
            return 22  # scp-like user@host:path
        parts = urlsplit(self.url)
        try:
            given = parts.port
        except ValueError:
            return None
        return given or _DEFAULT_PORTS.get(parts.scheme.lower())


def without_account(url: str) -> str:
    parts = urlsplit(url)
    host = (parts.hostname or "") + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=host))


def memsync_home() -> Path:
    env = os.environ.get("MEMSYNC_HOME")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_DATA_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".local" / "share"
    return base / "memsync"


def ensure_home() -> Path:
    """MEMSYNC_HOME, created private (0700) on first use: it holds the embedded hub and the
    caches of other hubs, which no other user should read or plant files in."""
    home = memsync_home()
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    return home


def embedded_hub_path() -> Path:
    return memsync_home() / "hub.git"


def safe_url(url: str) -> str:
    """Hide any credential in a URL, pip-style: https://user:***@host/x, https://***@host/x,
    and scp-style user:***@host:path."""
    if "://" not in url:
        scp = _SCP_RE.match(url.strip())
        user = scp.group("user") if scp else None
        if scp and user and ":" in user:
            return f"{user.split(':', 1)[0]}:***@{scp.group('host')}:{scp.group('path')}"
        return url
    try:
        parts = urlsplit(url)
    except ValueError:
        return re.sub(r"//[^/@]*@", "//***@", url)
    if parts.scheme in ("http", "https", "git", "ssh") and "@" in parts.netloc:
        userinfo, host = parts.netloc.rsplit("@", 1)
        if ":" in userinfo:
            userinfo = userinfo.split(":", 1)[0] + ":***"
        elif parts.scheme in ("http", "https"):
            userinfo = "***"  # a bare token as the user name is how GitHub tokens are often written
        return urlunsplit(parts._replace(netloc=f"{userinfo}@{host}"))
    return url


TEMPLATE_FIELD = "{name}"
TEMPLATE_PROBE = "any-memory"  # fills a template to check what holds for every name (a credential)


def is_template(raw: str) -> bool:
    """Whether a hub address names one memory's repository (`{name}` in it)."""
    return TEMPLATE_FIELD in raw


def expand(raw: str, name: str | None) -> str:
    """`raw` with `{name}` replaced by the memory's name; `raw` itself when it holds none."""
    if "{" not in raw and "}" not in raw:
        return raw
    shown = safe_url(raw)
    rest = raw.replace(TEMPLATE_FIELD, "")
    if "{" in rest or "}" in rest:
        raise UsageError(f"the remote {shown} has a brace that is not {TEMPLATE_FIELD}",
                         f"the only field a remote may hold is {TEMPLATE_FIELD}, e.g. "
                         f"https://git.example.com/memories/{TEMPLATE_FIELD}.git")
    before = raw[:raw.index(TEMPLATE_FIELD)]
    if "://" in raw:
        if "/" not in before.partition("://")[2]:
            raise UsageError(f"the remote {shown} puts {TEMPLATE_FIELD} before the URL's path",
                             "a memory's name may only name the repository, never the scheme, host or account")
    elif not raw.startswith(("/", "~", ".")) and _SCP_RE.match(raw.replace(TEMPLATE_FIELD, "x")) and ":" not in before:
        raise UsageError(f"the remote {shown} puts {TEMPLATE_FIELD} before the path (host:path)",
                         "a memory's name may only name the repository, never the host or account")
    if name is None:
        raise UsageError(f"the remote {shown} is a template ({TEMPLATE_FIELD}): one repository per memory, "
                         "and this command names no memory",
                         "give the repository itself with --remote (e.g. for `memsync list`)")
    from memsync.util.names import check_name

    return raw.replace(TEMPLATE_FIELD, check_name(name))


def parse(raw: str, base: Path | None = None, name: str | None = None) -> HubUrl:
    """Classify and normalise a remote given by a user (a template filled with `name`)."""
    text = expand(raw.strip(), name)
    if not text:
        raise UsageError("the remote URL is empty", "give a path, file://, git://, http(s):// or ssh:// URL")
    if "://" in text:
        parts = urlsplit(text)
        scheme = parts.scheme.lower()
        if scheme not in SCHEMES:
            raise UsageError(
                f"unsupported remote scheme {scheme!r} in {safe_url(text)}",
                "use a path, file://, git://, http(s):// or ssh://",
            )
        if scheme == "file":
            return HubUrl(str(Path(parts.path).resolve()), "file")
        if not parts.hostname:
            raise UsageError(f"remote URL {safe_url(text)} has no host",
                             f"write it as {scheme}://HOST[:PORT]/PATH")
        password = None
        if scheme in ("http", "https", "ssh", "git") and "@" in parts.netloc:
            # https://user:TOKEN@host keeps the user; https://TOKEN@host is a bare token;
            # ssh://user:PASSWORD@host keeps the user (a bare ssh:// user is a user, not a secret)
            userinfo, host = parts.netloc.rsplit("@", 1)
            user, has_secret, secret = userinfo.partition(":")
            if has_secret or scheme in ("http", "https"):
                password = secret if has_secret else user
                netloc = f"{user}@{host}" if has_secret and user else host
                text = urlunsplit(parts._replace(netloc=netloc))
        kind = "http" if scheme in ("http", "https") else scheme
        return HubUrl(text, kind, password)
    scp = _SCP_RE.match(text)
    if scp and not Path(text).exists() and "/" not in scp.group("host"):
        user, has_secret, secret = (scp.group("user") or "").partition(":")
        if has_secret:  # user:PASSWORD@host:path
            at = f"{user}@" if user else ""
            return HubUrl(f"{at}{scp.group('host')}:{scp.group('path')}", "ssh", secret)
        return HubUrl(text, "ssh")
    path = Path(text).expanduser()
    if not path.is_absolute():
        path = (base or Path.cwd()) / path
    return HubUrl(str(path.resolve()), "file")


def from_flag(flag: str, name: str | None = None) -> HubUrl:
    """A hub given on memsync's command line (`--remote`), which must not carry a credential:
    every process on the machine can read a command line (ps, /proc/PID/cmdline).
    `https://NAME@host` names a user when MEMSYNC_TOKEN is set, else it is a bare token
    (as git/credentials.py reads it)."""
    from memsync.util.sealed import get

    hub = parse(flag, name=name)
    userinfo = urlsplit(flag.strip()).netloc.rpartition("@")[0] if "://" in flag else ""
    a_user_name = hub.kind == "http" and ":" not in userinfo and bool(get("MEMSYNC_TOKEN"))
    if hub.password is not None and not a_user_name:
        raise UsageError(f"--remote {safe_url(flag)}: a credential on memsync's command line is "
                         "readable by every process on the machine (ps, /proc/PID/cmdline)",
                         "set MEMSYNC_TOKEN (HTTPS), or MEMSYNC_SSH_KEY or ssh-agent (SSH), and give "
                         "the URL without it (see docs/REMOTES.md)")
    return hub


def resolve(flag: str | None, configured: str | None, name: str | None = None) -> HubUrl:
    """The hub for an operation, in the documented order. `flag` is the command line's
    `--remote`, refused if it holds a credential (see from_flag). `name`: the memory's, for a
    remote that is a template."""
    from memsync.util.sealed import get

    if flag:
        return from_flag(flag, name)
    for candidate in (configured, get("MEMSYNC_REMOTE")):
        if candidate:
            return parse(candidate, name=name)
    return HubUrl(str(embedded_hub_path()), "file")
