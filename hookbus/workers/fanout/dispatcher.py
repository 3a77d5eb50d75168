"""The fan-out dispatcher: from the event log to one RQ job per matching non-blocking hook.

It reads ``hookbus:{ns}:events`` (with ``partitions`` > 1: one partition's stream,
``hookbus:{ns:p}:events``, each with its own group ``fanout``) in the consumer group
``fanout`` and, for each batch of
entries it reads, plans the jobs of every matching non-blocking hook, enqueues them all in
one transaction on the RQ Redis (:mod:`hookbus.workers.fanout.enqueue`), then acknowledges the
entries and appends batching hooks' events to their buffers in one Lua call
(``fanout_ack.lua``, see :mod:`hookbus.workers.fanout.batching`). Events no hook matches are
simply acknowledged.

When a dispatcher dies between the enqueue and the XACK, the entries stay pending; another
dispatcher (or the restarted one) reclaims them with XAUTOCLAIM once they have been idle
for ``claim_min_idle_ms``, and the dispatch markers keep their jobs from being enqueued
twice. An entry delivered more than ``workers.max_deliveries`` times, or one that does not
decode, goes to the namespace's dead-letter stream and is acknowledged.

Partitions: one :class:`Dispatcher` per partition (:mod:`hookbus.workers.fanout.role` runs one
per partition in a process, each on a thread of its own). Everything a partition's
dispatcher writes in one atomic step lives in the partition's hash slot (its stream and
its batching hooks' buffers, ``hookbus:{ns:p}:batch:<hook>``); on a Redis Cluster those
commands go to ``stream``, the client of the master serving that slot. Dead letters go to
the namespace's own stream (``bus``), where ``hookbus dlq`` finds them.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import redis
import redis.exceptions

from hookbus.bus import ids, keys
from hookbus.bus.eventlog import EVENT_FIELD
from hookbus.bus.keys import FANOUT_GROUP, Keys
from hookbus.bus.kinds import Catalogue
from hookbus.bus.wire import Event, now_ms
from hookbus.errors import HookBusError, WireError
from hookbus.workers.entry_decoding import decode_event
from hookbus.workers.fanout.batching import BatchFlusher
from hookbus.workers.fanout.enqueue import DispatcherStats, Plan, enqueue
from hookbus.workers.fanout.gate import HookSetGate
from hookbus.workers.fanout.job_specs import (
    OBSERVED_META,
    fans_out,
    observes_requests,
    script_source,
)
from hookbus.workers.fanout.serializer import MsgpackSerializer
from hookbus.workers.fleet.backoff import Backoff
from hookbus.workers.unguarded.react import UnguardedReaction
from hookbus.workers.unguarded.watch import UnguardedWatch

if TYPE_CHECKING:
    from rq import Queue

    from hookbus.bus.settings.loader import Settings

log = logging.getLogger(__name__)

#: Entries read per XREADGROUP.
DEFAULT_READ_COUNT = 200
#: A pending entry idle this long belongs to a dead (or stuck) dispatcher, in ms.
DEFAULT_CLAIM_MIN_IDLE_MS = 5_000
#: How often pending entries of other dispatchers are looked for, in ms.
DEFAULT_RECLAIM_INTERVAL_MS = 2_000
#: Entries reclaimed per XAUTOCLAIM call.
RECLAIM_COUNT = 100
#: Bound on XAUTOCLAIM calls per reclaim pass (the rest waits for the next pass).
RECLAIM_MAX_ROUNDS = 10

_REDIS_ERRORS = (redis.exceptions.RedisError, ConnectionError, OSError)


class _Registry(Protocol):
    """What the dispatcher needs of a hook registry (HookRegistry, or a test's stand-in).

    Descriptors are read duck-typed: ``id``, ``blocking``, ``timeout_s``, ``retries``
    (``count``, ``intervals_s``) and ``batch`` (``max_events``, ``max_wait_ms`` or None).
    """

    def matching(self, event: Event) -> Sequence[Any]: ...
    def hooks(self, kind: str | None = None) -> Sequence[Any]: ...


class Dispatcher:
    """One fan-out dispatcher: a consumer of the ``fanout`` group.

    ``bus`` is the client of the bus Redis (the namespace's slot: dead letters); ``rq``
    the client of RQ's Redis (the same server unless ``rq.redis_url`` is set). ``partition``
    picks the event stream read (0: ``hookbus:{ns}:events``) and ``stream`` the client of
    its slot (default ``bus``; on a cluster, the partition's master). Use :meth:`step` to
    process what is there (tests) and :meth:`run` to loop until stopped.
    """

    def __init__(
        self,
        settings: Settings,
        registry: _Registry,
        *,
        bus: redis.Redis,
        rq: redis.Redis,
        consumer: str | None = None,
        read_count: int = DEFAULT_READ_COUNT,
        claim_min_idle_ms: int = DEFAULT_CLAIM_MIN_IDLE_MS,
        reclaim_interval_ms: int = DEFAULT_RECLAIM_INTERVAL_MS,
        partition: int = 0,
        stream: redis.Redis | None = None,
    ) -> None:
        from rq import Queue

        self.settings = settings
        self.registry = registry
        self.bus = bus
        #: The client of this partition's slot: its event stream and batch buffers.
        self.stream = stream if stream is not None else bus
        self.rq = rq
        self.partition = partition
        #: This partition's keys (``keys.events`` is the stream read); dead letters go to
        #: the partition's own stream, :attr:`dead_letters`, in the slot of its events (on
        #: a cluster, written with :attr:`stream`), where ``hookbus dlq`` looks too.
        self.keys = Keys.for_partition(settings.namespace, partition)
        self.dead_letters = self.keys.dead_letters
        self.consumer = consumer or f"{socket.gethostname()}-{os.getpid()}-{ids.token(6)}"
        self.read_count = read_count
        self.claim_min_idle_ms = claim_min_idle_ms
        self.reclaim_interval_ms = reclaim_interval_ms
        self.queue: Queue = Queue(self.keys.rq_queue, connection=rq, serializer=MsgpackSerializer)
        self.catalogue: Catalogue = settings.catalogue()
        self.stats = DispatcherStats()
        self._last_reclaim_ms = 0
        self.batches = BatchFlusher(
            settings,
            lambda: registry.hooks(),
            bus=bus,
            rq=rq,
            queue=self.queue,
            consumer=self.consumer,
            stats=self.stats,
            partition=partition,
            stream=self.stream,
        )
        #: called after each handled read with (entries, milliseconds spent), for heartbeats
        self.on_handled: Callable[[int, float], None] | None = None
        #: set by the role: :meth:`run` reads nothing while no hook set is loaded
        self.gate: HookSetGate | None = None
        self._ack_script = self.stream.register_script(script_source("fanout_ack.lua"))
        #: post events waiting to be looked up: was their call's guard asked?
        self.unguarded = UnguardedWatch(
            self.stream, self.keys, react=UnguardedReaction(bus, settings)
        )

    # --- setup ---------------------------------------------------------------------

    def ensure_group(self) -> None:
        """Create the ``fanout`` group (from the start of the log) unless it exists."""
        try:
            self.stream.xgroup_create(self.keys.events, FANOUT_GROUP, id="0", mkstream=True)
        except redis.exceptions.ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    # --- the loop ------------------------------------------------------------------

    def step(self, block_ms: int | None = None) -> int:
        """Reclaim when due, read new entries (blocking up to ``block_ms``), dispatch them,
        flush due batches. Returns how many entries were handled."""
        handled = 0
        now = now_ms()
        if now - self._last_reclaim_ms >= self.reclaim_interval_ms:
            self._last_reclaim_ms = now
            handled += self.reclaim()
        entries = self._read(block_ms)
        if entries:
            handled += self.handle(entries, redelivered=False)
        self.flush_batches()
        self.unguarded.check()
        return handled

    def flush_batches(self, *, force: bool = False) -> int:
        """Enqueue one job per due batch (see :meth:`BatchFlusher.flush`)."""
        return self.batches.flush(force=force)

    def run(self, stop: threading.Event) -> None:
        """Loop until ``stop`` is set; Redis outages are logged and retried with backoff.
        A warden thread recovers the event stream if an explicit id poisons it."""
        from hookbus.workers.fleet.stream_health import StreamWarden

        self.ensure_group()
        self.warden = StreamWarden(
            self.stream,
            self.keys.events,
            FANOUT_GROUP,
            maxlen=self.settings.streams.events_maxlen,
            stop_event=stop,
        )
        self.warden.start()
        backoff = Backoff()
        while not stop.is_set():
            if self.gate is not None and self.gate.hold(stop):
                continue
            try:
                waits = (self.batches.block_ms(), self.unguarded.wait_ms())
                self.step(min(wait for wait in waits if wait is not None))
                backoff.reset()
            except _REDIS_ERRORS as exc:
                delay = backoff.next_s()
                log.warning("fan-out dispatcher: Redis error, retrying in %.2fs: %s", delay, exc)
                stop.wait(delay)
                with contextlib.suppress(*_REDIS_ERRORS):
                    self.ensure_group()
            except Exception:
                # a bug or a poisonous event: the entries stay pending, are reclaimed after
                # claim_min_idle_ms and dead-lettered after max_deliveries; keep serving
                delay = backoff.next_s()
                log.exception("fan-out dispatcher: step failed, retrying in %.2fs", delay)
                stop.wait(delay)

    def _read(self, block_ms: int | None) -> list[tuple[bytes, dict[bytes, bytes]]]:
        reply = self.stream.xreadgroup(
            FANOUT_GROUP,
            self.consumer,
            {self.keys.events: ">"},
            count=self.read_count,
            block=block_ms if block_ms and block_ms > 0 else None,
        )
        if not reply:
            return []
        entries: list[tuple[bytes, dict[bytes, bytes]]] = reply[0][1]  # type: ignore[index,assignment]
        return entries

    def reclaim(self) -> int:
        """Take over entries other dispatchers left pending for ``claim_min_idle_ms``."""
        handled = 0
        start: bytes | str = "0-0"
        for _ in range(RECLAIM_MAX_ROUNDS):
            reply = self.stream.xautoclaim(
                self.keys.events,
                FANOUT_GROUP,
                self.consumer,
                min_idle_time=self.claim_min_idle_ms,
                start_id=start,
                count=RECLAIM_COUNT,
            )
            start = reply[0]
            entries = [(eid, fields) for eid, fields in reply[1] if fields is not None]
            if entries:
                self.stats.reclaimed += len(entries)
                log.info(
                    "fan-out: reclaimed %d pending entries of %s", len(entries), self.keys.events
                )
                handled += self.handle(entries, redelivered=True)
            if start in (b"0-0", "0-0"):
                break
        return handled

    # --- dispatching ---------------------------------------------------------------

    def handle(
        self, entries: Sequence[tuple[bytes, dict[bytes, bytes]]], *, redelivered: bool
    ) -> int:
        """Enqueue the jobs of ``entries`` and acknowledge them. Returns len(entries)."""
        started = time.perf_counter()
        plan = Plan(
            result_ttl_s=self.settings.rq.result_ttl_s,
            pack_max_events=self.settings.rq.pack_max_events,
        )
        too_often = self._delivered_too_often(entries) if redelivered else set()
        for entry_id, fields in entries:
            plan.entry_ids.append(entry_id)
            data = fields.get(EVENT_FIELD)
            if data is None:
                plan.dead.append((entry_id, "entry has no event field", b""))
                continue
            if entry_id in too_often:
                reason = f"delivered more than {self.settings.workers.max_deliveries} times"
                plan.dead.append((entry_id, reason, data))
                continue
            try:
                event = decode_event(data, max_bytes=self.settings.streams.max_event_bytes)
            except WireError as exc:
                plan.dead.append((entry_id, str(exc), data))
                continue
            try:
                hooks = self.registry.matching(event)
                if OBSERVED_META in event.meta:  # an answered request: its observers only
                    chosen = [h for h in hooks if observes_requests(h)]
                else:
                    self.unguarded.note(event)
                    spec = self.catalogue.get(event.kind)
                    chosen = [h for h in hooks if fans_out(h, spec)]
                self.plan_event(plan, entry_id, event, data, chosen)
            except Exception as exc:  # this entry's problem only, never the whole read's
                if not isinstance(exc, HookBusError):
                    log.exception("fan-out: planning the jobs of entry %s failed", entry_id)
                plan.dead.append((entry_id, f"matching hooks failed: {exc}", data))
                continue
        jobs = self.enqueue(plan)
        if plan.dead:
            self._dead_letter(plan.dead)
        self._ack(plan)
        self.stats.events += len(entries)
        self.stats.jobs += jobs
        self.stats.buffered += sum(len(p) for p in plan.pushes.values())
        self.stats.dead += len(plan.dead)
        for entry_id, reason, _ in plan.dead:
            log.warning("fan-out: entry %s dead-lettered: %s", entry_id.decode(), reason)
        if self.on_handled is not None:
            self.on_handled(len(entries), (time.perf_counter() - started) * 1000.0)
        return len(entries)

    def plan_event(
        self, plan: Plan, entry_id: bytes, event: Event, data: bytes, hooks: Sequence[Any]
    ) -> None:
        """Add ``event``'s jobs for ``hooks`` to ``plan`` (batching hooks: buffer appends)."""
        batching = plan.add_event(entry_id, event, data, list(hooks))
        self.batches.note(batching)

    def enqueue(self, plan: Plan) -> int:
        """Enqueue ``plan``'s jobs at most once per event (see :func:`enqueue.enqueue`)."""
        return enqueue(self.rq, self.queue, self.keys, plan, self.stats)

    def _dead_letter(self, dead: list[tuple[bytes, str, bytes]]) -> None:
        with self.stream.pipeline(transaction=False) as pipe:
            for entry_id, reason, data in dead:
                pipe.xadd(
                    self.dead_letters,
                    {
                        b"stream": self.keys.events,
                        b"entry_id": entry_id,
                        b"group": FANOUT_GROUP,
                        b"reason": reason,
                        b"worker": self.consumer,
                        b"e": data,
                    },
                    maxlen=self.settings.streams.events_maxlen,
                    approximate=True,
                )
            pipe.execute()

    def _ack(self, plan: Plan) -> None:
        """Run the script that acknowledges ``plan``'s entries and appends their batching
        hooks' events (only for entries this dispatcher still owned): one round trip."""
        batch_keys: dict[str, int] = {}
        args: list[Any] = [FANOUT_GROUP, len(plan.entry_ids)]
        for entry_id in plan.entry_ids:
            pushes = plan.pushes.get(entry_id, ())
            args += [entry_id, len(pushes)]
            for hook_id, item in pushes:
                buffer = keys.partition_batch(self.keys.ns, self.partition, hook_id)
                index = batch_keys.setdefault(buffer, len(batch_keys) + 2)
                args += [index, item]
        self._ack_script(keys=[self.keys.events, *batch_keys], args=args)

    def _delivered_too_often(
        self, entries: Sequence[tuple[bytes, dict[bytes, bytes]]]
    ) -> set[bytes]:
        limit = self.settings.workers.max_deliveries
        if limit <= 0 or not entries:
            return set()
        ids = [eid for eid, _ in entries]
        pending = self.stream.xpending_range(
            self.keys.events,
            FANOUT_GROUP,
            min=ids[0],
            max=ids[-1],
            count=len(ids) * 2,
            consumername=self.consumer,
        )
        wanted = set(ids)
        return {
            p["message_id"]
            for p in pending
            if p["message_id"] in wanted and int(p["times_delivered"]) > limit
        }
