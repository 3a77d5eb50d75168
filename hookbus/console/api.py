"""The console's JSON API: the same library calls as the pages and the CLI.

``GET /api/status``, ``/api/decisions`` (filters: agent, session, kind, outcome, hook,
limit), ``/api/approvals``, ``/api/hooks``, ``/api/dead``, ``/api/dead/{id}``;
``POST /api/approvals/{id}`` with ``{"decision": "allow" | "deny", "reason": "..."}``,
``POST /api/hooks/{name}/approve`` and ``/reject``, ``POST /api/dead/{id}/requeue`` and
``/purge``; ``GET /api/stream`` (server-sent events) is the app's.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from hookbus.approvals.inbox import ApprovalInbox
from hookbus.console import data, decision_log
from hookbus.errors import (
    ApprovalClosed,
    ApprovalNotFound,
    ApprovalRefused,
    ApprovalUnconfirmed,
    HookExists,
    HookNotFound,
    JobNotFound,
    PendingHookChanged,
)

if TYPE_CHECKING:
    from hookbus.bus.settings.loader import Settings
    from hookbus.console.app import Console
    from hookbus.console.auth import Caller

Endpoint = Callable[[Request, "Console", "Caller"], Awaitable[Response]]


async def _body(request: Request) -> dict[str, Any]:
    try:
        body = json.loads(await request.body() or b"{}")
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


async def status(request: Request, console: Console, caller: Caller) -> Response:
    return JSONResponse(await console.call(data.overview, console.settings))


async def decisions(request: Request, console: Console, caller: Caller) -> Response:
    params = request.query_params
    filters = {k: params.get(k, "") for k in decision_log.DECISION_FILTERS}
    try:
        limit = max(1, min(int(params.get("limit", "100")), 1000))
    except ValueError:
        return JSONResponse({"error": "limit must be a number"}, 400)
    rows = await console.call(decision_log.decisions, console.settings, limit=limit, **filters)
    return JSONResponse({"decisions": rows})


async def approvals(request: Request, console: Console, caller: Caller) -> Response:
    return JSONResponse(await console.call(data.approvals, console.settings))


async def decide(request: Request, console: Console, caller: Caller) -> Response:
    approval = request.path_params["approval"]
    body = await _body(request)
    outcome = body.get("decision")
    if outcome not in ("allow", "deny"):
        return JSONResponse({"error": 'decision must be "allow" or "deny"'}, 400)
    reason = body.get("reason") or ""
    if not isinstance(reason, str) or len(reason) > 2000:
        return JSONResponse({"error": "reason must be text of at most 2000 characters"}, 400)
    inbox = ApprovalInbox(console.settings)
    try:
        decided = await console.call(
            inbox.decide, approval, outcome, who=console.who(caller), note=reason, via="console"
        )
    except ApprovalNotFound as exc:
        return JSONResponse({"ok": False, "error": str(exc)}, 404)
    except ApprovalRefused as exc:
        return JSONResponse({"ok": False, "error": str(exc)}, 409)
    except ApprovalClosed as exc:
        return JSONResponse(
            {
                "ok": False,
                "error": str(exc),
                "state": exc.state,
                "decided_by": exc.decided_by,
                "at_ms": exc.at_ms,
            },
            409,
        )
    return JSONResponse({"ok": True, **decided.item.to_dict(), "recorded": decided.recorded})


async def hooks(request: Request, console: Console, caller: Caller) -> Response:
    return JSONResponse(await console.call(data.hooks, console.settings, console.hooks_dir))


def _hook_decision(approve: bool) -> Endpoint:
    async def endpoint(request: Request, console: Console, caller: Caller) -> Response:
        name = request.path_params["name"]
        shown = (await _body(request)).get("sha256")
        try:
            result = await console.call(
                data.decide_hook,
                console.settings,
                console.hooks_dir,
                name,
                approve,
                console.who(caller),
                shown if isinstance(shown, str) else None,
            )
        except HookNotFound as exc:
            return JSONResponse({"ok": False, "error": str(exc)}, 404)
        except ApprovalUnconfirmed as exc:
            return JSONResponse({"ok": False, "error": str(exc)}, 400)
        except (HookExists, PendingHookChanged) as exc:
            return JSONResponse({"ok": False, "error": str(exc)}, 409)
        return JSONResponse(result)

    return endpoint


async def dead(request: Request, console: Console, caller: Caller) -> Response:
    return JSONResponse(await console.call(data.dead, console.settings))


def _dead_action(action: Callable[[Settings, str], dict[str, Any]]) -> Endpoint:
    """``/api/dead/{id}`` (show) and ``/api/dead/{id}/<action>``: ``action(settings,
    job_id)``'s answer, 404 for an id the dead-letter stream does not hold."""

    async def endpoint(request: Request, console: Console, caller: Caller) -> Response:
        try:
            job_id = request.path_params["job_id"]
            return JSONResponse(await console.call(action, console.settings, job_id))
        except JobNotFound as exc:
            return JSONResponse({"ok": False, "error": str(exc)}, 404)

    return endpoint


async def not_found(request: Request, console: Console, caller: Caller) -> Response:
    return JSONResponse({"error": f"no API route {request.url.path}"}, 404)


#: The API routes: (path, endpoint, methods).
ROUTES: list[tuple[str, Endpoint, list[str]]] = [
    ("/api/status", status, ["GET"]),
    ("/api/decisions", decisions, ["GET"]),
    ("/api/approvals", approvals, ["GET"]),
    ("/api/approvals/{approval}", decide, ["POST"]),
    ("/api/hooks", hooks, ["GET"]),
    ("/api/hooks/{name}/approve", _hook_decision(True), ["POST"]),
    ("/api/hooks/{name}/reject", _hook_decision(False), ["POST"]),
    ("/api/dead", dead, ["GET"]),
    ("/api/dead/{job_id}", _dead_action(data.dead_show), ["GET"]),
    ("/api/dead/{job_id}/requeue", _dead_action(data.dead_requeue), ["POST"]),
    ("/api/dead/{job_id}/purge", _dead_action(data.dead_purge), ["POST"]),
]
