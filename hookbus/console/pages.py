"""The console's pages: server-rendered with jinja2 (autoescaped), one per view.

Each page has a *live region* (``data-live`` = the URL of its fragment): when the live
stream says something changed, ``console.js`` fetches the fragment again and swaps it in.
So the same template code renders the first view and every update.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jinja2
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from hookbus.console import data

if TYPE_CHECKING:
    from hookbus.console.app import Console
    from hookbus.console.auth import Caller

Page = Callable[[Request, "Console", "Caller"], Awaitable[Response]]
#: The filters the Decisions page takes from its query string.
DECISION_FILTERS = ("agent", "session", "kind", "outcome", "hook")


def _clock(ms: Any) -> str:
    if not ms:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(int(ms) / 1000))


def _ago(ms: Any) -> str:
    if not ms:
        return "-"
    seconds = max(int(time.time() - int(ms) / 1000), 0)
    return f"{seconds} s ago" if seconds < 120 else f"{seconds // 60} min ago"


def _left(ms: Any) -> str:
    return f"{max(int(int(ms) / 1000 - time.time()), 0)} s" if ms else "-"


class Renderer:
    """The jinja2 environment of the console's templates."""

    def __init__(self, folder: Path) -> None:
        self.env = jinja2.Environment(
            loader=jinja2.FileSystemLoader(folder),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
        )
        self.env.filters.update(clock=_clock, ago=_ago, left=_left)

    def render(self, name: str, context: dict[str, Any]) -> str:
        return self.env.get_template(name).render(**context)

    def page(
        self,
        request: Request,
        name: str,
        context: dict[str, Any],
        *,
        status: int = 200,
        caller: Caller | None = None,
    ) -> Response:
        csrf = caller.session.csrf if caller is not None and caller.session is not None else ""
        body = self.render(name, {"path": request.url.path, "csrf": csrf, **context})
        return HTMLResponse(body, status, headers=_HEADERS)


#: Sent with every page: no framing by other sites, no sniffing, no caching, no referrer.
_HEADERS = {
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-store",
    "Referrer-Policy": "no-referrer",
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; frame-ancestors 'none'; form-action 'self'"
    ),
}


def overview(renderer: Renderer) -> Page:
    async def handler(request: Request, console: Console, caller: Caller) -> Response:
        status = await console.call(data.overview, console.settings)
        name = "overview_rows.html" if request.query_params.get("fragment") else "overview.html"
        return renderer.page(request, name, {"s": status}, caller=caller)

    return handler


def decisions(renderer: Renderer) -> Page:
    async def handler(request: Request, console: Console, caller: Caller) -> Response:
        filters = {k: request.query_params.get(k, "") for k in DECISION_FILTERS}
        rows = await console.call(data.decisions, console.settings, limit=200, **filters)
        query = "&".join(f"{k}={v}" for k, v in filters.items() if v)
        name = "decision_rows.html" if request.query_params.get("fragment") else "decisions.html"
        context = {"rows": rows, "filters": filters, "query": query}
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
