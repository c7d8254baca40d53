"""Who is on the other end: SSH host keys checked against known_hosts, TLS verdicts enforced.

Why this module exists: pygit2 1.21 hands `certificate_check` no certificate (always None) and,
for SSH, turns "no opinion" into "accept", so by default any host key is accepted. libgit2 1.9.7
does check `$HOME/.ssh/known_hosts` itself, but only its own idea of `$HOME` (fixed when the
library starts), it cannot be pointed at `MEMSYNC_KNOWN_HOSTS`, and its yes/no verdict cannot tell
an unknown host from a changed key nor give a fingerprint to show.

The approach: pygit2 routes libgit2's certificate callback through the cffi extern
`_certificate_check_cb`. `install()` re-binds that extern (cffi allows re-defining an extern) to
a function that, for callback objects offering `server_identity()` (memsync's `Callbacks`),
reads libgit2's `git_cert_hostkey` in full -- libgit2 1.9's layout (parent, type, hash_md5[16],
hash_sha1[20], hash_sha256[32], raw_type, hostkey, hostkey_len), declared in a private cffi FFI
because pygit2's declaration stops at hash_sha1 -- and passes a `ServerIdentity` with the raw
key blob. Every other callback object gets pygit2's original behaviour. The layout is
cross-checked before use: the raw key's SHA-256 must equal libgit2's own hash_sha256; if it does
not (a libgit2 with another layout), the connection is refused, never accepted blindly.

The key is then looked up in known_hosts the way OpenSSH does it: `host` on port 22,
`[host]:port` otherwise; plain, wildcard and negated patterns; hashed entries (`ssh-keygen -H`,
`|1|salt|hmac`); `@revoked` entries; `@cert-authority` lines are ignored (no certificates).
An unknown host is refused with its SHA256 fingerprint (as `ssh-keygen -l` prints it) and the
exact known_hosts line that would trust it; a changed key is refused with a distinct, loud
error. For HTTPS, libgit2 verifies the chain and host name against the CA store and this module
refuses whatever libgit2 did not find valid.
"""

from __future__ import annotations

import base64
import os
import re
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pygit2 import callbacks as pygit2_callbacks

from memsync.errors import HostKeyError
from memsync.git import interrupts, native
from memsync.util.records import recordclass

_CERT_X509 = 1
_CERT_HOSTKEY = 2
_SSH_SHA256 = 1 << 2
_SSH_RAW = 1 << 3
_MAX_KEY_LEN = 16384


_CERT_CDEF = """
typedef struct {
    int cert_type;
    int type;
    unsigned char hash_md5[16];
    unsigned char hash_sha1[20];
    unsigned char hash_sha256[32];
    int raw_type;
    const char *hostkey;
    size_t hostkey_len;
} memsync_cert_hostkey;
"""


class HostKeyChanged(HostKeyError):
    """The server's SSH key differs from the one known_hosts holds for it."""


class HostUnknown(HostKeyError):
    """The server is not in known_hosts."""


@recordclass(frozen=True)
class ServerIdentity:
    kind: str  # "ssh" | "tls" | "other"
    host: str
    valid: bool  # libgit2's verdict (TLS: chain and name checked against the CA store)
    key: bytes | None = None  # SSH: the host key blob, as in known_hosts after base64 decoding
    error: str | None = None  # why the key could not be read


def fingerprint(blob: bytes) -> str:
    """`SHA256:...` as `ssh-keygen -l` prints it."""
    import hashlib  # SSH only (OpenSSL's hashes are slow to load: docs/PERFORMANCE.md)

    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")


def key_type(blob: bytes) -> str:
    """The algorithm name a key blob starts with (`ssh-ed25519`, `ssh-rsa`, ...)."""
    if len(blob) < 4:
        return "unknown"
    (size,) = struct.unpack(">I", blob[:4])
    return blob[4:4 + size].decode("ascii", "replace") if size < 64 else "unknown"


def host_label(host: str, port: int | None) -> str:
    """The name known_hosts uses: `host` on the default port, `[host]:port` otherwise."""
    return host if port in (None, 22) else f"[{host}]:{port}"


def known_hosts_files() -> list[Path]:
    """MEMSYNC_KNOWN_HOSTS (one or more paths, os.pathsep-separated) replaces the defaults."""
    env = os.environ.get("MEMSYNC_KNOWN_HOSTS")
    if env:
        return [Path(p).expanduser() for p in env.split(os.pathsep) if p]
    return [Path.home() / ".ssh" / "known_hosts", Path("/etc/ssh/ssh_known_hosts")]


@recordclass(frozen=True)
class _Entry:
    where: str  # "file:line"
    marker: str  # "", "@revoked", "@cert-authority"
    keytype: str
    blob: bytes


def _pattern_matches(pattern: str, name: str) -> bool:
    if pattern.startswith("|1|"):
        try:
            import hashlib
            import hmac  # hashed known_hosts lines only

            _, _, salt, digest = pattern.split("|", 3)
            mac = hmac.new(base64.b64decode(salt), name.encode(), hashlib.sha1).digest()
            return hmac.compare_digest(mac, base64.b64decode(digest))
        except (ValueError, TypeError):
            return False
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern.lower())
    return re.fullmatch(regex, name.lower()) is not None


