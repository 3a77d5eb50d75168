"""Producer-side capture for supervised sessions: pane, context pressure, state hint.

``hookbus claude-code hook`` calls :func:`capture_for_hook` for every event. It returns None
at once (no tmux call, no Redis) unless all of these hold, in this order (cheapest
first):

1. the event is one a supervisor is woken for (Stop, SubagentStop, Notification, SessionEnd,
   PreCompact) and ``stop_hook_active`` is not true;
2. ``$TMUX`` is set (the agent runs inside tmux);
3. the tmux session's name is in the agent registry (:func:`lookup_session`).

Then it captures the pane (``tmux capture-pane -p -S -N``, N the agent's effective
``pane_capture_lines``; not for SessionEnd, whose pane is gone), reads the context pressure
off the status line, guesses the state, and returns the ``supervision`` dict the harness
puts into the event payload. The wake action (:mod:`hookbus.hooks.actions.wake`) builds the
supervisor's message from it.

The reading of the pane is pure functions in :mod:`hookbus.supervisor.pane_analysis`. This
module imports nothing at all at import time: the patterns, tmux (``subprocess``) and the
registry lookup load only when a capture is really made, so an unmanaged event pays nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

#: Kinds that wake a supervisor, and the trigger each names in the wake message
#: (Notification: its type).
TRIGGERS: dict[str, str] = {
    "Stop": "response_complete",
    "SubagentStop": "subagent_complete",
    "Notification": "notification",
    "SessionEnd": "session_terminated",
    "PreCompact": "pre_compact",
}
#: Kinds whose hook may answer ``decision: block``: the only ones a bidirectional wake waits on.
REPLY_KINDS: frozenset[str] = frozenset({"Stop", "PreCompact"})
#: Longest a bidirectional wake waits for its supervisor, in ms (10 minutes).
BIDIRECTIONAL_DEADLINE_MS = 600_000
#: Key of the capture in the event payload.
PAYLOAD_KEY = "supervision"


def trigger_for(kind: str, payload: Mapping[str, Any]) -> str | None:
    """The wake trigger of an event, or None when the kind wakes no supervisor."""
    trigger = TRIGGERS.get(kind)
    if trigger == "notification":
        kind_of = payload.get("notification_type")
        return kind_of if isinstance(kind_of, str) and kind_of else "notification"
    return trigger


def socket_path(environ: Mapping[str, str]) -> str | None:
    """The tmux server socket of the session this process runs in (``$TMUX`` is
    ``socket,pid,session-index``)."""
    value = environ.get("TMUX", "")
    path = value.split(",", 1)[0]
    return path or None


def capture_for_hook(
    kind: str,
    payload: Mapping[str, Any],
    environ: Mapping[str, str],
    execute: Callable[..., Any],
    namespace: str,
) -> dict[str, Any] | None:
    """The ``supervision`` dict for an event of a managed session, or None (see the module
    docstring for the guards). ``execute(*args)`` runs one Redis command (the lean RESP
    client's ``call``); ``kind`` is the event's canonical kind. Never raises for tmux or
    registry trouble: an unmanaged-looking session is simply not supervised."""
    if payload.get("stop_hook_active") is True:
        return None
    trigger = trigger_for(kind, payload)
    if trigger is None:
        return None
    sock = socket_path(environ)
    if sock is None:
        return None
    import contextlib

    from hookbus.errors import HookBusError
    from hookbus.supervisor.agent_lookup import lookup_session
    from hookbus.supervisor.pane_analysis import analyse
    from hookbus.supervisor.tmux_driver import TmuxServer, capture_pane

    server = TmuxServer(socket_path=sock)
    pane = environ.get("TMUX_PANE") or ""
    try:
        target = ["-t", pane] if pane else []
        session = server.run("display-message", "-p", *target, "#{session_name}").strip()
    except HookBusError:
        return None
    if not session:
        return None
    agent = lookup_session(execute, namespace, session)
    if agent is None:
        return None
    settings = agent.settings
    lines = int(settings["pane_capture_lines"])
    threshold = int(settings["context_pressure_threshold"])
    raw = ""
    if trigger != "session_terminated":
        with contextlib.suppress(HookBusError):
            raw = capture_pane(server, pane or f"={session}:", lines, escapes=True)
    found = analyse(raw, lines, threshold)
    mode = str(settings["hook_mode"])
    reply = mode == "bidirectional" and kind in REPLY_KINDS
    return {
        "agent_id": agent.agent_id,
        "tmux_session_name": agent.tmux_session_name,
        "openclaw_session_id": agent.openclaw_session_id,
        "trigger": trigger,
        "state_hint": found["state_hint"] if raw else "idle",
        "pane": found["pane"],
        "pane_lines": lines,
        "context_pressure": found["context_pressure"],
        "autocompact_pct": settings["autocompact_pct"],
        "hook_mode": mode,
        "reply_wanted": reply,
        "reply_deadline_ms": BIDIRECTIONAL_DEADLINE_MS if reply else None,
    }


def supervise_event(
    event: dict[str, Any],
    data: Mapping[str, Any],
    environ: Mapping[str, str],
    execute: Callable[..., Any],
    namespace: str,
) -> dict[str, Any] | None:
    """The one call a harness makes per event: capture (see :func:`capture_for_hook`) and,
    for a managed session, put the capture into ``event["payload"]["supervision"]`` and the
    registry's agent id into ``event["agent_id"]``. Returns the capture, or None.

    The harness then routes the event by the capture: ``reply_wanted`` (a bidirectional
    agent's Stop or PreCompact) → a blocking request whose deadline is
    ``reply_deadline_ms`` (kept under the hook entry's timeout); otherwise → publish, so
    the wake goes through the fan-out path and the agent never waits for its supervisor
    (async mode).
    """
    kind = str(event.get("kind", ""))
    capture = capture_for_hook(kind, data, environ, execute, namespace)
    if capture is None:
        return None
    payload = event.setdefault("payload", {})
    payload[PAYLOAD_KEY] = capture
    event["agent_id"] = capture["agent_id"]
    return capture
