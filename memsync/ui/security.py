"""What every request must show before the page answers it (docs/SECURITY.md, "The page").

- the random token printed in the URL, once; it is then an HttpOnly SameSite=Strict cookie
  (named after the port, so two pages on this machine do not share one) and the URL loses it;
- a Host header naming the loopback address and this port (a DNS rebinding page reaches
  127.0.0.1 under its own name, and is refused here);
- for a POST: an Origin header that is this page's own origin; the form's CSRF token is checked
  by the action itself (csrf_ok), since it is in the body.

Every answer carries a Content-Security-Policy that allows only the page's own style sheet and
images, and no script at all.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Awaitable, Callable, MutableMapping
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qsl, urlencode

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

CSP = ("default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
       "frame-ancestors 'none'; base-uri 'none'")
HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"same-origin"),  # not no-referrer: with it a form POST says Origin: null
    (b"cache-control", b"no-store"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
]


class Gate:
    """ASGI middleware: refuses a request that lacks the token, names a foreign host, or posts
    from another origin; adds the security headers to every answer."""

    def __init__(self, app: ASGIApp, token: str, port: int) -> None:
        self.app = app
        self.token = token
        self.port = port
        self.cookie = f"memsync_ui_{port}"
        self.hosts = {f"127.0.0.1:{port}", f"localhost:{port}"}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            if scope["type"] == "lifespan":
                await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        host = headers.get("host", "")
        if host not in self.hosts:
            await _refuse(send, 421, "refused: this page answers only to 127.0.0.1 (the Host header names another)")
            return
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True))
        given = query.pop("token", None)
        if given is not None:
            if not hmac.compare_digest(given.encode(), self.token.encode()):
                await _refuse(send, 403, "refused: wrong token (use the URL memsync ui printed)")
                return
            await self._admit(send, scope["path"], query)
            return
        if not hmac.compare_digest(_cookie(headers, self.cookie).encode(), self.token.encode()):
            await _refuse(send, 403, "refused: open the URL memsync ui printed (it holds the page's token)")
            return
        if scope["method"] not in ("GET", "HEAD"):
            origin = headers.get("origin")
            if origin != f"http://{host}":
                await _refuse(send, 403, "refused: a change must come from this page (cross-origin request)")
                return
        await self.app(scope, receive, _with_headers(send))

    async def _admit(self, send: Send, path: str, query: dict[str, str]) -> None:
        """The token once: a cookie, and the same page without the token in its URL."""
        target = path + (("?" + urlencode(query)) if query else "")
        cookie = f"{self.cookie}={self.token}; Path=/; HttpOnly; SameSite=Strict"
        await send({"type": "http.response.start", "status": 303,
                    "headers": [(b"location", target.encode("latin-1", "replace")),
                                (b"set-cookie", cookie.encode()), *HEADERS]})
        await send({"type": "http.response.body", "body": b""})

    def csrf(self) -> str:
        """The form token of this page's session (the cookie's token, keyed)."""
        return hmac.new(self.token.encode(), b"memsync-ui-csrf", hashlib.sha256).hexdigest()

    def csrf_ok(self, given: object) -> bool:
        return isinstance(given, str) and hmac.compare_digest(given.encode(), self.csrf().encode())


def _cookie(headers: dict[str, str], name: str) -> str:
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(headers.get("cookie", ""))
    except Exception:  # a malformed Cookie header is no cookie (http.cookies raises CookieError)
        return ""
    morsel = jar.get(name)
    return morsel.value if morsel is not None else ""


def _with_headers(send: Send) -> Send:
    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            message["headers"] = [*message.get("headers", []), *HEADERS]
        await send(message)

    return sending


async def _refuse(send: Send, status: int, text: str) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"text/plain; charset=utf-8"), *HEADERS]})
    await send({"type": "http.response.body", "body": (text + "\n").encode()})
