"""A command line as it may be shown and recorded: every likely credential replaced by `<redacted>`.

The run's command is printed and written to the `Memsync-Command` trailer, which is pushed and kept
forever, so what an operator types after `--` must not carry a token into history. Redacted:

- the value of an option whose name names a secret (`--token X`, `--token=X`, `--api-key X`,
  `--password X`, `--client-secret=X`; not `--token-file X` or `--max-tokens N`);
- `-pPASSWORD` of the mysql family and `sshpass -p X`; the password of `-u user:pass` /
  `--user user:pass` (curl, wget);
- header values that are credentials (`Authorization: Bearer X`, `-H "X-Api-Key: X"`, `Cookie:`);
- the password of a URL with userinfo (`https://user:X@host`; a bare https user is a token too);
- `KEY=value` assignments whose name names a secret (`env OPENAI_API_KEY=X cmd`);
- anything else the secret scanner recognises (`sk-...`, `ghp_...`, a JWT, ...), inside any
  argument, including a `sh -c '...'` script, where the rules above also apply.
"""

from __future__ import annotations

import re
import shlex

from memsync.util.lazyre import LazyRe

__all__ = ["REDACTED", "mask_args", "shown_command"]

REDACTED = "<redacted>"

# Option names that hold a secret besides those the scanner's key rule knows (api_key, token,
# password, secret, ...): short words curl, wget, mysql, httpie and friends use.
_EXTRA_SECRET_OPTIONS = frozenset({"pass", "pw", "pwd", "passphrase", "auth", "http_auth", "credential",
                                   "credentials", "cookie", "bearer", "apikey", "api_token", "oauth"})
# An option named like a secret that takes no value or a non-secret one.
_NOT_A_VALUE = ("stdin", "prompt", "file", "env", "command", "cmd", "fd", "store", "helper")
_MYSQL = frozenset({"mysql", "mysqldump", "mysqladmin", "mysqlimport", "mysqlshow", "mysqlcheck",
                    "mysqlpump", "mysqlsh", "mariadb", "mariadb-dump", "mariadb-admin"})
_USER_OPTIONS = frozenset({"-u", "--user", "--proxy-user"})

_HEADER_RE = LazyRe(
    r"(?i)\b((?:proxy-)?authorization|x-api-key|api-key|x-auth-token|x-access-token|private-token"
    r"|x-goog-api-key|cookie)([ \t]*:[ \t]*)((?:bearer|basic|token|bot|digest|negotiate)[ \t]+)?"
    r"""([^'"\r\n]+)""",
    ":",
)
_URL_USERINFO_RE = LazyRe(r"\b([A-Za-z][A-Za-z0-9+.\-]*)://([^\s/@'\"<>]+)@", "://")
_ASSIGNMENT_RE = LazyRe(r"""(?<![\w.\-$])([A-Za-z_][A-Za-z0-9_]*)=("[^"]*"|'[^']*'|[^\s'";&|)]+)""", "=")
_INLINE_OPTION_RE = LazyRe(
    r"""(?<![\w\-])(--?[A-Za-z][A-Za-z0-9_\-]*)(=|[ \t]+)("[^"]*"|'[^']*'|[^\s'";&|)]+)""", "-"
)
_INLINE_USER_RE = LazyRe(r"""(?<![\w\-])(-u[ \t]*|--user[= \t]+)([^\s:'"]+):([^\s'"]+)""", "-u")  # "--user" holds "-u"
_INLINE_MYSQL_RE = LazyRe(r"""(?<![\w\-])-p(?![\s'"])("[^"]*"|'[^']*'|[^\s'";&|)]+)""", "-p")


def shown_command(argv: list[str]) -> str:
    """The command on one line, shell-quoted, with likely credentials redacted."""
    return shlex.join(mask_args(argv)).replace("\r", "\\r").replace("\n", "\\n")


