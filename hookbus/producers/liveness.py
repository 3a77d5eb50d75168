"""Is any chain worker alive? The producers' cached answer, read from the heartbeats.

A request sent while no chain worker heartbeats would only wait out its whole deadline, so
both clients ask first, and answer by policy at once when nobody is there. The answer is
cached (long when alive, short when dead, since a worker may just be starting), so a busy
producer pays one HGETALL a second, not one per request. Heartbeats are judged against
Redis's clock (TIME, read in the same round trip), not the producer's, so a producer whose
clock is off does not think the fleet dead (issue 12 row 3). The heartbeat parse is inline:
the worker modules are not imported on the producer path.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import cast

#: How long a "some chain worker is alive" answer from the heartbeats is trusted, in s.
LIVENESS_CACHE_ALIVE_S = 1.0
#: How long a "no chain worker alive" answer is trusted (short: a worker may just start), s.
LIVENESS_CACHE_DEAD_S = 0.1
#: Role name chain workers heartbeat with.
CHAIN_ROLE = "chain"


def alive_from_heartbeats(raw: Mapping[bytes, bytes], dead_after_ms: int, now: int) -> bool:
    """True when some chain worker's heartbeat (HGETALL of the workers hash) is recent at
    ``now`` (Redis time, epoch ms)."""
    for value in raw.values():
        try:
            data = json.loads(value)
        except (ValueError, UnicodeDecodeError):
            continue
        if (
            isinstance(data, dict)
            and data.get("role") == CHAIN_ROLE
            and isinstance(data.get("last_ms"), int)
            and now - data["last_ms"] < dead_after_ms
        ):
            return True
    return False


def redis_ms(reply: object) -> int:
    """Epoch ms of a TIME reply, raw (``[b"seconds", b"micros"]``) or parsed (ints)."""
    seconds, micros = cast("tuple[bytes | int, bytes | int]", reply)
    return int(seconds) * 1000 + int(micros) // 1000


def pairs(raw: object) -> Mapping[bytes, bytes]:
    """HGETALL's reply as a mapping, whether the connection parsed it or not (a connection
    driven by hand returns RESP2's flat list)."""
    if isinstance(raw, list):
        return dict(zip(raw[::2], raw[1::2], strict=True))
    if isinstance(raw, Mapping):
        return raw
    return {}


class Liveness:
    """A cached answer to "is any chain worker alive?" so it costs nothing per request."""

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
        alive = alive_from_heartbeats(pairs(raw), dead_after_ms, redis_ms(time_reply))
        self.store(alive)
        return alive
