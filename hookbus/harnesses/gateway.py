"""``hookbus gateway``: agent-CLI hooks over HTTP, answered by the fleet.

Claude Code's ``http`` hook type POSTs the same JSON a command hook reads on stdin and reads
the same JSON back. A gateway is one long-lived process, so it pays no process start per
event; it maps and renders each event exactly as ``hookbus <cli> hook`` does (the same adapter
table and event builder, :mod:`hookbus.harnesses.lean.hook`) and asks the fleet through the
asyncio SDK (:class:`~hookbus.producers.async_client.AsyncHookBus`): one event loop, no
thread per request, the SDK's connection (so it follows whatever the SDK follows, a Redis
Cluster included), its liveness cache and the failure policy the current bundle publishes.

It is also where agents' credentials end: an agent holds a gateway token, never a Redis user
(docs/security.md). With a tokens file each agent has its own token and its events carry
the agent id the token stands for, whatever the body says. Limits apply before a body is
parsed (:mod:`hookbus.harnesses.gateway_http`): header and body timeouts, the body size, a
rate per identity.

Every answer is JSON. Anything the gateway cannot answer for (a body too large, too slow,
nested too deeply, a rate exceeded, the fleet down, a bug) gets the adapter's fail-closed
answer with HTTP 200: Claude Code treats a non-2xx answer of an http hook as a non-blocking
error, so an error status would let a guarded call through. The deadline runs from the
request's arrival (headers complete), and the answer comes by it under any load.

Paths (the ones NVIDIA NeMo Guardrails' hooks server uses for the same job):
``POST /v1/hooks/<cli>`` for each adapter (``claude-code``...), ``GET /healthz`` (200 when
Redis answers and a chain worker is alive, else 503 saying which is down). ``?timeout=S``
tells the gateway the hook entry's timeout (the installer writes it), so the deadline stays
under it as the command's does.

Built on starlette + uvicorn. Every accepted connection has TCP_NODELAY (asyncio sets it on
TCP transports): without it a keep-alive POST waits on delayed ACKs (docs/performance.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any

import msgspec
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route as HttpRoute

from hookbus.bus.ids import AGENT_ID_ENV
from hookbus.bus.policy import liveness
from hookbus.bus.policy.failure import unanswered
from hookbus.bus.resp import mask_url
from hookbus.bus.settings.table import normalise
from hookbus.bus.wire import Decision, Event
from hookbus.errors import HookBusError, RedisUnavailable
from hookbus.harnesses.adapters import (
    ADAPTER_MODULES,
    REQUEST,
    Adapter,
    Answer,
    Output,
    Route,
    adapter,
    agent_safe,
)
from hookbus.harnesses.gateway_http import (
    ARRIVAL_STATE,
    BodyTooLarge,
    GuardedH11Protocol,
    RateLimiter,
    TokenTable,
    parse_timeout,
    read_body,
)
from hookbus.harnesses.lean.hook import (
    DEFAULT_ENTRY_TIMEOUT_S,
    STOP_KINDS,
    build_event,
    unreadable,
)
from hookbus.producers.async_client import AsyncHookBus
from hookbus.producers.client_base import parked_wait_s

if TYPE_CHECKING:
    from hookbus.bus.settings.loader import Settings

log = logging.getLogger(__name__)

#: Path prefix of the hook endpoints; the adapter name follows.
HOOKS_PREFIX = "/v1/hooks/"
#: Time kept back from the hook entry's timeout for the HTTP round trip, in ms.
HTTP_MARGIN_MS = 100
#: How far past its deadline a request may run before the gateway answers without it, ms.
LATE_MARGIN_MS = 20
#: How long a stopping gateway lets requests in flight finish, in seconds.
GRACEFUL_SHUTDOWN_S = 3
#: Longest wait for Redis when ``/healthz`` is asked, in seconds.
HEALTH_TIMEOUT_S = 1.0


class Gateway:
    """The state one gateway app shares across requests: the SDK client (made when the
    app starts, on its loop), tokens, the rate limiter."""

    def __init__(
        self, settings: Settings, tokens: TokenTable | None, limiter: RateLimiter | None
    ) -> None:
        self.settings = settings
        self.tokens = tokens
        self.limiter = limiter if limiter is not None else RateLimiter()
        self.bus: AsyncHookBus | None = None
        #: where this gateway looks, as every reason it gives names it
        self.where = liveness.where(settings.effective_redis_url, settings.namespace)

    def client(self) -> AsyncHookBus:
        if self.bus is None:
            self.bus = AsyncHookBus(self.settings)
        return self.bus

    def guarded(self, route: Route) -> bool:
        """Whether an unanswered ``route`` fails closed: a guard route (unless the
        configuration says allow for it), or a kind the current bundle guards."""
        if route.mode != REQUEST:
            return False
        if unanswered(route.kind, self.policy(route)) == "deny":
            return True  # decided without the client (which a dead cluster URL cannot make)
        guarded = self.client().fail_policy.denies(route.kind)
        return unanswered(route.kind, self.policy(route), guarded=guarded) == "deny"

    def policy(self, route: Route) -> str:
        """``on_timeout`` of a route: the configuration's, by kind or CLI name, else the
        failure policy's default for its kind."""
        wanted = {normalise(route.kind), normalise(route.name)}
        for key, policy in self.settings.on_timeout.items():
            if normalise(key) in wanted:
                return str(policy)
        return self.settings.on_timeout_for(route.kind)

    def budget_ms(self, route: Route, entry_timeout_s: float, arrival: float) -> int:
        """The request's deadline: the configured one, kept under the hook entry's timeout,
        less what already passed since the request arrived."""
        configured = self.settings.deadline_ms(route.kind)
        ceiling = int(entry_timeout_s * 1000) - HTTP_MARGIN_MS
        spent = int((time.monotonic() - arrival) * 1000)
        return min(configured, ceiling) - spent

    async def answer(
        self,
        harness: Adapter,
        route: Route,
        data: dict[str, Any],
        agent: str | None,
        entry_timeout_s: float,
        arrival: float,
    ) -> Output:
        """Route, send, render: the same output ``hookbus <cli> hook`` prints."""
        if data.get("stop_hook_active") is True and route.kind in STOP_KINDS:
            return Output()
        data = {k: v for k, v in data.items() if k != "agent_id"}  # identity: the token's
        environ = {AGENT_ID_ENV: agent} if agent else {}
        event = msgspec.convert(build_event(harness, route, data, environ), Event)
        try:
            return await self._send(harness, route, event, entry_timeout_s, arrival, data)
        except Exception as exc:  # the SDK failing in a way it does not translate
            log.warning("gateway: %s not answered: %r", route.name, exc)
            return self.unanswered(harness, route, f"the bus failed: {exc}", data)

    async def _send(
        self,
        harness: Adapter,
        route: Route,
        event: Event,
        entry_timeout_s: float,
        arrival: float,
        call: Mapping[str, Any],
    ) -> Output:
        """Publish or request ``event``; ``call`` is the CLI's input, for its answer."""
        bus = self.client()
        if route.mode != REQUEST:
            try:
                await bus.publish(event)
            except HookBusError as exc:
                unavailable = self.withheld(liveness.placed(str(exc), self.where))
                return harness.render(route, Answer(unavailable=unavailable, event=call))
            return Output()
        budget = self.budget_ms(route, entry_timeout_s, arrival)
        if budget <= 0:
            return self.unanswered(harness, route, "the request's deadline passed on arrival", call)
        policy = "deny" if self.guarded(route) else self.policy(route)
        entry_end = arrival + entry_timeout_s - HTTP_MARGIN_MS / 1000
        try:
            async with asyncio.timeout((budget + LATE_MARGIN_MS) / 1000) as scope:

                def parked(answer: Decision) -> None:
                    """An operator decides: wait as the approval allows, within the entry."""
                    loop = asyncio.get_running_loop()
                    left = min(parked_wait_s(answer), entry_end - time.monotonic())
                    scope.reschedule(loop.time() + max(left, 0.0))

                decision = await bus.request(
                    event,
                    deadline_ms=budget,
                    on_timeout=policy,  # type: ignore[arg-type]
                    on_parked=parked,
                )
        except TimeoutError:
            return self.unanswered(harness, route, f"no answer within {budget} ms", call)
        except HookBusError as exc:  # an event the SDK refuses (too large, bad payload)
            return self.unanswered(harness, route, str(exc), call)
        found = msgspec.to_builtins(decision)
        if decision.degraded and not decision.trace:  # a policy decided: nothing ran
            return harness.render(
                route,
                Answer(
                    unavailable=self.withheld(liveness.placed(decision.reason or "", self.where)),
                    policy=decision.outcome,
                    event=call,
                ),
            )
        return harness.render(route, Answer(found, event=call))

    def unanswered(
        self, harness: Adapter, route: Route, why: str, call: Mapping[str, Any] | None = None
    ) -> Output:
        """The adapter's answer when the fleet did not answer ``route``: ``why`` and the
        namespace; the Redis URL it looked at only in the log."""
        policy = "deny" if self.guarded(route) else None
        why = self.withheld(liveness.placed(why, self.where))
        return harness.render(route, Answer(unavailable=why, policy=policy, event=call))

    @staticmethod
    def withheld(why: str) -> str:
        """``why`` as an agent may read it: no Redis host, port or user (it holds a token,
        not a Redis user, and needs to learn neither); the log keeps the full text."""
        safe = agent_safe(why)
        if safe != why:
            log.info("gateway: answered without the fleet: %s", why)
        return safe


