"""The console's ASGI app: pages, the JSON API, the live stream, and their guard.

Every route but ``/login`` and the static files needs a caller (:mod:`~hookbus.console.auth`);
every ``POST`` also passes the CSRF check. Library calls run in the thread pool. Redis
being away never shows a traceback: pages say they are reconnecting (and retry on their
own), the API answers 503 with the reason.
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import (
    JSONResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from hookbus.bus.ids import user_at_host
from hookbus.console import api, pages
from hookbus.console.auth import COOKIE, SESSION_TTL_S, Caller, ConsoleAuth
from hookbus.console.live import events
from hookbus.console.render import Renderer
from hookbus.errors import HookBusError

if TYPE_CHECKING:
    from hookbus.bus.settings.loader import Settings

log = logging.getLogger(__name__)

HERE = Path(__file__).parent
Handler = Callable[[Request], Awaitable[Response]]


class Console:
    """What every handler needs: the settings, the hooks folder, the auth, the operator."""

    def __init__(self, settings: Settings, hooks_dir: Path, auth: ConsoleAuth, operator: str):
        self.settings = settings
        self.hooks_dir = hooks_dir
        self.auth = auth
        self.operator = operator

    def who(self, caller: Caller) -> str:
        """Who decides for this call: the operator whose own token it carries, else the
        console's operator (its one shared token)."""
        return caller.operator or self.operator

    async def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run a library function in the thread pool."""
        return await run_in_threadpool(fn, *args, **kwargs)


def default_operator() -> str:
    """Who decides through this console: ``operator:<user>@<host>`` of its process."""
    return f"operator:{user_at_host()}"


def create_app(
    settings: Settings,
    *,
    token: str | None = None,
    operators: Mapping[str, str] | None = None,
    hooks_dir: Path | None = None,
    operator: str | None = None,
) -> Starlette:
    """The console for ``settings``' namespace, guarded by ``token`` and by each of
    ``operators``' tokens (token -> operator name)."""
    console = Console(
        settings,
        Path(hooks_dir if hooks_dir is not None else settings.hooks_dir),
        ConsoleAuth(token, operators=operators),
        operator or default_operator(),
    )
    renderer = Renderer(HERE / "templates")

    def guarded(
        handler: Callable[[Request, Console, Caller], Awaitable[Response]], *, json: bool
    ) -> Handler:
        async def endpoint(request: Request) -> Response:
            caller = console.auth.caller(request)
            if caller is None:
                if json:
                    return JSONResponse(
                        {"error": "unauthorized: log in or send the bearer token"}, 401
                    )
                shown = {"error": None, "next": request.url.path}
                return renderer.page(request, "login.html", shown, status=401)
            if request.method == "POST" and not console.auth.may_change(request, caller):
                return JSONResponse({"error": "refused: missing or wrong CSRF token"}, 403)
            try:
                return await handler(request, console, caller)
            except HookBusError as exc:
                log.info("console: %s", exc)
                if json:
                    return JSONResponse({"error": str(exc), "reconnecting": True}, 503)
                return renderer.page(request, "reconnecting.html", {"error": str(exc)}, status=503)
            except Exception:
                log.exception("console: %s %s failed", request.method, request.url.path)
                if json:
                    return JSONResponse({"error": "internal error (see the console's log)"}, 500)
                return renderer.page(
                    request, "reconnecting.html", {"error": "internal error"}, status=500
                )

        return endpoint

    async def root(request: Request) -> Response:
        given = request.query_params.get("token")
        if given is not None:
            return _login_response(console.auth, given, renderer, request)
        return await guarded(pages.overview(renderer), json=False)(request)

    async def login(request: Request) -> Response:
        if request.method == "GET":
            return renderer.page(request, "login.html", {"error": None})
        form = await request.form()
        target = _local_target(str(form.get("next", "/")), str(form.get("fragment", "")))
        return _login_response(
            console.auth, str(form.get("token", "")), renderer, request, target=target
        )

    async def logout(request: Request) -> Response:
        # another site's form would log the operator out: its answer deletes the cookie
        if not console.auth.same_origin(request):
            return JSONResponse({"error": "refused: a logout from another site"}, 403)
        console.auth.logout(request.cookies.get(COOKIE))
        response = RedirectResponse("/login", 303)
        response.delete_cookie(COOKIE)
        return response

    async def stream(request: Request, console: Console, caller: Caller) -> Response:
        return StreamingResponse(
            events(request, console.settings),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield

    routes = [
        Route("/", root, methods=["GET"]),
        Route("/login", login, methods=["GET", "POST"]),
        Route("/logout", logout, methods=["POST"]),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
        Route("/api/stream", guarded(stream, json=True), methods=["GET"]),
    ]
    for path, handler, methods in pages.ROUTES(renderer):
        routes.append(Route(path, guarded(handler, json=False), methods=methods))
    for path, handler, methods in api.ROUTES:
        routes.append(Route(path, guarded(handler, json=True), methods=methods))
    routes.append(
        Route("/api/{rest:path}", guarded(api.not_found, json=True), methods=["GET", "POST"])
    )
    routes.append(
        Route(
            "/{rest:path}", guarded(pages.not_found(renderer), json=False), methods=["GET", "POST"]
        )
    )
    return Starlette(routes=routes, lifespan=lifespan)


#: What a login may go on to: a page of this console, and an item's id after ``#``.
_LOCAL_PATH = re.compile(r"/[A-Za-z0-9/_-]*\Z")
_FRAGMENT = re.compile(r"[A-Za-z0-9_-]{1,64}\Z")


def _local_target(path: str, fragment: str) -> str:
    """Where a login goes on to: ``path`` when it is one of the console's own (never
    another site's: no ``//``, no scheme), with ``#fragment`` when it is an item's id."""
    if not _LOCAL_PATH.match(path) or path.startswith("//"):
        path = "/"
    return f"{path}#{fragment}" if _FRAGMENT.match(fragment) else path


def _login_response(
    auth: ConsoleAuth,
    given: str,
    renderer: Renderer,
    request: Request,
    *,
    target: str = "/",
) -> Response:
    sid = auth.login(given)
    if sid is None:
        return renderer.page(request, "login.html", {"error": "wrong token"}, status=401)
    response = RedirectResponse(target, 303)
    response.set_cookie(
        COOKIE,
        sid,
        max_age=SESSION_TTL_S,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
        path="/",
    )
    return response


def is_loopback(host: str) -> bool:
    """Whether ``host`` listens only on this machine."""
    import ipaddress

    if host in ("localhost", ""):
        return host == "localhost"
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def serve(
    settings: Settings,
    *,
    host: str,
    port: int,
    token: str | None = None,
    operators: Mapping[str, str] | None = None,
    hooks_dir: Path | None = None,
    operator: str | None = None,
) -> None:
    """Run the console until interrupted (uvicorn, one process)."""
    import uvicorn

    app = create_app(
        settings, token=token, operators=operators, hooks_dir=hooks_dir, operator=operator
    )
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        access_log=False,
        log_level="warning",
        lifespan="on",
        timeout_graceful_shutdown=1,
    )
    uvicorn.Server(config).run()
