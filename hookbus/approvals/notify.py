"""Telling someone a request is waiting: a POST per parked request to each notifier.

A hook's ``[approval] notify = ["ops-webhook"]`` names notifiers of the fleet's config
(``[notifiers.ops-webhook]`` with ``kind`` and ``url``); without names, the fleet's
``approvals.notify_url`` (if set) is told of every parked request. Two kinds:

* ``webhook``: generic JSON, the approval's fields (who, what, where, the whole input, the
  expiry), a link to the item on the console, and a ``text`` line;
* ``slack``: a Slack-compatible incoming webhook, ``{"text": ...}`` with the link.

Each POST goes through the same guarded egress as agent-written http hooks
(:mod:`hookbus.hooks.actions.egress`): the host is resolved and every address checked when
dialled, so a notify URL cannot be pointed at the inside of the network unless the operator
allowlisted its host (``security.http_allowlist``); no redirects, no proxies. One request
is announced once (it is parked once), on a thread of its own, off the request's path: a
dead receiver delays nothing. A transport error or a 5xx (or 429) is retried with backoff
(:data:`BACKOFF_S`); what still fails is logged and counted (``notifications_failed`` in
the worker's heartbeat), never raised.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from hookbus.approvals.model import full_input, summarise_input

if TYPE_CHECKING:
    from hookbus.bus.settings.loader import Settings
    from hookbus.bus.wire import Decision, Event

log = logging.getLogger(__name__)

#: How long one POST may take, in seconds.
NOTIFY_TIMEOUT_S = 5.0
#: The waits before the second and third tries of a notification that failed, in seconds.
BACKOFF_S = (0.5, 2.0)
#: The name ``approvals.notify_url`` is logged and counted under.
FLEET_URL = "approvals.notify_url"


def message(settings: Settings, approval: str, event: Event, first: Decision) -> dict[str, Any]:
    """The ``webhook`` notification's JSON body (its ``text`` is the ``slack`` one's)."""
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
            "full_input": full_input(event.payload),
            "hook": hook,
            "wait_ms": wait_ms,
            "expires_ms": first.approval.expires_ms if first.approval is not None else None,
        },
    }


def targets(settings: Settings, names: Sequence[str]) -> list[tuple[str, str, str]]:
    """``(name, kind, url)`` of each notifier to tell: the named ones (an unknown name is
    logged), else the fleet's ``approvals.notify_url``."""
    if not names:
        url = settings.approvals.notify_url
        return [(FLEET_URL, "webhook", url)] if url else []
    found: list[tuple[str, str, str]] = []
    for name in names:
        notifier = settings.notifiers.get(name)
        if notifier is None or not notifier.url:
            log.warning("notifier %r is not configured ([notifiers.%s] with a url)", name, name)
            continue
        found.append((name, notifier.kind, notifier.url))
    return found


def post(settings: Settings, url: str, body: dict[str, Any]) -> int:
    """POST ``body`` to ``url`` through the guarded client; the HTTP status. Raises what
    httpx raises (a refused address is an ``httpx.ConnectError``)."""
    from hookbus.hooks.actions.egress import EgressPolicy
    from hookbus.hooks.actions.egress_client import guarded_client

    with guarded_client(EgressPolicy.from_settings(settings)) as client:
        response = client.post(url, json=body, timeout=NOTIFY_TIMEOUT_S)
    return response.status_code


class Notifier:
    """Announces each parked request to its notifiers, each on a short-lived thread;
    ``failed`` is called once per notification that could not be delivered."""

    def __init__(self, settings: Settings, *, failed: Callable[[], None] | None = None) -> None:
        self.settings = settings
        self.failed = failed

    def announce(
        self, approval: str, event: Event, first: Decision, names: Sequence[str] = ()
    ) -> list[threading.Thread]:
        body = message(self.settings, approval, event, first)
        threads = []
        for name, kind, url in targets(self.settings, names):
            sent = body if kind == "webhook" else {"text": body["text"]}
            thread = threading.Thread(
                target=self._send,
                args=(approval, name, url, sent),
                name=f"notify-{approval}-{name}",
                daemon=True,
            )
            thread.start()
            threads.append(thread)
        return threads

    def _send(self, approval: str, name: str, url: str, body: dict[str, Any]) -> None:
        why = ""
        for attempt in range(len(BACKOFF_S) + 1):
            if attempt:
                time.sleep(BACKOFF_S[attempt - 1])
            try:
                status = post(self.settings, url, body)
            except Exception as exc:  # a notification failing must never touch the request
                why = f"{type(exc).__name__}: {exc}"
                continue
            if status < 400:
                return
            why = f"HTTP {status}"
            if status < 500 and status != 429:
                break  # the receiver refuses it: trying again will not help
        log.warning("approval %s: notification to %s not delivered (%s)", approval, name, why)
        if self.failed is not None:
            self.failed()
