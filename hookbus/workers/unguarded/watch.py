"""The fan-out's look, a moment after each post event, for the mark of its guard.

A dispatcher hands every event it reads to :meth:`UnguardedWatch.note`; a post event that
names its call is held for :data:`GRACE_MS` (a chain worker writes its marks with its
acknowledgements, up to 0.1 s after the answer, so a post event can arrive before its
mark) and then looked up with the others that came due: one ZMSCORE for all of them. A
call whose mark is missing is recorded in the partition's ``unguarded`` stream and counted
per agent and CLI; nothing else is written for a guarded call.

What is held lives in the dispatcher's memory: a dispatcher that dies takes the calls it
had not looked up yet with it (their events are still in the log), and the watch never
holds more than :data:`MAX_HELD`. A mark that could not be written in time (Redis stalled
for longer than the grace) reports a guarded call as unguarded: the report errs toward
telling an operator to look.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import redis

from hookbus.bus.keys import Keys
from hookbus.bus.wire import Event
from hookbus.workers.unguarded.marks import ran_name
from hookbus.workers.unguarded.report import record_unguarded

log = logging.getLogger(__name__)

#: How long a post event waits before its mark is looked up, in ms.
GRACE_MS = 1_000
#: Most post events held at once; beyond it the oldest are looked up at once.
MAX_HELD = 20_000
#: Most marks looked up in one ZMSCORE.
LOOKUP_CHUNK = 500

_Held = tuple[float, bytes, Event]  # due (monotonic s), the call's name, its post event


class UnguardedWatch:
    """One partition's post events waiting for their look-up, and what it found."""

    def __init__(
        self,
        client: redis.Redis,
        keys: Keys,
        *,
        grace_ms: int = GRACE_MS,
        clock: Callable[[], float] = time.monotonic,
        react: Callable[[list[Event]], None] | None = None,
    ) -> None:
        self.client = client
        #: called with the calls found unguarded, once they are recorded (``[unguarded] then``)
        self.react = react
        self.keys = keys
        self.grace_s = grace_ms / 1000.0
        self.clock = clock
        self._held: collections.deque[_Held] = collections.deque()
        self._lock = threading.Lock()
        #: post events looked up, and of them the calls found with no guard asked
        self.checked = 0
        self.found = 0

    def note(self, event: Event) -> None:
        """Hold ``event`` for its look-up when it says a tool call ran."""
        name = ran_name(event)
        if name is None:
            return
        with self._lock:
            self._held.append((self.clock() + self.grace_s, name, event))

    def wait_ms(self) -> int | None:
        """How long until the next look-up is due (None: nothing held)."""
        with self._lock:
            if not self._held:
                return None
            due = self._held[0][0]
        return max(0, int((due - self.clock()) * 1000) + 1)

    def check(self) -> int:
        """Look up every call that came due; returns how many had no guard asked. On a
        Redis error the calls are held again, for the next look-up."""
        due = self._take_due()
        if not due:
            return 0
        try:
            missing = self._missing(due)
        except redis.exceptions.RedisError:
            with self._lock:
                self._held.extendleft(reversed(due))
            raise
        self.checked += len(due)
        if missing:
            record_unguarded(self.client, self.keys, missing)
            self.found += len(missing)
            for event in missing:
                log.warning(
                    "unguarded tool call: agent %r session %r ran %r with no guard asked "
                    "(is its hook installed and running?)",
                    event.agent_id or "",
                    event.session_id or "",
                    event.payload.get("tool_name"),
                )
            if self.react is not None:
                self.react(missing)
        return len(missing)

    def _take_due(self) -> list[_Held]:
        now = self.clock()
        out: list[_Held] = []
        with self._lock:
            held = self._held
            while held and (held[0][0] <= now or len(held) > MAX_HELD):
                out.append(held.popleft())
        return out

    def _missing(self, due: list[_Held]) -> list[Event]:
        key = self.keys.guarded_calls()
        missing: list[Event] = []
        for start in range(0, len(due), LOOKUP_CHUNK):
            chunk = due[start : start + LOOKUP_CHUNK]
            names: list[Any] = [name for _, name, _ in chunk]
            scores = self.client.zmscore(key, names)
            for (_, _, event), score in zip(chunk, scores, strict=True):
                if score is None:
                    missing.append(event)
        return missing
