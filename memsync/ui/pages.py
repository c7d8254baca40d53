"""What the page shows: the memories, a memory's timeline and size chart, a version's diff, a
file's history and content, a run, and the conflicts waiting to be folded. Every view is a GET
with its place in the URL (linkable) and a `page=` for long lists."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from memsync.git import history
from memsync.ui import chart, views
from memsync.ui.context import Context, page_number, with_error_page
from memsync.ui.diffs import render_patches

CHART_POINTS = 120


def routes(ctx: Context) -> list[BaseRoute]:
    async def memories(request: Request) -> Response:
        return ctx.render(request, "memories.html", found=views.memories(ctx.view, page_number(request)))

    async def timeline(request: Request) -> Response:
        name = request.path_params["name"]
        tip = ctx.view.tip(name)
        page = page_number(request)
        found = views.timeline(ctx.view.git, tip, page)
        path = request.query_params.get("file") or None
        start = found.rows[0].oid if found.rows else tip
        drawn = chart.size_chart(ctx.view.git, start, CHART_POINTS, path)
        return ctx.render(request, "timeline.html", name=name, found=found, chart=drawn, file=path or "")

    async def version(request: Request) -> Response:
        name = request.path_params["name"]
        ctx.view.tip(name)
        found = views.version(ctx.view.git, request.path_params["rev"], page_number(request))
        return ctx.render(request, "version.html", name=name, v=found, patches=render_patches(found.patches))

    async def file(request: Request) -> Response:
        name = request.path_params["name"]
        path = request.path_params["path"]
        tip = ctx.view.tip(name)
        at = request.query_params.get("at")
        if at:
            return ctx.render(request, "content.html", name=name, c=views.content(ctx.view.git, at, path))
        found = views.file_history(ctx.view.git, tip, path, page_number(request))
        flagged = {r.oid: views.flags_naming(r, path) for r in found.rows}
        return ctx.render(request, "file.html", name=name, path=path, found=found, flagged=flagged)

    async def run(request: Request) -> Response:
        name = request.path_params["name"]
        tip = ctx.view.tip(name)
        found = views.run(ctx.view.git, tip, request.path_params["run_id"])
        patches = (history.diff(ctx.view.git, found.base, found.result) if found.result is not None else [])
        files = views.cut(patches, page_number(request), views.FILES_PER_PAGE)
        return ctx.render(request, "run.html", name=name, r=found, files=files, patches=render_patches(files.items))

    async def conflicts(request: Request) -> Response:
        name = request.path_params["name"]
        tip = ctx.view.tip(name)
        found = views.cut(views.conflicts(ctx.view.git, tip), page_number(request))
        return ctx.render(request, "conflicts.html", name=name, found=found)

    return [
        Route("/", with_error_page(ctx, memories)),
        Route("/m/{name}", with_error_page(ctx, timeline)),
        Route("/m/{name}/v/{rev}", with_error_page(ctx, version)),
        Route("/m/{name}/f/{path:path}", with_error_page(ctx, file)),
        Route("/m/{name}/run/{run_id}", with_error_page(ctx, run)),
        Route("/m/{name}/conflicts", with_error_page(ctx, conflicts)),
    ]
