"""The console's pages, one handler per view, rendered by :mod:`hookbus.console.render`.

Each page has a *live region* (``data-live`` = the URL of its fragment): when the live
stream says something changed, ``console.js`` fetches the fragment again and swaps it in.
So the same template code renders the first view and every update.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import Response

from hookbus.console import charts, data, decision_log
from hookbus.console.render import Renderer

if TYPE_CHECKING:
    from hookbus.console.app import Console
    from hookbus.console.auth import Caller

Page = Callable[[Request, "Console", "Caller"], Awaitable[Response]]


def overview(renderer: Renderer) -> Page:
    async def handler(request: Request, console: Console, caller: Caller) -> Response:
        status = await console.call(data.overview, console.settings)
        picked = request.query_params.get("range", charts.DEFAULT_RANGE)
        chart = await console.call(charts.activity, console.settings, picked)
        name = "overview_rows.html" if request.query_params.get("fragment") else "overview.html"
        return renderer.page(request, name, {"s": status, "chart": chart}, caller=caller)

    return handler


def decisions(renderer: Renderer) -> Page:
    async def handler(request: Request, console: Console, caller: Caller) -> Response:
        filters = {k: request.query_params.get(k, "") for k in decision_log.DECISION_FILTERS}
        rows = await console.call(decision_log.decisions, console.settings, limit=200, **filters)
        query = urlencode({k: v for k, v in filters.items() if v})
        kept = {k: v for k, v in filters.items() if v and k != "before"}
        older = urlencode({**kept, "before": rows[-1]["entry"]} if rows else kept)
        name = "decision_rows.html" if request.query_params.get("fragment") else "decisions.html"
        context = {"rows": rows, "filters": filters, "query": query, "older": older}
        return renderer.page(request, name, context, caller=caller)

    return handler


def approvals(renderer: Renderer) -> Page:
    async def handler(request: Request, console: Console, caller: Caller) -> Response:
        found = await console.call(data.approvals, console.settings)
        name = "approval_rows.html" if request.query_params.get("fragment") else "approvals.html"
        return renderer.page(request, name, {"a": found}, caller=caller)

    return handler


def hooks(renderer: Renderer) -> Page:
    async def handler(request: Request, console: Console, caller: Caller) -> Response:
        found = await console.call(data.hooks, console.settings, console.hooks_dir)
        return renderer.page(request, "hooks.html", {"h": found}, caller=caller)

    return handler


def dead(renderer: Renderer) -> Page:
    async def handler(request: Request, console: Console, caller: Caller) -> Response:
        job_id = request.path_params.get("job_id")
        if job_id:
            shown = await console.call(data.dead_show, console.settings, job_id)
            return renderer.page(request, "dead_one.html", {"job": shown}, caller=caller)
        found = await console.call(data.dead, console.settings)
        return renderer.page(request, "dead.html", {"d": found}, caller=caller)

    return handler


def not_found(renderer: Renderer) -> Page:
    async def handler(request: Request, console: Console, caller: Caller) -> Response:
        return renderer.page(
            request, "reconnecting.html", {"error": "no such page"}, status=404, caller=caller
        )

    return handler


def ROUTES(renderer: Renderer) -> list[tuple[str, Page, list[str]]]:
    """The page routes (``/`` is the overview, routed by the app with the token login)."""
    return [
        ("/decisions", decisions(renderer), ["GET"]),
        ("/approvals", approvals(renderer), ["GET"]),
        ("/hooks", hooks(renderer), ["GET"]),
        ("/dead", dead(renderer), ["GET"]),
        ("/dead/{job_id}", dead(renderer), ["GET"]),
    ]
