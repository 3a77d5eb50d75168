"""Telling someone a request is waiting: a POST to ``approvals.notify_url``.

The body is JSON with a Slack-compatible ``text`` (an incoming webhook shows it as is) and
a link to the item on the console, plus the approval's fields for other receivers. It goes
through the same guarded egress as agent-written http hooks
(:mod:`hookbus.hooks.actions.egress`): the host is resolved and every address checked when
dialled, so a notify URL cannot be pointed at the inside of the network unless the operator
allowlisted its host (``security.http_allowlist``); no redirects, no proxies. Sent on a
thread of its own, off the request's path; a failure is logged, never raised.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any

from hookbus.approvals.model import summarise_input

if TYPE_CHECKING:
    from hookbus.bus.settings.loader import Settings
    from hookbus.bus.wire import Decision, Event

log = logging.getLogger(__name__)

#: How long one notification may take, in seconds.
NOTIFY_TIMEOUT_S = 5.0


def message(settings: Settings, approval: str, event: Event, first: Decision) -> dict[str, Any]:
    """The notification's JSON body."""
    tool, summary = summarise_input(event.payload)
    link = f"{settings.approvals.console_url.rstrip('/')}/approvals#{approval}"
    who = event.agent_id or "an agent"
    hook = first.approval.hook if first.approval is not None else None
    wait_ms = first.approval.wait_ms if first.approval is not None else None
    text = (
        f"hookbus: {who} waits for an operator: {event.kind} {tool} `{summary}`"
        f" (hook {hook or '?'}: {(first.reason or '').split(';')[0]}). "
        f"<{link}|Open approval {approval}> or run `hookbus approvals allow|deny {approval}`"
    )
    return {
        "text": text,
        "url": link,
        "approval": {
            "id": approval,
            "namespace": settings.namespace,
            "kind": event.kind,
            "agent": event.agent_id,
            "session": event.session_id,
            "tool": tool,
            "input": summary,
            "hook": hook,
            "wait_ms": wait_ms,
            "expires_ms": first.approval.expires_ms if first.approval is not None else None,
        },
    }


def post(settings: Settings, body: dict[str, Any]) -> int:
    """POST ``body`` to the notify URL through the guarded client; the HTTP status.
    Raises what httpx raises (a refused address is an ``httpx.ConnectError``)."""
    from hookbus.hooks.actions.egress import EgressPolicy
    from hookbus.hooks.actions.egress_client import guarded_client

    url = settings.approvals.notify_url
    if not url:
        raise ValueError("approvals.notify_url is not set")
    with guarded_client(EgressPolicy.from_settings(settings)) as client:
        response = client.post(url, json=body, timeout=NOTIFY_TIMEOUT_S)
    return response.status_code


class Notifier:
    """Sends one notification per parked request, each on a short-lived thread."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    def announce(self, approval: str, event: Event, first: Decision) -> threading.Thread:
        body = message(self.settings, approval, event, first)
        thread = threading.Thread(
            target=self._send, args=(approval, body), name=f"notify-{approval}", daemon=True
        )
        thread.start()
        return thread

    def _send(self, approval: str, body: dict[str, Any]) -> None:
        try:
            status = post(self.settings, body)
        except Exception as exc:  # a notification failing must never touch the request
            log.warning("approval %s: notification not sent: %s", approval, exc)
            return
        if status >= 400:
            log.warning("approval %s: notification answered HTTP %d", approval, status)