def create_app(
    settings: Settings,
    *,
    tokens: TokenTable | None = None,
    limiter: RateLimiter | None = None,
) -> Starlette:
    """The ASGI app: one hook path per adapter of the table, and ``/healthz``."""
    gateway = Gateway(settings, tokens, limiter)

    async def hook(request: Request) -> Response:
        arrival = getattr(request.state, ARRIVAL_STATE, None) or time.monotonic()
        cli = request.path_params["cli"]
        if cli not in ADAPTER_MODULES:
            return JSONResponse({"error": f"no adapter {cli!r}"}, status_code=404)
        agent: str | None = None
        if gateway.tokens is not None:
            authorised, agent = gateway.tokens.identify(request)
            if not authorised:
                return JSONResponse({"error": "missing or wrong bearer token"}, status_code=401)
        try:
            entry_timeout_s = parse_timeout(
                request.query_params.get("timeout"), DEFAULT_ENTRY_TIMEOUT_S
            )
        except ValueError as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        harness = adapter(cli)
        try:
            body = await read_body(request)
        except BodyTooLarge as exc:  # answered at once; the rest is never read
            size = f"{exc.size} bytes" if exc.size is not None else "a body"
            return _json(unreadable(harness, exc.head, f"{size} over the gateway's limit"), True)
        except TimeoutError:
            return _json(unreadable(harness, b"", "the request body arrived too slowly"), True)
        try:
            return _json(await _answer(gateway, body, harness, agent, entry_timeout_s, arrival))
        except Exception as exc:  # a bug must not let a guarded call through: answer as "down"
            log.exception("gateway: %s request failed", cli)
            why = Gateway.withheld(f"internal error: {exc!r}")
            return _json(unreadable(harness, b"", why))

    where = {"redis_url": mask_url(settings.effective_redis_url), "namespace": settings.namespace}

    async def healthz(request: Request) -> Response:
        try:
            async with asyncio.timeout(HEALTH_TIMEOUT_S):
                alive = await gateway.client().workers_alive()
        except (RedisUnavailable, TimeoutError) as exc:
            why = str(exc) or f"no answer within {HEALTH_TIMEOUT_S:g} s"
            return JSONResponse({"ok": False, "redis": why, **where}, status_code=503)
        except Exception as exc:  # whatever stops the SDK reaching Redis: report it
            down = str(exc) or repr(exc)
            return JSONResponse({"ok": False, "redis": down, **where}, status_code=503)
        if not alive:
            down = liveness.no_worker(gateway.where)
            body = {"ok": False, "redis": "ok", "workers": down, **where}
            return JSONResponse(body, status_code=503)
        return JSONResponse({"ok": True, "adapters": sorted(ADAPTER_MODULES)})

    async def server_error(request: Request, exc: Exception) -> Response:
        return JSONResponse({"error": f"internal error: {type(exc).__name__}"}, status_code=500)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            if gateway.bus is not None:
                await gateway.bus.aclose()

    return Starlette(
        routes=[
            HttpRoute(HOOKS_PREFIX + "{cli}", hook, methods=["POST"]),
            HttpRoute("/healthz", healthz, methods=["GET"]),
        ],
        exception_handlers={Exception: server_error},
        lifespan=lifespan,
    )


