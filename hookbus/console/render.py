"""The console's rendering: the jinja2 environment of its templates (autoescaped, strict about
undefined names), the filters they use for times, and the security headers of every page.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jinja2
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

if TYPE_CHECKING:
    from hookbus.console.auth import Caller


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