def _host_matches(patterns: str, name: str) -> bool:
    matched = False
    for pattern in patterns.split(","):
        if pattern.startswith("!"):
            if _pattern_matches(pattern[1:], name):
                return False
        elif _pattern_matches(pattern, name):
            matched = True
    return matched


def _entries_for(name: str, files: list[Path]) -> list[_Entry]:
    found: list[_Entry] = []
    for path in files:
        try:
            lines = path.read_text(errors="replace").splitlines()
        except OSError:
            continue
        for number, line in enumerate(lines, 1):
            fields = line.split()
            if not fields or fields[0].startswith("#"):
                continue
            marker = fields.pop(0) if fields[0].startswith("@") else ""
            if len(fields) < 3 or not _host_matches(fields[0], name):
                continue
            try:
                blob = base64.b64decode(fields[2], validate=True)
            except ValueError:
                continue
            found.append(_Entry(f"{path}:{number}", marker, fields[1], blob))
    return found


def verify_ssh(display: str, host: str, port: int | None, blob: bytes) -> None:
    """Accept the key if known_hosts lists it for this host; raise a HostKeyError otherwise."""
    name = host_label(host, port)
    files = known_hosts_files()
    entries = _entries_for(name, files)
    kind = key_type(blob)
    seen = fingerprint(blob)
    if any(e.marker == "@revoked" and e.blob == blob for e in entries):
        raise HostKeyError(f"{display}: the SSH host key of {name} ({seen}) is marked @revoked in known_hosts",
                           "the server must be given a new key by its owner")
    plain = [e for e in entries if not e.marker]
    if any(e.blob == blob for e in plain):
        return
    same_type = [e for e in plain if e.keytype == kind]
    if same_type:
        old = same_type[0]
        target = old.where.rsplit(":", 1)[0]
        raise HostKeyChanged(
            f"{display}: WARNING: THE SSH HOST KEY OF {name} HAS CHANGED: known_hosts ({old.where}) has "
            f"{fingerprint(old.blob)}, the server presented {kind} {seen}; someone may be intercepting "
            "the connection (man-in-the-middle), or the server's key was replaced; refusing to connect",
            f"only if the server's owner confirms the new key: ssh-keygen -R '{name}' -f {target}, "
            "then trust the new key (see docs/REMOTES.md, trusting a host)",
        )
    trust_file = files[0]
    line = f"{name} {kind} {base64.b64encode(blob).decode()}"
    others = f" (known_hosts has only {', '.join(sorted({e.keytype for e in plain}))} keys for it)" if plain else ""
    scan = f"ssh-keyscan{'' if port in (None, 22) else f' -p {port}'} {host}"
    raise HostUnknown(
        f"{display}: the SSH host {name} is not in known_hosts{others}; it presented {kind} key {seen}",
        f"if {seen} is the server's fingerprint (compare with what its owner publishes), trust it by "
        f"adding this line to {trust_file}: {line}  (or: {scan} >> {trust_file})",
    )


def _read_identity(cert_i: Any, valid: int, host: Any) -> ServerIdentity:
    name = native.text(host).decode(errors="replace")
    if native.is_null(cert_i):
        return ServerIdentity("other", name, bool(valid))
    _full = native.own_ffi(_CERT_CDEF)  # built on first use (an SSH host key is its only user)
    cert = _full.cast("memsync_cert_hostkey *", native.address(cert_i))
    if cert.cert_type == _CERT_X509:
        return ServerIdentity("tls", name, bool(valid))
    if cert.cert_type != _CERT_HOSTKEY:
        return ServerIdentity("other", name, bool(valid))
    if not cert.type & _SSH_RAW or not 0 < cert.hostkey_len <= _MAX_KEY_LEN or cert.hostkey == _full.NULL:
        return ServerIdentity("ssh", name, False, error="libgit2 did not provide the raw host key")
    blob = bytes(_full.buffer(cert.hostkey, cert.hostkey_len))
    import hashlib

    if cert.type & _SSH_SHA256 and hashlib.sha256(blob).digest() != bytes(cert.hash_sha256):
        return ServerIdentity("ssh", name, False, error="the host key read from libgit2 is inconsistent")
    return ServerIdentity("ssh", name, bool(valid), key=blob)


_original: Callable[..., int] | None = None


def _certificate_check(cert_i: Any, valid: int, host: Any, payload: Any) -> int:
    # Everything is inside the try: an exception anywhere (a Ctrl-C between two lines included)
    # refuses the server. What escapes even this (an interrupt inside the except clause) is
    # refused by `interrupts.on_escape`, or by cffi's `error` value (see memsync.git.interrupts).
    try:
        data = native.from_handle(payload)
        check = getattr(data, "server_identity", None)
        if check is None:
            assert _original is not None
            return _original(cert_i, valid, host, payload)
        check(_read_identity(cert_i, valid, host))
        return 0
    except BaseException as exc:  # stored and re-raised by pygit2 once libgit2 returns
        return _refuse(payload, exc)


def _refuse(payload: Any, exc: BaseException) -> int:
    try:
        data = native.from_handle(payload)
    except BaseException:
        return interrupts.REFUSE
    return interrupts.keep(data, exc)


def install() -> None:
    """Route libgit2's certificate checks through `_certificate_check` (idempotent)."""
    global _original
    if _original is None:
        _original = pygit2_callbacks._certificate_check_cb
        interrupts.define("_certificate_check_cb", _certificate_check)
