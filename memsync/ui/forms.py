"""What the page does, unless it is read-only: restore a file at a version, restore a losing
version from a gathered conflict file, revert a version or a run. Each is a GET that shows what
will happen (the confirmation step) and a POST from that page's form (CSRF token, Origin checked
by the gate) that does it through actions.py, then shows the new version."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from memsync.errors import UsageError
from memsync.history.forensics import Outcome
from memsync.ui import actions, views
from memsync.ui.context import Context, with_error_page
from memsync.ui.hubview import NotFound

KINDS = {"restore": "Restore a file", "restore-conflict": "Restore a losing version", "revert": "Revert"}


def routes(ctx: Context) -> list[BaseRoute]:
    if ctx.read_only:
        return []

    async def confirm(request: Request) -> Response:
        name, kind = request.path_params["name"], request.path_params["kind"]
        fields = _fields(kind, dict(request.query_params))
        tip = ctx.view.tip(name)
        _check(ctx, tip, kind, fields)
        return ctx.render(request, "confirm.html", name=name, kind=kind, title=KINDS[kind], fields=fields)

    async def act(request: Request) -> Response:
        name, kind = request.path_params["name"], request.path_params["kind"]
        form = await request.form()
        if not ctx.gate.csrf_ok(form.get("csrf")):
            return ctx.render(request, "error.html", status=403, message="refused: the form's token is missing "
                              "or wrong", hint="start again from the page", code=None)
        fields = _fields(kind, {k: v for k, v in form.items() if isinstance(v, str)})
        ctx.view.tip(name)
        outcome = _do(ctx, name, kind, fields)
        ctx.view.refresh(force=True)
        return ctx.render(request, "done.html", name=name, title=KINDS[kind], fields=fields, outcome=outcome)

    return [Route("/m/{name}/do/{kind}", with_error_page(ctx, confirm), methods=["GET"]),
            Route("/m/{name}/do/{kind}", with_error_page(ctx, act), methods=["POST"])]


def _fields(kind: str, given: dict[str, str]) -> dict[str, str]:
    wanted = {"restore": ("path", "at"), "restore-conflict": ("path", "id"), "revert": ("rev",)}.get(kind)
    if wanted is None:
        raise NotFound(f"no action {kind!r}", "the page's own buttons name the actions")
    fields = {k: given.get(k, "") for k in wanted}
    missing = [k for k, v in fields.items() if not v]
    if missing:
        raise UsageError(f"{kind} needs {missing[0]}=", "use the page's own buttons")
    return fields


def _check(ctx: Context, tip: str, kind: str, fields: dict[str, str]) -> None:
    """What the confirmation shows must exist: the version (and the file at it), or the run."""
    git = ctx.view.git
    if kind == "restore":
        views.content(git, fields["at"], fields["path"])
    elif kind == "restore-conflict":
        listed = {(e.path, e.id) for f in views.conflicts(git, tip) for e in f.entries}
        if (fields["path"], fields["id"]) not in listed:
            raise NotFound(f"no losing version {fields['id']!r} of {fields['path']!r} waits to be folded",
                           "the conflicts page lists them")
    elif kind == "revert":
        rev = fields["rev"]
        if rev.startswith("run:"):
            views.run(git, tip, rev[len("run:"):])
        else:
            views.resolve(git, rev)


def _do(ctx: Context, name: str, kind: str, fields: dict[str, str]) -> Outcome:
    if kind == "restore":
        at = views.resolve(ctx.view.git, fields["at"])  # a version by its id: never ref syntax from a form
        return actions.restore(ctx.view, name, fields["path"], at)
    if kind == "restore-conflict":
        return actions.restore_conflict(ctx.view, name, fields["path"], fields["id"])
    rev = fields["rev"]
    if not rev.startswith("run:"):
        rev = views.resolve(ctx.view.git, rev)
    return actions.revert(ctx.view, name, rev)
