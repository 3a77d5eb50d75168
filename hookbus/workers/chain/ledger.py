"""Acknowledging and logging answered requests in bulk, off the per-request path.

Answering a request in one script holding XACK, the reply XADD and a decision-log XADD
would cost four Redis commands per request (counted in INFO commandstats). While the
worker's ownership lease holds (:meth:`~hookbus.workers.chain.lease.OwnerLease.holds`), no other
worker can have taken its entries over, so the XACK's "first answer wins" guard has nothing
to guard: the reply goes out as one bare XADD, and the entry's XACK and its decision-log
record wait here. A daemon thread settles them every :data:`FLUSH_EVERY_S` (or as soon as
:data:`~hookbus.bus.decision_batch.MAX_RECORDS` wait) in one MULTI/EXEC: the decision-log
entry holding every record, one XACK for all, the log's size counter. At a few thousand
requests a second that is about 0.01 commands per request instead of three.

The MULTI/EXEC is right only while the lease has held since the entries were read (their
read epochs still hold). Otherwise (the worker was stopped or Redis stalled long enough
for the lease to lapse) some entries may have been taken over and logged by the worker
that took them, and ``ack_flush.lua`` acknowledges and logs only what is still this
worker's. Commands are packed by hand and sent on a pooled connection: redis-py's packer
and its Lua argument conversions cost the worker and Redis several times more, per flush,
than the flush's own work. The log is trimmed by decisions, not entries
(``ack_trim.lua``), once its counter passes ``decisions_maxlen`` by a tenth.

The same flush leaves the marks of the tool calls a guard was asked about
(:mod:`hookbus.workers.unguarded.marks`): one ZADD for every mark queued since the last,
and once a second a ZREMRANGEBYSCORE dropping those past their time.

What this trades: an entry stays in the pending list up to ~0.1 s after its answer, and
the decision log shows it as late. A worker killed before a flush leaves those entries
pending with no record; the reclaimer that takes them over finds each answer in its
producer's inbox and logs it then (:mod:`~hookbus.workers.chain.recovery`). A flush that
Redis cannot take keeps its items for the next one.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING

import redis

from hookbus.bus import lua, resp
from hookbus.bus.connection import CONNECTION_ERRORS
from hookbus.bus.decision_batch import MAX_RECORDS, join_records
from hookbus.bus.keys import CHAIN_GROUP, Keys
from hookbus.workers.chain.raw_commands import EXEC, MULTI, send_pooled
from hookbus.workers.unguarded.marks import MARK_TTL_MS

if TYPE_CHECKING:
    from hookbus.workers.chain.lease import OwnerLease
    from hookbus.workers.fleet.heartbeat import Heartbeat

log = logging.getLogger(__name__)

#: How long an answered request waits for its XACK and log record at most, in s.
FLUSH_EVERY_S = 0.1
#: Most entries held while flushes fail (Redis refusing the script, e.g. an ACL without a
#: command it needs): beyond this the oldest are given up, logged, and left pending for
#: the reclaimer, rather than growing without bound.
MAX_HELD = 50_000

_STOP_ERRORS: tuple[type[BaseException], ...] = (*CONNECTION_ERRORS, redis.exceptions.RedisError)

Record = bytes
"""A decision-log record, msgpack-encoded (:func:`hookbus.bus.decision_batch.encode_record`)."""
Item = tuple[bytes, Record | None]
"""An answered (or expired) entry id and its decision-log record (None: not logged)."""
_Held = tuple[bytes, Record | None, int | None]  # an item and the lease epoch it was read in


def decision_count_key(keys: Keys) -> str:
    """The counter of decisions in a batched decision log (same hash slot as the log)."""
    return f"{keys.decisions}:n"


class AckLedger:
    """One chain worker's answered-but-unacknowledged entries and their log records."""

    def __init__(
        self,
        client: redis.Redis,
        keys: Keys,
        *,
        consumer: str,
        decisions_maxlen: int,
        heartbeat: Heartbeat | None = None,
        lease: OwnerLease | None = None,
        every_s: float | None = None,
    ) -> None:
        self.client = client
        self.keys = keys
        self.consumer = consumer
        self.lease = lease
        self.decisions_maxlen = decisions_maxlen
        self.heartbeat = heartbeat
        self.every_s = FLUSH_EVERY_S if every_s is None else every_s
        self._script = lua.register(client, "hookbus.workers.chain", "ack_flush.lua")
        self._trim = lua.register(client, "hookbus.workers.chain", "ack_trim.lua")
        self._trim_above = decisions_maxlen + max(100, decisions_maxlen // 10)
        self._items: list[_Held] = []
        self._marks: list[bytes] = []
        self._marks_trimmed_at = 0.0
        self._refusal_logged_at = 0.0
        #: marks Redis refused to write (given up: see :meth:`_flush_marks`)
        self.marks_refused = 0
        self._first_at = 0.0
        self._lock = threading.Lock()
        self._flush_lock = threading.Lock()  # one flush at a time: items keep their order
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        #: entries acknowledged, and entries another delivery had acknowledged first
        self.acked = 0
        self.already_acked = 0
        self.given_up = 0

    def add(self, items: list[Item], epoch: int | None = None) -> None:
        """Queue answered entries (after their replies were sent), read in lease ``epoch``
        (None: settle them through the ownership check)."""
        if not items:
            return
        with self._lock:
            if not self._items:
                self._first_at = time.monotonic()
            self._items.extend((entry_id, record, epoch) for entry_id, record in items)
            full = len(self._items) >= MAX_RECORDS
            over = len(self._items) - MAX_HELD
            if over > 0:
                del self._items[:over]
        if over > 0:
            self.given_up += over
            log.error(
                "ack ledger full (flushes keep failing): %d answered entr(y/ies) given up, "
                "left pending and unlogged",
                over,
            )
        if full:
            self._wake.set()

    def mark(self, names: list[bytes]) -> None:
        """Queue the marks of guarded tool calls, written with the next flush."""
        if not names:
            return
        with self._lock:
            if not self._items and not self._marks:
                self._first_at = time.monotonic()
            self._marks.extend(names)
            over = len(self._marks) - MAX_HELD
            if over > 0:
                del self._marks[:over]

    def pending(self) -> int:
        with self._lock:
            return len(self._items)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="ack-ledger", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the thread and settle what is left (a clean stop leaves nothing pending)."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=5.0)
        try:
            self.flush()
        except _STOP_ERRORS as exc:
            # a stop never fails for this (the stream may be gone, Redis restarted empty)
            log.warning(
                "%d answered request(s) not acknowledged at stop (%s): the reclaimer will "
                "settle them from their producers' inboxes",
                self.pending(),
                exc,
            )

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self.every_s)
            self._wake.clear()
            with self._lock:
                due = bool(self._items or self._marks) and (
                    len(self._items) >= MAX_RECORDS
                    or time.monotonic() - self._first_at >= self.every_s * 0.9
                )
            if not due:
                continue
            try:
                self.flush()
            except CONNECTION_ERRORS as exc:
                log.debug("ack flush: Redis unavailable (%s); kept for the next", exc)
                self._stop.wait(self.every_s)
            except redis.exceptions.ResponseError as exc:
                log.error("Redis refused an ack flush (%s); kept for the next", exc)
                self._stop.wait(self.every_s)
            except Exception:
                log.exception("ack flush failed; kept for the next")
                self._stop.wait(self.every_s)

    def flush(self) -> int:
        """Settle everything queued now, in calls of at most MAX_RECORDS entries; returns
        how many entries were acknowledged. On an error the unsent items are queued again,
        ahead of anything added since."""
        done = 0
        with self._flush_lock:
            self._flush_marks()
            while True:
                with self._lock:
                    batch = self._items[:MAX_RECORDS]
                    del self._items[:MAX_RECORDS]
                    if self._items:
                        self._first_at = time.monotonic()
                if not batch:
                    return done
                try:
                    done += self._settle(batch)
                except BaseException:
                    with self._lock:
                        self._items[:0] = batch
                        self._first_at = time.monotonic()
                    raise

    def _flush_marks(self) -> None:
        """ZADD the queued marks (scored now, this worker's clock) and, once a second,
        drop the marks older than their time; on an error they wait for the next flush."""
        with self._lock:
            marks, self._marks = self._marks, []
        if not marks:
            return
        now = time.time()
        stamp = b"%d" % int(now * 1000)
        key = self.keys.guarded_calls()
        args: list[bytes | str] = ["ZADD", key]
        for name in marks:
            args += [stamp, name]
        commands = [resp.pack(*args)]
        if now - self._marks_trimmed_at >= 1.0:
            commands.append(
                resp.pack("ZREMRANGEBYSCORE", key, "-inf", int(now * 1000) - MARK_TTL_MS)
            )
        try:
            replies = send_pooled(self.client, commands)
        except BaseException:
            with self._lock:
                self._marks[:0] = marks
            raise
        problem = next((r for r in replies if isinstance(r, Exception)), None)
        if problem is not None:
            # refused, not unreachable (an ACL written before the marks' key): the answers'
            # acknowledgements must not wait on it, so these marks are given up, said loudly
            self.marks_refused += len(marks)
            if now - self._refusal_logged_at >= 60.0:
                self._refusal_logged_at = now
                log.error(
                    "Redis refused the marks of guarded tool calls on %s (%s): every tool "
                    "call will be reported as unguarded; give the worker user write access "
                    "to that key (deploy/redis/users.acl)",
                    key,
                    problem,
                )
            return
        if len(commands) > 1:
            self._marks_trimmed_at = now

    def _settle(self, batch: list[_Held]) -> int:
        lease = self.lease
        held = lease is not None and all(
            epoch is not None and lease.holds(epoch) for _, _, epoch in batch
        )
        acked, total = self._settle_held(batch) if held else self._settle_checked(batch)
        self.acked += acked
        missed = len(batch) - acked
        if missed:
            # taken over after a lapse (and logged by the taker), or gone with a Redis that
            # restarted empty
            self.already_acked += missed
            if self.heartbeat is not None:
                self.heartbeat.count("not_settled", missed)
            log.warning(
                "%d answered entr(y/ies) were no longer this worker's to acknowledge", missed
            )
        if total > self._trim_above:
            self._trim(
                keys=[self.keys.decisions, decision_count_key(self.keys)],
                args=[self.decisions_maxlen],
            )
        return acked

    def _settle_held(self, batch: list[_Held]) -> tuple[int, int]:
        """MULTI, XADD the batch entry, XACK, INCRBY, EXEC; (acked, decisions logged now)."""
        keys = self.keys
        records = [record for _, record, _ in batch if record is not None]
        commands = [MULTI]
        if records:
            commands.append(
                resp.pack(
                    "XADD", keys.decisions, "*", "b", join_records(records), "n", len(records)
                )
            )
        commands.append(
            resp.pack("XACK", keys.requests, CHAIN_GROUP, *(entry_id for entry_id, _, _ in batch))
        )
        if records:
            commands.append(resp.pack("INCRBY", decision_count_key(keys), len(records)))
        commands.append(EXEC)
        replies = send_pooled(self.client, commands)
        done = replies[-1]
        if not isinstance(done, list):
            problem = next((r for r in replies if isinstance(r, Exception)), done)
            raise redis.exceptions.ResponseError(f"ack flush not applied: {problem}")
        if records:
            return int(done[1]), int(done[2])
        return int(done[0]), 0

    def _settle_checked(self, batch: list[_Held]) -> tuple[int, int]:
        """ack_flush.lua: only what is still this worker's is acknowledged and logged."""
        ordered = sorted(_id_key(entry_id) for entry_id, _, _ in batch)
        args: list[bytes | str | int] = [
            CHAIN_GROUP,
            self.consumer,
            self.decisions_maxlen,
            b"%d-%d" % ordered[0],
            b"%d-%d" % ordered[-1],
        ]
        for entry_id, record, _ in batch:
            args += [entry_id, record if record is not None else b""]
        acked = int(
            self._script(
                keys=[self.keys.requests, self.keys.decisions, decision_count_key(self.keys)],
                args=args,
            )
        )
        total = int(self.client.get(decision_count_key(self.keys)) or 0)
        return acked, total


def _id_key(entry_id: bytes) -> tuple[int, int]:
    ms, _, seq = entry_id.partition(b"-")
    return int(ms), int(seq or 0)
