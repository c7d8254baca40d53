"""The proposals of a memory: the list (open ones; `?all=1` closed ones too), a proposal's review
(what accepting would change now, flags first, the diff file by file, the forgetting report),
and, unless the page is read-only, accept and reject as forms.py does its actions: a GET that
names the CLI equivalent (the confirmation step) and a POST from that page's form (CSRF token,
Origin checked by the gate), through the same core as `memsync accept` / `memsync reject`."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from memsync.errors import UsageError
from memsync.git.history import FilePatch
from memsync.history.reviewing import Review
from memsync.sync.proposals import ProposalNotFound
from memsync.ui import actions
from memsync.ui.context import Context, with_error_page
from memsync.ui.diffs import ShownPatch, render_patches
from memsync.ui.hubview import NotFound
from memsync.util.names import check_run_id

T = TypeVar("T")
KINDS = {"accept": "Accept the proposal", "reject": "Reject the proposal"}
MAX_REASON = 500


def routes(ctx: Context) -> list[BaseRoute]:
    async def listing(request: Request) -> Response:
        name = request.path_params["name"]
        ctx.view.tip(name)
        closed = request.query_params.get("all") == "1"
        found = actions.proposals(ctx.view, name, closed)
        return ctx.render(request, "proposals.html", name=name, found=found, closed=closed)

    async def one(request: Request) -> Response:
        name, pid = _named(ctx, request)
        result = _known(lambda: actions.review(ctx.view, name, pid))
        return ctx.render(request, "proposal.html", name=name, r=result, p=result.proposal,
                          patches=patches_of(result))

    found: list[BaseRoute] = [Route("/m/{name}/proposals", with_error_page(ctx, listing)),
                              Route("/m/{name}/proposals/{pid}", with_error_page(ctx, one))]
    if not ctx.read_only:
        found += _acting(ctx)
    return found


def _acting(ctx: Context) -> list[BaseRoute]:
    async def confirm(request: Request) -> Response:
        name, pid = _named(ctx, request)
        kind = _kind(request)
        result = _known(lambda: actions.review(ctx.view, name, pid))
        if result.proposal.state != "open" and kind == "reject":
            raise UsageError(f"proposal {pid} is already {result.proposal.state}", "the list shows its state")
        return ctx.render(request, "proposal_confirm.html", name=name, kind=kind, title=KINDS[kind], r=result,
                          p=result.proposal)

    async def act(request: Request) -> Response:
        name, pid = _named(ctx, request)
        kind = _kind(request)
        form = await request.form()
        if not ctx.gate.csrf_ok(form.get("csrf")):
            return ctx.render(request, "error.html", status=403, message="refused: the form's token is missing "
                              "or wrong", hint="start again from the page", code=None)
        if kind == "accept":
            done = _known(lambda: actions.accept(ctx.view, name, pid))
            ctx.view.refresh(force=True)
            return ctx.render(request, "proposal_done.html", name=name, pid=pid, kind=kind, accepted=done,
                              rejected=None)
        reason = form.get("reason")
        text = reason.strip()[:MAX_REASON] if isinstance(reason, str) and reason.strip() else None
        closed = _known(lambda: actions.reject(ctx.view, name, pid, text))
        return ctx.render(request, "proposal_done.html", name=name, pid=pid, kind=kind, accepted=None,
                          rejected=closed)

    return [Route("/m/{name}/proposals/{pid}/{kind}", with_error_page(ctx, confirm), methods=["GET"]),
            Route("/m/{name}/proposals/{pid}/{kind}", with_error_page(ctx, act), methods=["POST"])]


def _named(ctx: Context, request: Request) -> tuple[str, str]:
    """The memory (one the page shows) and a well-formed proposal id from the URL."""
    name, pid = request.path_params["name"], request.path_params["pid"]
    ctx.view.tip(name)
    try:
        check_run_id(pid)
    except UsageError:
        raise NotFound(f"no proposal {pid!r} for memory {name!r}", "the proposals page lists them") from None
    return name, pid


def _known(work: Callable[[], T]) -> T:
    """A proposal the hub does not have is a 404 page (naming the open ones), as a version is."""
    try:
        return work()
    except ProposalNotFound as exc:
        raise NotFound(exc.message, exc.hint) from None


def _kind(request: Request) -> str:
    kind = request.path_params["kind"]
    if kind not in KINDS:
        raise NotFound(f"no action {kind!r} on a proposal", "the page's own buttons name the actions")
    return str(kind)


def patches_of(result: Review) -> list[ShownPatch]:
    """The review's files as the version page shows a diff."""
    return render_patches([FilePatch(f.path, f.kind, f.added, f.removed, f.binary, f.patch.encode())
                           for f in result.files])
