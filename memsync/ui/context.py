"""What every section of the page shares: the hub, the templates (Jinja2, autoescaping on, so
everything a template shows is escaped), the gate, and the rendering of errors."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import jinja2
from starlette.requests import Request
from starlette.responses import Response
from starlette.templating import Jinja2Templates

from memsync.errors import MemsyncError, UsageError
from memsync.ui.hubview import HubView, NotFound
from memsync.ui.security import Gate
from memsync.util.records import recordclass
from memsync.util.timefmt import age

HERE = Path(__file__).resolve().parent
Handler = Callable[[Request], Awaitable[Response]]


@recordclass
class Context:
    """What every route of one page shares."""

    view: HubView
    templates: Jinja2Templates
    gate: Gate
    read_only: bool

    def render(self, request: Request, template: str, status: int = 200, **values: Any) -> Response:
        values.update(hub=self.view.display, read_only=self.read_only, csrf=self.gate.csrf())
        return self.templates.TemplateResponse(request, template, values, status_code=status)


def templates() -> Jinja2Templates:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(HERE / "templates"), autoescape=True,
                             undefined=jinja2.StrictUndefined)
    env.filters["size"] = human_size
    env.filters["age"] = age
    return Jinja2Templates(env=env)


def human_size(n: int | None) -> str:
    if n is None:
        return "-"
    if n < 1024:
        return f"{n} bytes"
    if n < 1024 * 1024:
        return f"{n / 1024:.1f} KiB"
    return f"{n / (1024 * 1024):.1f} MiB"


def with_error_page(ctx: Context, handler: Handler) -> Handler:
    """A route whose memsync errors are a page with the error and its hint, never a traceback."""

    async def answer(request: Request) -> Response:
        try:
            return await handler(request)
        except MemsyncError as exc:
            status = 404 if isinstance(exc, NotFound) else 400 if isinstance(exc, UsageError) else 409
            return ctx.render(request, "error.html", status=status, message=exc.message, hint=exc.hint,
                              code=exc.exit_code)

    return answer


def page_number(request: Request) -> int:
    try:
        page = int(request.query_params.get("page", "0"))
    except ValueError:
        raise UsageError("page= takes a number", "use the page's own links") from None
    if not 0 <= page <= 100_000:
        raise UsageError("page= is out of range", "use the page's own links")
    return page
