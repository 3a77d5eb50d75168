"""Is any chain worker alive? Judged from the heartbeats, on Redis's clock, for every caller.

A request sent while no chain worker heartbeats would only wait out its whole deadline, so
every caller (the SDK's two clients, the per-event agent-CLI hook, the gateway) asks first
and answers by policy at once when nobody is there. Heartbeats are judged against Redis's
own clock (``TIME``, read in the same round trip as the heartbeats), never the caller's: a
laptop whose clock runs two minutes fast must not think a live fleet dead, nor one whose
clock runs slow think a dead one alive. The answer is cached (long when alive, short when
dead, since a worker may just be starting), so a busy caller pays one round trip a second.

This module also words what a caller says when the fleet cannot answer: every such reason
names the Redis URL (password masked) and the namespace it used, which is what a user
talking to the wrong Redis needs to see.

Standard library only, and no ``typing``: the per-event hook imports it on every event.
"""

from __future__ import annotations

import time

from hookbus.bus import keys
from hookbus.bus import lean_json as json
from hookbus.bus.resp import mask_url

#: How long a "some chain worker is alive" answer from the heartbeats is trusted, in s.
LIVENESS_CACHE_ALIVE_S = 1.0
#: How long a "no chain worker alive" answer is trusted (short: a worker may just start), s.
LIVENESS_CACHE_DEAD_S = 0.1
#: Role name chain workers heartbeat with.
CHAIN_ROLE = "chain"
#: Why a parked request is answered before its wait ends: its approval vanished.
APPROVAL_GONE = (
    "its approval is gone from Redis before an operator decided (Redis restarted empty, "
    "failed over or was flushed)"
)


def commands(namespace: str) -> list[tuple[bytes | str | int | float, ...]]:
    """The round trip a liveness check sends: the heartbeats and Redis's clock, both from
    the node that holds the namespace's workers hash."""
    return [("HGETALL", keys.workers(namespace)), ("TIME",)]


def alive_from_heartbeats(raw: object, dead_after_ms: int, now: int) -> bool:
    """True when some chain worker's heartbeat (an HGETALL reply of the workers hash,
    parsed to a mapping or RESP2's flat list) is recent at ``now`` (Redis time, epoch ms)."""
    for value in _values(raw):
        if not isinstance(value, bytes | str):
            continue
        try:
            data = json.loads(value)
        except (ValueError, TypeError, UnicodeDecodeError):
            continue
        if (
            isinstance(data, dict)
            and data.get("role") == CHAIN_ROLE
            and isinstance(data.get("last_ms"), int)
            and now - data["last_ms"] < dead_after_ms
        ):
            return True
    return False


def _values(raw: object) -> list[object]:
    if isinstance(raw, list):
        return raw[1::2]
    if isinstance(raw, dict):
        return list(raw.values())
    values = getattr(raw, "values", None)  # any other Mapping
    return list(values()) if callable(values) else []


def redis_ms(reply: object) -> int:
    """Epoch ms of a TIME reply, raw (``[b"seconds", b"micros"]``) or parsed (ints)."""
    if not isinstance(reply, list | tuple) or len(reply) != 2:
        raise ValueError(f"not a TIME reply: {reply!r}")
    seconds, micros = reply
    return int(seconds) * 1000 + int(micros) // 1000


class Liveness:
    """A cached answer to "is any chain worker alive?" so it costs nothing per request."""

    __slots__ = ("alive", "until")

    def __init__(self) -> None:
        self.alive: bool | None = None
        self.until = 0.0

    def fresh(self) -> bool | None:
        """The cached answer, or None when it has expired."""
        return self.alive if time.monotonic() < self.until else None

    def store(self, alive: bool) -> None:
        self.alive = alive
        ttl = LIVENESS_CACHE_ALIVE_S if alive else LIVENESS_CACHE_DEAD_S
        self.until = time.monotonic() + ttl

    def judge(self, raw: object, time_reply: object, dead_after_ms: int) -> bool:
        """Store and return the answer read from an HGETALL reply of the workers hash and
        a TIME reply of the same round trip."""
        alive = alive_from_heartbeats(raw, dead_after_ms, redis_ms(time_reply))
        self.store(alive)
        return alive


# --- what a caller says when the fleet cannot answer ----------------------------------


def where(url: str, namespace: str) -> str:
    """``namespace 'x' at redis://127.0.0.1:6380/0``, the password masked."""
    return f"namespace {namespace!r} at {mask_url(url)}"


def placed(text: str, place: str) -> str:
    """``text`` naming ``place`` (:func:`where`) once: unchanged when it already does, or
    when there is no place to name (a configuration that could not be read)."""
    return text if not place or place in text else f"{text} ({place})"


def no_worker(place: str = "") -> str:
    """The reason given when no chain worker heartbeats; ``place`` is :func:`where`."""
    return (
        f"no chain worker alive (no heartbeat in {place})"
        if place
        else ("no chain worker alive (no recent heartbeat)")
    )


def no_answer(deadline_ms: int) -> str:
    """The reason given when no chain worker answered in time."""
    return f"no chain worker answered within {deadline_ms} ms"
