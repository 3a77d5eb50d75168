"""Redis time for deadlines, kept fresh off the request path.

A request's deadline is ``budget_ms`` after the Redis time its stream entry id records
(``<ms>-<seq>``, stamped by XADD), so neither the producer's nor the worker's clock takes
part. The worker compares it with Redis time estimated locally
(:class:`~hookbus.bus.reqrep.ServerClock`: an offset to ``TIME``, read with the monotonic
clock); this module's thread refreshes that offset about every second, so no request waits
for a TIME round trip. It starts with a few samples in a row, so the clock's choice of the
shortest round trip (a sample that spanned a Redis stall is never used) has some to choose
from at once. A request without ``budget_ms`` (an older producer) is judged the
old way, by its absolute ``deadline`` against Redis time.
"""

from __future__ import annotations

import logging
import threading

import redis

from hookbus.bus.connection import CONNECTION_ERRORS
from hookbus.bus.reqrep import CLOCK_REFRESH_S, ServerClock
from hookbus.bus.wire import Event

log = logging.getLogger(__name__)


def entry_ms(entry_id: bytes | str) -> int:
    """The Redis time (epoch ms) at which the entry was added: its id's first part."""
    raw = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
    return int(raw.split("-", 1)[0])


def budget_of(event: Event) -> int | None:
    """The request's ``budget_ms`` (None from producers that predate it)."""
    budget = getattr(event, "budget_ms", None)
    return int(budget) if budget is not None else None


def time_left_ms(clock: ServerClock, entry_id: bytes, event: Event) -> float | None:
    """Milliseconds the request has left by Redis time; None when it has no deadline."""
    budget = budget_of(event)
    if budget is not None:
        return entry_ms(entry_id) + budget - clock.now_ms()
    return clock.time_left_ms(event)


def request_budget_ms(event: Event) -> int:
    """The time the request was given, for policy reasons ("within N ms")."""
    budget = budget_of(event)
    if budget is not None:
        return budget
    return (event.deadline - event.ts) if event.deadline else 0


#: TIME samples taken in a row when the keeper starts.
PRIME_SAMPLES = 3


class ClockKeeper:
    """Refreshes a :class:`ServerClock` from a daemon thread every ``refresh_s``."""

    def __init__(
        self,
        client: redis.Redis,
        clock: ServerClock,
        stop_event: threading.Event,
        *,
        refresh_s: float = CLOCK_REFRESH_S,
    ) -> None:
        self.client = client
        self.clock = clock
        self.stop_event = stop_event
        self.refresh_s = refresh_s
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="redis-clock", daemon=True)
        self._thread.start()

    def join(self, timeout: float) -> None:
        if self._thread is not None:
            self._thread.join(timeout=timeout)

    def _loop(self) -> None:
        for _ in range(PRIME_SAMPLES):
            self._sample()
        while not self.stop_event.wait(self.refresh_s):
            self._sample()

    def _sample(self) -> None:
        try:
            self.clock.refresh(self.client)
        except CONNECTION_ERRORS as exc:
            log.debug("Redis TIME not read (%s); keeping the last offset", exc)
        except redis.exceptions.RedisError as exc:
            log.warning("Redis TIME refused (%s); keeping the last offset", exc)
