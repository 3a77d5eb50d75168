"""A producer's limit on a stream's backlog: refuse to add once the stream holds its limit.

Producers add to the request and event streams without trimming them: an ``XADD MAXLEN``
drops the oldest entries whether or not a consumer group has read them, silently. The
consumers trim what they were delivered and acknowledged
(:mod:`hookbus.workers.fleet.trimmer`), so a stream holds its backlog; if its consumers
stop, the producers must stop too, and say why. A producer reads a stream's length with an
``XLEN`` riding a write it sends anyway: when first used, again once it has added half the
room it last saw left, and at least every :data:`CHECK_EVERY_S`. While the stream holds its
limit, adds are refused at once (:meth:`BacklogGate.refusal`), and one add every
:data:`CHECK_FULL_EVERY_S` goes through with an ``XLEN`` to see whether it has drained. A
stream may so exceed its limit by a write in flight and those few probes, never by more.
"""

from __future__ import annotations

import logging
import threading
import time

log = logging.getLogger(__name__)

#: Longest time between two reads of a stream's length while it is under its limit, in s.
CHECK_EVERY_S = 1.0
#: Time between two reads of a stream's length while it holds its limit, in s.
CHECK_FULL_EVERY_S = 0.1
#: Time between two tries after Redis refused an XLEN (a Redis user without it), in s: the
#: stream is then bounded by the consumers' trimming only.
CHECK_REFUSED_EVERY_S = 60.0


class BacklogGate:
    """What one producer process knows of one stream's length."""

    def __init__(self, key: str, limit: int, what: str, setting: str) -> None:
        self.key = key
        self.limit = limit
        #: ``request`` or ``event``, and the setting bounding the stream, for messages.
        self.what = what
        self.setting = setting
        self.length: int | None = None
        self._checked_at = 0.0
        self._added = 0
        self._refused = False
        self._lock = threading.Lock()

    @property
    def full(self) -> bool:
        return self.length is not None and self.length >= self.limit

    def refusal(self) -> str | None:
        """Why an add must be refused now (the stream holds its limit and is not due for
        another look), or None."""
        with self._lock:
            if not self.full or self._due_locked():
                return None
        return (
            f"the {self.what} stream {self.key} holds {self.length} {self.what}s no consumer "
            f"has taken yet ({self.setting} = {self.limit}): is a "
            f"{'chain worker' if self.what == 'request' else 'fan-out dispatcher'} running "
            "and keeping up?"
        )

    def check(self) -> tuple[str, str] | None:
        """The ``XLEN`` to send with the next add when the length is due for a look (the
        reply goes to :meth:`take`), else None. Marks the look as under way."""
        with self._lock:
            if not self._due_locked():
                return None
            self._checked_at = time.monotonic()
            self._added = 0
        return ("XLEN", self.key)

    def added(self, n: int = 1) -> None:
        """Count ``n`` entries this process added since the last look."""
        with self._lock:
            self._added += n

    def take(self, reply: object) -> None:
        """The reply of an ``XLEN`` from :meth:`check`; an error (a Redis user without
        XLEN) makes the next look wait :data:`CHECK_REFUSED_EVERY_S`."""
        with self._lock:
            if isinstance(reply, int):
                self.length, self._refused = reply, False
            elif not self._refused:
                self._refused = True
                log.warning(
                    "Redis refused XLEN %s (%s): this producer cannot see the stream's "
                    "backlog (allow +xlen and read access to the producer's Redis user)",
                    self.key,
                    reply,
                )

    def _due_locked(self) -> bool:
        if self._refused:
            return time.monotonic() - self._checked_at >= CHECK_REFUSED_EVERY_S
        if self.length is None:
            return True
        wait = CHECK_FULL_EVERY_S if self.full else CHECK_EVERY_S
        if time.monotonic() - self._checked_at >= wait:
            return True
        return not self.full and self._added * 2 >= self.limit - self.length


class Gates:
    """A producer's gates, one per stream key (made on first use)."""

    def __init__(self) -> None:
        self._gates: dict[str, BacklogGate] = {}
        self._lock = threading.Lock()

    def get(self, key: str, limit: int, what: str, setting: str) -> BacklogGate:
        with self._lock:
            gate = self._gates.get(key)
            if gate is None or gate.limit != limit:
                gate = self._gates[key] = BacklogGate(key, limit, what, setting)
            return gate

    def events(self, key: str, limit: int) -> BacklogGate:
        return self.get(key, limit, "event", "streams.events_maxlen")

    def requests(self, key: str, limit: int) -> BacklogGate:
        return self.get(key, limit, "request", "streams.requests_maxlen")