async def _answer(
    gateway: Gateway,
    body: bytes,
    harness: Adapter,
    agent: str | None,
    entry_timeout_s: float,
    arrival: float,
) -> Output:
    """Limit, parse and answer one hook POST (every failure: the fail-closed JSON)."""
    if not gateway.limiter.take(agent):
        return unreadable(harness, body[:65536], "rate limit exceeded for this agent")
    try:
        data = json.loads(body)
    except RecursionError:
        return unreadable(harness, body, "the hook input is nested too deeply to read")
    except ValueError:
        return unreadable(harness, body, "the hook input is not JSON")
    if isinstance(data, dict) and harness.normalize is not None:  # the CLI's own shape
        data = harness.normalize(dict(data))
    name = data.get("hook_event_name") if isinstance(data, dict) else None
    if not isinstance(data, dict) or not isinstance(name, str) or not name:
        return unreadable(harness, b"", "the hook input is not a hook event")
    route = harness.route(name)
    return await gateway.answer(harness, route, data, agent, entry_timeout_s, arrival)


def _json(output: Output, close: bool = False) -> Response:
    """The output as the HTTP answer; ``close`` ends the connection after it (a body left
    unread is never read)."""
    if output.stderr:
        log.info("gateway: %s", output.stderr)
    headers = {"Connection": "close"} if close else None
    return JSONResponse(dict(output.stdout or {}), headers=headers)


def serve(
    settings: Settings,
    *,
    host: str,
    port: int,
    tokens: TokenTable | None = None,
    limiter: RateLimiter | None = None,
) -> None:
    """Run the gateway until interrupted (uvicorn, one process, keep-alive connections).

    First it marks itself non-dumpable, as the workers do: a gateway run as the agents' own
    OS user would otherwise show them the producer's Redis password and a shared token in
    ``/proc/<pid>/environ`` and ``mem``."""
    import uvicorn

    from hookbus.hooks.actions.confine import harden_worker

    harden_worker()

    config = uvicorn.Config(
        create_app(settings, tokens=tokens, limiter=limiter),
        host=host,
        port=port,
        http=GuardedH11Protocol,
        access_log=False,
        log_level="warning",
        lifespan="on",
        backlog=4096,
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
    )
    uvicorn.Server(config).run()
