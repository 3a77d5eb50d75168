"""``hookbus gateway``: agent-CLI hooks over HTTP, answered by the fleet.

Claude Code's ``http`` hook type POSTs the same JSON a command hook reads on stdin and reads
the same JSON back. A gateway is one long-lived process, so it pays no process start per
event; it answers exactly as ``hookbus <cli> hook`` does (same adapter table, same code:
:func:`hookbus.harnesses.lean.hook.answer_event`), with pooled Redis connections and a cached
answer to "is a chain worker alive?".

Paths (the ones NVIDIA NeMo Guardrails' hooks server uses for the same job):
``POST /v1/hooks/<cli>`` for each adapter (``claude-code``...), ``GET /healthz``. An optional
bearer token guards the hook paths. ``?timeout=S`` tells the gateway the hook entry's timeout
(the installer writes it), so the deadline stays under it as the command's does.

Built on starlette + uvicorn. Every accepted connection has TCP_NODELAY (asyncio sets it on
TCP transports): without it a keep-alive POST waits on delayed ACKs (docs/performance.md).
"""

from __future__ import annotations

import contextlib
import hmac
import json
import logging
import os
import threading
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route as HttpRoute

from hookbus.bus.resp import connect, mask_url
from hookbus.harnesses.adapters import ADAPTER_MODULES, Output, adapter
from hookbus.harnesses.lean.config import LeanConfig
from hookbus.harnesses.lean.hook import DEFAULT_ENTRY_TIMEOUT_S, Liveness, answer_event

if TYPE_CHECKING:
    from hookbus.bus.resp.client import RespConnection
    from hookbus.bus.resp.cluster import ClusterConnection

    Connection = RespConnection | ClusterConnection

log = logging.getLogger(__name__)

#: Path prefix of the hook endpoints; the adapter name follows.
HOOKS_PREFIX = "/v1/hooks/"
#: Most idle Redis connections kept for reuse (a waiting request holds one for its BLPOP).
MAX_IDLE_CONNECTIONS = 64
#: Largest request body accepted, in bytes.
MAX_BODY_BYTES = 4 * 1024 * 1024


class ConnectionPool:
    """Idle lean connections (:func:`hookbus.bus.resp.connect`: one socket, or routed over
    a Redis Cluster's masters) for the gateway's worker threads. A connection whose read
    timed out closes itself, so it comes back closed and reconnects on next use."""

    def __init__(self, url: str, max_idle: int = MAX_IDLE_CONNECTIONS) -> None:
        self.url = url
        self.max_idle = max_idle
        self._idle: list[Connection] = []
        self._lock = threading.Lock()

    def take(self) -> Connection:
        with self._lock:
            if self._idle:
                return self._idle.pop()
        return connect(self.url)

    def give_back(self, conn: Connection) -> None:
        with self._lock:
            if len(self._idle) < self.max_idle:
                self._idle.append(conn)
                return
        conn.close()

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()


def create_app(cfg: LeanConfig, *, token: str | None = None) -> Starlette:
    """The ASGI app: one hook path per adapter of the table, and ``/healthz``."""
    pool = ConnectionPool(cfg.redis_url)
    liveness = Liveness()
    environ = dict(os.environ)
    environ.pop("TMUX", None)  # the gateway's own terminal says nothing about the agent's

    def answer(cli: str, data: dict[str, Any], timeout_s: float) -> Output:
        conn = pool.take()
        try:
            return answer_event(
                adapter(cli),
                data,
                environ=environ,
                entry_timeout_s=timeout_s,
                cfg=cfg,
                conn=conn,
                liveness=liveness,
            )
        finally:
            pool.give_back(conn)

    async def hook(request: Request) -> Response:
        cli = request.path_params["cli"]
        if cli not in ADAPTER_MODULES:
            return JSONResponse({"error": f"no adapter {cli!r}"}, status_code=404)
        if token is not None and not _authorised(request, token):
            return JSONResponse({"error": "missing or wrong bearer token"}, status_code=401)
        body = await request.body()
        if len(body) > MAX_BODY_BYTES:
            return JSONResponse({"error": "request body too large"}, status_code=413)
        try:
            data = json.loads(body)
            timeout_s = float(request.query_params.get("timeout", DEFAULT_ENTRY_TIMEOUT_S))
        except ValueError as exc:
            return JSONResponse({"error": f"not a hook event: {exc}"}, status_code=400)
        if not isinstance(data, dict):
            return JSONResponse({"error": "not a hook event: not a JSON object"}, status_code=400)
        output = await run_in_threadpool(answer, cli, data, timeout_s)
        if output.stderr:
            log.info("%s %s: %s", cli, data.get("hook_event_name"), output.stderr)
        if output.exit_code != 0:
            # an event the adapter cannot read: the CLI treats a failed call per its
            # onFailure (guards block)
            return JSONResponse({"error": output.stderr or "bad hook input"}, status_code=400)
        return JSONResponse(dict(output.stdout or {}))

    async def healthz(request: Request) -> Response:
        conn = pool.take()
        try:
            await run_in_threadpool(conn.call, "PING")
        except Exception as exc:  # report any failure to reach Redis, never raise
            where = {"redis_url": mask_url(cfg.redis_url), "namespace": cfg.namespace}
            return JSONResponse({"ok": False, "redis": str(exc), **where}, status_code=503)
        finally:
            pool.give_back(conn)
        return JSONResponse({"ok": True, "adapters": sorted(ADAPTER_MODULES)})

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        pool.close()

    return Starlette(
        routes=[
            HttpRoute(HOOKS_PREFIX + "{cli}", hook, methods=["POST"]),
            HttpRoute("/healthz", healthz, methods=["GET"]),
        ],
        lifespan=lifespan,
    )


def _authorised(request: Request, token: str) -> bool:
    given = request.headers.get("authorization", "")
    scheme, _, value = given.partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(value.strip(), token)


def serve(cfg: LeanConfig, *, host: str, port: int, token: str | None = None) -> None:
    """Run the gateway until interrupted (uvicorn, one process, keep-alive connections)."""
    import uvicorn

    config = uvicorn.Config(
        create_app(cfg, token=token),
        host=host,
        port=port,
        access_log=False,
        log_level="warning",
        lifespan="on",
    )
    uvicorn.Server(config).run()
