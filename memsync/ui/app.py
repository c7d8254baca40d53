"""The page's application: the gate (security.py) in front of Starlette routes. Each section of
the page is a module with a `routes(ctx)` function (pages.py: what it shows; forms.py: what it
does), so a new section is one module and its templates, added to SECTIONS."""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.routing import BaseRoute, Mount
from starlette.staticfiles import StaticFiles

from memsync.ui import forms, pages, proposals
from memsync.ui.context import HERE, Context, templates
from memsync.ui.hubview import HubView
from memsync.ui.security import Gate

SECTIONS = (pages, forms, proposals)


def build(view: HubView, token: str, port: int, read_only: bool) -> Gate:
    """The ASGI application to serve: the gate, in front of the routes."""
    routes: list[BaseRoute] = [Mount("/static", StaticFiles(directory=HERE / "static"), name="static")]
    app = Starlette(routes=routes)
    gate = Gate(app, token, port)
    ctx = Context(view, templates(), gate, read_only)
    for section in SECTIONS:
        routes.extend(section.routes(ctx))
    app.router.routes[:] = routes
    return gate