def mask_args(argv: list[str]) -> list[str]:
    out: list[str] = []
    tool = ""  # the last mysql-family or sshpass program named: its -p takes a password
    expect = ""  # what the previous option says this argument is: "secret", "user" or ""
    for arg in argv:
        if expect == "secret":
            out.append(REDACTED)
            expect = ""
            continue
        if expect == "user":
            arg = _user_pass(arg)
        program = arg.rsplit("/", 1)[-1]
        if program in _MYSQL or program == "sshpass":
            tool = program
        shown, expect = _option(arg, tool) if not expect else (arg, "")
        out.append(_text(shown, mysql=tool in _MYSQL))
    return out


def _option(arg: str, tool: str) -> tuple[str, str]:
    """(the argument as shown, what the next argument is: "secret", "user" or "")."""
    if not arg.startswith("-") or arg == "--":
        return arg, ""
    name, eq, value = arg.partition("=")
    if _secret_option(name):
        return (f"{name}={REDACTED}", "") if eq and value else (arg, "" if eq else "secret")
    if arg.startswith("-p") and not arg.startswith("--"):
        if tool in _MYSQL and len(arg) > 2:
            return "-p" + REDACTED, ""
        if tool == "sshpass":
            return ("-p" + REDACTED, "") if len(arg) > 2 else (arg, "secret")
    if name in _USER_OPTIONS:
        return (f"{name}={_user_pass(value)}", "") if eq else (arg, "user")
    if arg.startswith("-u") and not arg.startswith("--") and len(arg) > 2:
        return "-u" + _user_pass(arg[2:]), ""
    return arg, ""


def _secret_option(name: str) -> bool:
    from memsync.checks.secrets import secret_name

    key = name.lstrip("-").lower().replace("-", "_")
    if not key or len(name) - len(name.lstrip("-")) not in (1, 2) or len(key) < 2:
        return False
    if key.endswith(_NOT_A_VALUE) or key.startswith(("no_", "ask_")):
        return False
    return key in _EXTRA_SECRET_OPTIONS or secret_name(key)


def _user_pass(value: str) -> str:
    user, colon, password = value.partition(":")
    if not colon or not password or password.isdigit() or password.startswith("$"):  # a uid:gid, a variable
        return value
    return f"{user}:{REDACTED}"


def _text(arg: str, *, mysql: bool) -> str:
    """Rules that apply anywhere inside an argument (a header, a URL, a `sh -c` script)."""
    arg = _HEADER_RE.sub(lambda m: f"{m[1]}{m[2]}{m[3] or ''}{REDACTED}", arg)
    arg = _URL_USERINFO_RE.sub(_url_userinfo, arg)
    arg = _ASSIGNMENT_RE.sub(_assignment, arg)
    if any(c in arg for c in " \t\n;&|") or arg.startswith("-"):  # a script or an option
        arg = _INLINE_OPTION_RE.sub(_inline_option, arg)
        if mysql or "mysql" in arg or "mariadb" in arg:
            arg = _INLINE_MYSQL_RE.sub("-p" + REDACTED, arg)
        arg = _INLINE_USER_RE.sub(lambda m: m[0] if m[3].isdigit() or m[3].startswith("$")
                                  else f"{m[1]}{m[2]}:{REDACTED}", arg)
    from memsync.checks.secrets import mask

    return mask(arg)  # the scanner's own formats, anywhere in the argument


def _url_userinfo(m: re.Match[str]) -> str:
    scheme, userinfo = m[1], m[2]
    if REDACTED in userinfo:
        return m[0]
    user, colon, _ = userinfo.partition(":")
    if colon:
        return f"{scheme}://{user}:{REDACTED}@"
    if scheme.lower() in ("http", "https"):
        return f"{scheme}://{REDACTED}@"  # a token as the user name, as GitHub's are often written
    return m[0]


def _assignment(m: re.Match[str]) -> str:
    from memsync.checks.secrets import secret_name

    value = m[2].strip("'\"")
    if not value or value.startswith("$") or REDACTED in value or not secret_name(m[1]):
        return m[0]
    return f"{m[1]}={REDACTED}"


def _inline_option(m: re.Match[str]) -> str:
    name, sep, value = m[1], m[2], m[3]
    if not _secret_option(name) or REDACTED in value or value.startswith("-"):
        return m[0]
    if value.strip("'\"").startswith("$"):
        return m[0]  # a variable reference, not the secret itself
    return f"{name}{sep}{REDACTED}"
