"""What the fleet does about an unguarded call beyond recording it: tell the session's
agent, or halt the session (``[unguarded] then``).

Both are notices addressed to exactly that agent's session (:mod:`hookbus.state.notices`):
``notice`` a warning the agent receives once as added context, ``halt`` a blocking notice
that refuses every further tool call of the session until it expires (``for_s``) or an
operator retracts it (``hookbus notices retract ID``). A session gets one such notice while
one lives, however many of its calls go unguarded. A call sent with no agent id cannot be
tied to its session (another agent may send the same session id), so it is recorded only,
and the log says why.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import redis

from hookbus.state.notices import live_notices, notify

if TYPE_CHECKING:
    from hookbus.bus.settings.loader import Settings
    from hookbus.bus.wire import Event

log = logging.getLogger(__name__)

#: Who a notice of this module says created it.
CREATED_BY = "fleet:unguarded"


class UnguardedReaction:
    """Called with the calls a watch found unguarded; never raises into the watch."""

    def __init__(self, client: redis.Redis, settings: Settings) -> None:
        self.client = client  # the namespace's own master (where notices live)
        self.namespace = settings.namespace
        self.then = settings.unguarded.then
        self.for_ms = settings.unguarded.for_s * 1000
        #: notices made (counted for the heartbeat and tests)
        self.made = 0

    def __call__(self, events: list[Event]) -> None:
        if self.then == "record":
            return
        try:
            self._react(events)
        except (redis.exceptions.RedisError, ValueError) as exc:
            log.error("unguarded calls recorded but not acted on (%s): %s", self.then, exc)

    def _react(self, events: list[Event]) -> None:
        sessions: dict[tuple[str, str], Event] = {}
        for event in events:
            if not event.agent_id or not event.session_id:
                log.warning(
                    "unguarded call of session %r has no agent id: recorded, not %s (a "
                    "session is addressed with its agent)",
                    event.session_id or "",
                    "halted" if self.then == "halt" else "told",
                )
                continue
            sessions.setdefault((event.agent_id, event.session_id), event)
        if not sessions:
            return
        live = {
            (n.agent, n.session)
            for n in live_notices(self.client, self.namespace)
            if n.created_by == CREATED_BY
        }
        for (agent, session), event in sessions.items():
            if (agent, session) in live:
                continue
            halt = self.then == "halt"
            made = notify(
                self.client,
                self.namespace,
                _text(event, halt),
                severity="critical" if halt else "warning",
                ttl_ms=self.for_ms,
                created_by=CREATED_BY,
                agent=agent,
                session=session,
                blocking=halt,
            )
            self.made += 1
            log.error(
                "unguarded call: session %r of agent %r %s (notice %s)",
                session,
                agent,
                "halted" if halt else "told",
                made.id,
            )


def _text(event: Event, halt: bool) -> str:
    tool = event.payload.get("tool_name")
    what = f"a {tool} call" if isinstance(tool, str) and tool else "a tool call"
    said = (
        f"{what} of this session ran with no guard asked: the session's hook is not running "
        "(check it with `hookbus doctor` on the agent's host)."
    )
    if halt:
        return said + " Every tool call of this session is refused until an operator looks."
    return said
