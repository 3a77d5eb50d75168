"""Crash recovery of the request stream: entries abandoned by a dead worker are answered.

A side thread, every :data:`RECLAIM_INTERVAL_S`, first touches the entries this worker
holds (``XCLAIM ... JUSTID`` to itself: their idle time restarts, their delivery count does
not grow), so a live worker's entries never look abandoned however long its chains run;
then it XAUTOCLAIMs entries idle longer than :data:`RECLAIM_IDLE_MS`, which only a dead or
stalled worker leaves behind, and answers those whose deadline still holds. An entry
delivered more than ``workers.max_deliveries`` times goes to the dead-letter stream
instead of looping.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import redis
import redis.exceptions

from hookbus.bus.connection import CONNECTION_ERRORS
from hookbus.bus.keys import CHAIN_GROUP, Keys
from hookbus.workers.chain_replier import Ack, Dead, Op, Replier
from hookbus.workers.chain_runner import ChainRunner

if TYPE_CHECKING:
    from hookbus.bus.settings import Settings
    from hookbus.workers.heartbeat import Heartbeat

log = logging.getLogger(__name__)

#: How often the reclaim thread looks for entries abandoned by crashed workers, in s.
RECLAIM_INTERVAL_S = 0.025
#: Idle time after which a pending entry counts as abandoned, in ms. Live workers touch
#: their entries every RECLAIM_INTERVAL_S, so this only has to cover a few missed touches.
RECLAIM_IDLE_MS = 100
#: Entries one reclaim pass claims at most.
RECLAIM_COUNT = 100
#: Backoff of the reclaim thread after a Redis error, in seconds (doubled up to the cap).
BACKOFF_MIN_S = 0.05
BACKOFF_MAX_S = 2.0


class HeldEntries:
    """The entries this worker is running (thread-safe): touched, never reclaimed by itself."""

    def __init__(self) -> None:
        self._ids: set[bytes] = set()
        self._lock = threading.Lock()

    def add(self, ids: Iterable[bytes]) -> None:
        with self._lock:
            self._ids.update(ids)

    def discard(self, ids: Iterable[bytes]) -> None:
        with self._lock:
            self._ids.difference_update(ids)

    def snapshot(self) -> list[bytes]:
        with self._lock:
            return list(self._ids)

    def take_foreign(self, ids: Iterable[bytes]) -> set[bytes]:
        """Add and return those of ``ids`` not held yet (atomically)."""
        with self._lock:
            foreign = {i for i in ids if i not in self._ids}
            self._ids.update(foreign)
            return foreign

    def __contains__(self, entry_id: object) -> bool:
        with self._lock:
            return entry_id in self._ids

    def __bool__(self) -> bool:
        with self._lock:
            return bool(self._ids)


class Reclaimer:
    """One worker's reclaim thread (see the module docstring)."""

    def __init__(
        self,
        client: redis.Redis,
        settings: Settings,
        keys: Keys,
        *,
        worker_id: str,
        held: HeldEntries,
        runner: ChainRunner,
        replier: Replier,
        heartbeat: Heartbeat,
        stop_event: threading.Event,
    ) -> None:
        self.client = client
        self.settings = settings
        self.keys = keys
        self.worker_id = worker_id
        self.held = held
        self.runner = runner
        self.replier = replier
        self.heartbeat = heartbeat
        self.stop_event = stop_event
        self._cursor: bytes | str = "0-0"
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(
            target=self._loop, name=f"reclaim-{self.worker_id}", daemon=True
        )
        self._thread.start()

    def join(self, timeout: float) -> None:
        if self._thread is not None:
            self._thread.join(timeout=timeout)

    def idle_ms(self) -> int:
        """Entries idle longer than this are abandoned (their worker stopped touching them)."""
        return RECLAIM_IDLE_MS

    def touch_mine(self) -> int:
        """Restart the idle time of every entry this worker holds, without counting a
        delivery (XCLAIM JUSTID to itself), so no other worker takes them for abandoned."""
        ids: list[Any] = self.held.snapshot()
        if ids:
            self.client.xclaim(self.keys.requests, CHAIN_GROUP, self.worker_id, 0, ids, justid=True)
        return len(ids)

    def _loop(self) -> None:
        backoff = RECLAIM_INTERVAL_S
        while not self.stop_event.wait(backoff):
            try:
                self.touch_mine()
                self.reclaim()
                backoff = RECLAIM_INTERVAL_S
            except CONNECTION_ERRORS as exc:
                log.debug("reclaim: Redis unavailable (%s)", exc)
                backoff = min(max(backoff * 2, BACKOFF_MIN_S), BACKOFF_MAX_S)
            except redis.exceptions.ResponseError as exc:
                log.debug("reclaim: %s", exc)
                backoff = min(max(backoff * 2, BACKOFF_MIN_S), BACKOFF_MAX_S)
            except Exception:
                log.exception("reclaim pass failed")
                backoff = BACKOFF_MAX_S

    def reclaim(self) -> int:
        """One pass: claim abandoned entries, answer or dead-letter them. Returns how many
        entries were claimed from other consumers."""
        result: Any = self.client.xautoclaim(
            self.keys.requests,
            CHAIN_GROUP,
            self.worker_id,
            min_idle_time=self.idle_ms(),
            start_id=self._cursor,
            count=RECLAIM_COUNT,
        )
        # a long pending list is scanned RECLAIM_COUNT entries per pass, resuming where
        # the last pass stopped (XAUTOCLAIM's cursor; 0-0 once the end is reached)
        self._cursor = result[0] if result else b"0-0"
        claimed: list[tuple[bytes, dict[bytes, bytes] | None]] = result[1] if result else []
        deleted: list[bytes] = result[2] if result and len(result) > 2 else []
        fresh = self.held.take_foreign(i for i, _ in claimed)
        foreign = [(i, f) for i, f in claimed if i in fresh]
        try:
            return self._answer_claimed(foreign, deleted)
        finally:
            self.held.discard(fresh)

    def _answer_claimed(
        self,
        claimed: list[tuple[bytes, dict[bytes, bytes] | None]],
        deleted: list[bytes],
    ) -> int:
        ops: list[Op] = [Ack(entry_id) for entry_id in deleted]
        live = [(i, f) for i, f in claimed if f is not None]
        ops.extend(Ack(i) for i, f in claimed if f is None)
        if live:
            pipe = self.client.pipeline(transaction=False)
            for entry_id, _ in live:
                pipe.xpending_range(
                    self.keys.requests, CHAIN_GROUP, min=entry_id, max=entry_id, count=1
                )
            counts = pipe.execute()
            limit = self.settings.workers.max_deliveries
            for (entry_id, fields), pending in zip(live, counts, strict=True):
                assert fields is not None
                deliveries = int(pending[0]["times_delivered"]) if pending else 1
                if deliveries > limit:
                    log.error(
                        "request entry %s delivered %d times (limit %d); dead-lettered",
                        entry_id,
                        deliveries,
                        limit,
                    )
                    ops.append(Dead(entry_id, fields, deliveries, "too many deliveries"))
                    continue
                log.info("reclaimed request entry %s (delivery %d)", entry_id, deliveries)
                self.heartbeat.count("reclaimed")
                ops.append(self.runner.process(entry_id, fields, deliveries))
        if ops:
            self.replier.flush(ops)
        return len(live)
