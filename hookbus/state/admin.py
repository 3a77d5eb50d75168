"""What an operator does to fleet state: list, show and reset it, send and retract notices.

The CLI (``hookbus state``, ``hookbus notify``, ``hookbus notices``) and the console call
these. Every change is recorded in the fleet's hash-chained change history with who made it.
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING

from hookbus.bundles import history
from hookbus.bus.ids import user_at_host
from hookbus.state import notices
from hookbus.state.notices import Notice, Severity
from hookbus.state.store import FleetState, StateEntry

if TYPE_CHECKING:
    import redis

    from hookbus.bus.settings import Settings


def operator_name() -> str:
    """``user@host`` of this process, recorded as who made a change."""
    return user_at_host()


def _bus(settings: Settings) -> redis.Redis:
    from hookbus.bus.connection import bus_client

    return bus_client(settings)


def _record(settings: Settings, action: str, subject: str, detail: dict[str, object]) -> None:
    digest = hashlib.sha256(json.dumps(detail, sort_keys=True).encode()).hexdigest()
    history.append(
        _bus(settings),
        settings.namespace,
        action=action,
        actor=str(detail.get("by") or operator_name()),
        hook=subject,
        sha256=digest,
        extra=detail,
    )


def list_state(settings: Settings) -> list[StateEntry]:
    """Every live limit window, lock and escalation counter of the namespace."""
    from hookbus.bus.connection import translated

    with translated(settings.effective_redis_url):
        return FleetState.from_settings(settings).entries()


def show_state(settings: Settings, state_id: str) -> StateEntry | None:
    """One piece of state by id (``lock:deploy:prod``, ``limit:<hook>:<key>``...)."""
    return FleetState.from_settings(settings).get(state_id)


def reset_state(settings: Settings, state_id: str, *, by: str | None = None) -> bool:
    """Delete one piece of state and record it in the change history; True when it existed."""
    existed = FleetState.from_settings(settings).reset(state_id)
    if existed:
        _record(settings, "state-reset", state_id, {"by": by or operator_name()})
    return existed


def send_notice(
    settings: Settings,
    text: str,
    *,
    severity: Severity,
    ttl_ms: int,
    agent: str | None = None,
    session: str | None = None,
    blocking: bool = False,
    by: str | None = None,
) -> Notice:
    """Store a notice for every matching running session, and record it."""
    who = by or operator_name()
    from hookbus.bus.connection import translated

    with translated(settings.effective_redis_url):
        notice = notices.notify(
            _bus(settings),
            settings.namespace,
            text,
            severity=severity,
            ttl_ms=ttl_ms,
            created_by=who,
            agent=agent,
            session=session,
            blocking=blocking,
        )
    _record(settings, "notice", notice.id, {"by": who, **notice.to_dict()})
    return notice


def list_notices(settings: Settings) -> list[Notice]:
    """The live notices, oldest first."""
    from hookbus.bus.connection import translated

    with translated(settings.effective_redis_url):
        return notices.live_notices(_bus(settings), settings.namespace)


def retract_notice(settings: Settings, notice_id: str, *, by: str | None = None) -> Notice:
    """Remove a notice at once (NoticeNotFound when it does not exist), and record it."""
    from hookbus.bus.connection import translated

    with translated(settings.effective_redis_url):
        notice = notices.retract(_bus(settings), settings.namespace, notice_id)
    _record(settings, "notice-retract", notice_id, {"by": by or operator_name()})
    return notice
