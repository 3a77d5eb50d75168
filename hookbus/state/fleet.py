"""Fleet-wide state for python hooks: ``from hookbus.state import fleet``.

Inside a python hook run by a worker::

    from hookbus.state import fleet

    def check(event):
        if fleet.count(f"deploys:{event.agent_id}", per="1h") > 3:
            return {"outcome": "deny", "reason": "three deploys an hour is enough"}
        lock = fleet.lock("deploy:prod", ttl="15m")
        if not lock.granted:
            return {"outcome": "deny", "reason": f"{lock.holder.agent} is deploying"}

Each call is one script on the master holding its key, bounded by the time the request has
left; a Redis failure raises :class:`~hookbus.errors.FleetStateError`, so the hook fails and
its ``on_error`` decides (never a silent allow). Keys are the hook's own strings (the
namespace is the worker's); ``lock`` holds for the session of the event being run, of its
agent (another agent's session of the same id is another holder).
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from hookbus.bus.wire import Event
from hookbus.errors import FleetStateError
from hookbus.state.store import FleetState, LockCheck, StateEntry, lock_id
from hookbus.state.templates import parse_duration


@dataclass(frozen=True)
class _Scope:
    state: FleetState
    event: Event
    #: time.monotonic() at which the request's deadline passes (None: no deadline)
    end: float | None


_scope: contextvars.ContextVar[_Scope | None] = contextvars.ContextVar(
    "hookbus_fleet_scope", default=None
)
#: Time a call may use when the request has no deadline, in seconds.
NO_DEADLINE_S = 0.5


@contextmanager
def scope(state: FleetState, event: Event, time_left_s: float | None) -> Iterator[None]:
    """Make ``fleet`` usable by the hooks run for ``event`` (the worker sets this)."""
    end = None if time_left_s is None else time.monotonic() + time_left_s
    token = _scope.set(_Scope(state, event, end))
    try:
        yield
    finally:
        _scope.reset(token)


def _current(what: str) -> tuple[_Scope, float]:
    current = _scope.get()
    if current is None:
        raise FleetStateError(
            what, "fleet state is only available to hooks run by a hookbus worker"
        )
    left = NO_DEADLINE_S if current.end is None else current.end - time.monotonic()
    return current, left


def count(key: str, *, per: str) -> int:
    """Count this request under ``key`` in a sliding window of ``per`` (``"1h"``) and return
    how many requests the window holds now, this one included."""
    current, left = _current(f"count:{key}")
    return current.state.count(
        f"count:{key}",
        current.event.id or f"{time.time_ns()}",
        window_ms=parse_duration(per),
        time_left_s=left,
    )


def lock(key: str, *, ttl: str) -> LockCheck:
    """Take ``key`` for this event's session for at most ``ttl``, or learn who holds it."""
    current, left = _current(lock_id(key))
    event = current.event
    if not event.session_id:
        raise FleetStateError(lock_id(key), "a lock is held by a session: the event has none")
    return current.state.take_lock(
        lock_id(key),
        session=event.session_id,
        agent=event.agent_id or "",
        ttl_ms=parse_duration(ttl),
        time_left_s=left,
    )


def release(key: str) -> bool:
    """Release ``key`` if this event's session (of its agent) holds it; True when released."""
    current, left = _current(lock_id(key))
    event = current.event
    return current.state.release_lock(
        lock_id(key), session=event.session_id or "", agent=event.agent_id or "", time_left_s=left
    )


def get(key: str) -> StateEntry | None:
    """The lock ``key`` (holder, TTL) or the counter ``key`` (count), None when absent."""
    current, _left = _current(key)
    return current.state.get(lock_id(key)) or current.state.get(f"count:{key}")
