"""The fan-out dispatcher: from the event log to one RQ job per matching non-blocking hook.

It reads ``hookbus:{ns}:events`` in the consumer group ``fanout`` and, for each batch of
entries it reads, builds the jobs of every matching non-blocking hook, enqueues them all in
one transaction on the RQ Redis (``Queue.enqueue_many`` in a pipeline), then acknowledges
the entries. Events no hook matches are simply acknowledged.

Crash safety, step by step:

* A job's id is derived from the event id and the hook id (:func:`job_id_for`), and the
  transaction that enqueues an event's jobs also sets its dispatch marker
  (``hookbus:{ns}:dispatched:<event id>``, on the RQ Redis, for
  :data:`DISPATCH_MARKER_TTL_S`). When a dispatcher dies between the enqueue and the XACK,
  the entries stay pending; another dispatcher (or the restarted one) reclaims them with
  XAUTOCLAIM once they have been idle for ``claim_min_idle_ms`` and skips every event whose
  marker exists, so a hook never gets a second job for one event, however short RQ's
  result TTL. The markers are WATCHed and read inside the enqueue transaction, so a
  dispatcher that was only slow (its entries reclaimed while it still worked on them)
  cannot enqueue them a second time either.
* Batching hooks (``batch = {max_events, max_wait_ms}``) get the event appended to a Redis
  list by the same Lua call that acknowledges the entry (``fanout_ack.lua``), and only when
  that XACK removed the entry from the pending list: an event is either pending in the
  stream or buffered once. A flush takes the head of the list, enqueues one job holding the
  list of events with a marker holding the batch size (job id from the hook and the first
  event id), then trims the list only if it still starts with that batch
  (``fanout_trim.lua``); a flush that died before trimming is found by its marker.
* An entry delivered more than ``workers.max_deliveries`` times, or one that does not
  decode, goes to the dead-letter stream and is acknowledged.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import math
import os
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import msgspec
import redis
import redis.exceptions

from hookbus import defaults
from hookbus.bus import keys as keymod
from hookbus.bus.connection import connect
from hookbus.bus.eventlog import EVENT_FIELD
from hookbus.bus.keys import FANOUT_GROUP, Keys
from hookbus.bus.kinds import Catalogue, KindSpec
from hookbus.bus.wire import Event, decode, now_ms
from hookbus.errors import HookBusError, RedisCommandError, WireError
from hookbus.workers.serializer import MsgpackSerializer
from hookbus.workers.signals import graceful_signals

if TYPE_CHECKING:
    from rq import Queue
    from rq.queue import EnqueueData

    from hookbus.bus.settings import Settings

log = logging.getLogger(__name__)

#: Job function RQ runs for one event and one hook.
HOOK_JOB_FUNC = "hookbus.workers.jobs.run_hook_job"
#: Job function RQ runs for a batch of events and one batching hook.
BATCH_JOB_FUNC = "hookbus.workers.jobs.run_batch_job"

#: Entries read per XREADGROUP.
DEFAULT_READ_COUNT = 200
#: Longest XREADGROUP BLOCK, in ms (Redis rounds it up to its 100 ms clock anyway).
DEFAULT_BLOCK_MS = 1_000
#: A pending entry idle this long belongs to a dead (or stuck) dispatcher, in ms.
DEFAULT_CLAIM_MIN_IDLE_MS = 5_000
#: How often pending entries of other dispatchers are looked for, in ms.
DEFAULT_RECLAIM_INTERVAL_MS = 2_000
#: Entries reclaimed per XAUTOCLAIM call.
RECLAIM_COUNT = 100
#: Bound on XAUTOCLAIM calls per reclaim pass (the rest waits for the next pass).
RECLAIM_MAX_ROUNDS = 10
#: Added to a hook's own timeout to make RQ's job timeout: the hook times itself out first
#: and reports a clean HookTimeout; RQ's timeout is the backstop. In seconds.
JOB_TIMEOUT_GRACE_S = 1
#: How long the marker "this event's (or batch's) jobs are enqueued" lives, in seconds: an
#: entry redelivered within this time (a dispatcher died between enqueue and ack) gets no
#: second job. Markers are written only for events with unbatched jobs and for batches.
DISPATCH_MARKER_TTL_S = 3_600
#: Tries of the watched enqueue transaction before the entries are left for a later pass.
ENQUEUE_ATTEMPTS = 5
#: How long one dispatcher holds a batching hook's flush lock, in ms.
BATCH_LOCK_MS = 10_000
#: Bound on batches flushed for one hook per dispatcher step.
MAX_FLUSHES_PER_STEP = 50

_REDIS_ERRORS = (redis.exceptions.RedisError, ConnectionError, OSError)


class _Registry(Protocol):
    """What the dispatcher needs of a hook registry (HookRegistry, or a test's stand-in).

    Descriptors are read duck-typed: ``id``, ``blocking``, ``timeout_s``, ``retries``
    (``count``, ``intervals_s``) and ``batch`` (``max_events``, ``max_wait_ms`` or None).
    """

    def matching(self, event: Event) -> Sequence[Any]: ...
    def hooks(self, kind: str | None = None) -> Sequence[Any]: ...


def _script_source(name: str) -> str:
    """One of the dispatcher's Lua scripts, shipped as package data next to this module."""
    return resources.files("hookbus.workers").joinpath(name).read_text("utf-8")


def job_id_for(event_id: str, hook_id: str) -> str:
    """The RQ job id of ``hook_id`` run on ``event_id``: the same on every redelivery.

    Hashed because RQ job ids allow only letters, digits, ``_`` and ``-`` while event and
    hook ids may hold anything.
    """
    digest = hashlib.blake2b(f"{event_id}\x00{hook_id}".encode(), digest_size=16).hexdigest()
    return f"hb-{digest}"


def batch_job_id_for(first_event_id: str, hook_id: str) -> str:
    """The RQ job id of a batch of ``hook_id`` starting with ``first_event_id``."""
    digest = hashlib.blake2b(
        f"{first_event_id}\x00{hook_id}\x00batch".encode(), digest_size=16
    ).hexdigest()
    return f"hbb-{digest}"


def fans_out(hook: Any, spec: KindSpec | None) -> bool:
    """Whether ``hook`` runs as an RQ job for a published event of kind ``spec``.

    A hook declared ``blocking = true`` runs only in the chain; one declared ``false`` always
    fans out; one that says nothing follows its kind's default.
    """
    blocking = getattr(hook, "blocking", None)
    if blocking is None:
        return not (spec.blocking if spec is not None else False)
    return not blocking


def job_timeout_s(hook: Any) -> int:
    """RQ's job timeout for a hook (whole seconds, as RQ requires)."""
    timeout = getattr(hook, "timeout_s", None) or defaults.DEFAULT_HOOK_TIMEOUT_S
    return max(1, math.ceil(timeout)) + JOB_TIMEOUT_GRACE_S


def rq_retry(hook: Any) -> Any:
    """RQ's ``Retry`` for a hook's ``retries`` (count, intervals_s), or None for no retry."""
    from rq import Retry

    spec = getattr(hook, "retries", None)
    count = retry_count(hook)
    if count <= 0:
        return None
    intervals = [int(i) for i in (getattr(spec, "intervals_s", None) or [])]
    return Retry(max=count, interval=intervals or 0)


def retry_count(hook: Any) -> int:
    """How many retries a hook declared (0 when none)."""
    spec = getattr(hook, "retries", None)
    return int(getattr(spec, "count", 0) or 0) if spec is not None else 0


def _batch_spec(hook: Any) -> tuple[int, int] | None:
    batch = getattr(hook, "batch", None)
    if batch is None:
        return None
    return max(1, int(batch.max_events)), max(0, int(batch.max_wait_ms))


@dataclass
class DispatcherStats:
    """Counters since start (for heartbeats, logs and tests)."""

    events: int = 0
    jobs: int = 0
    buffered: int = 0
    batches: int = 0
    skipped_duplicates: int = 0
    reclaimed: int = 0
    dead: int = 0


@dataclass
class _Plan:
    entry_ids: list[bytes] = field(default_factory=list)
    #: jobs of each event id (events with no unbatched job are absent)
    jobs: dict[str, list[EnqueueData]] = field(default_factory=dict)
    #: batch-list appends of each entry id: (hook id, item)
    pushes: dict[bytes, list[tuple[str, bytes]]] = field(default_factory=dict)
    dead: list[tuple[bytes, str, bytes]] = field(default_factory=list)


class Dispatcher:
    """One fan-out dispatcher: a consumer of the ``fanout`` group.

    ``bus`` is the client of the bus Redis (event log, batch buffers, dead letters); ``rq``
    the client of RQ's Redis (the same server unless ``rq.redis_url`` is set). Use
    :meth:`step` to process what is there (tests) and :meth:`run` to loop until stopped.
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
    ) -> None:
        from rq import Queue

        self.settings = settings
        self.registry = registry
        self.bus = bus
        self.rq = rq
        self.keys = Keys.for_namespace(settings.namespace)
        self.consumer = consumer or f"{socket.gethostname()}-{os.getpid()}-{os.urandom(3).hex()}"
        self.read_count = read_count
        self.claim_min_idle_ms = claim_min_idle_ms
        self.reclaim_interval_ms = reclaim_interval_ms
        self.queue: Queue = Queue(self.keys.rq_queue, connection=rq, serializer=MsgpackSerializer)
        self.catalogue: Catalogue = settings.catalogue()
        self.stats = DispatcherStats()
        self._last_reclaim_ms = 0
        # last known descriptor of every batching hook this dispatcher buffered for, so a
        # hook removed by a reload still has its buffer flushed (and dead-lettered by RQ)
        self._batch_hooks: dict[str, Any] = {}
        #: called after each handled read with (entries, milliseconds spent), for heartbeats
        self.on_handled: Callable[[int, float], None] | None = None
        self._ack_script = bus.register_script(_script_source("fanout_ack.lua"))
        self._trim_script = bus.register_script(_script_source("fanout_trim.lua"))
        self._item_encoder = msgspec.msgpack.Encoder()
        self._item_decoder = msgspec.msgpack.Decoder(tuple[str, int, bytes])

    # --- setup ---------------------------------------------------------------------

    def ensure_group(self) -> None:
        """Create the ``fanout`` group (from the start of the log) unless it exists."""
        try:
            self.bus.xgroup_create(self.keys.events, FANOUT_GROUP, id="0", mkstream=True)
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
        return handled

    def run(self, stop: threading.Event) -> None:
        """Loop until ``stop`` is set; Redis outages are logged and retried with backoff."""
        self.ensure_group()
        backoff_s = 0.05
        while not stop.is_set():
            try:
                self.step(self._block_ms())
                backoff_s = 0.05
            except _REDIS_ERRORS as exc:
                log.warning(
                    "fan-out dispatcher: Redis error, retrying in %.2fs: %s", backoff_s, exc
                )
                stop.wait(backoff_s)
                backoff_s = min(backoff_s * 2, 2.0)
                with contextlib.suppress(*_REDIS_ERRORS):
                    self.ensure_group()
            except Exception:
                # a bug or a poisonous event: the entries stay pending, are reclaimed after
                # claim_min_idle_ms and dead-lettered after max_deliveries; keep serving
                log.exception("fan-out dispatcher: step failed, retrying in %.2fs", backoff_s)
                stop.wait(backoff_s)
                backoff_s = min(backoff_s * 2, 2.0)

    def _block_ms(self) -> int:
        """Block no longer than the shortest batch wait, so batches flush on time."""
        waits = [spec[1] for spec in map(_batch_spec, self._batch_hooks.values()) if spec]
        if not waits:
            return DEFAULT_BLOCK_MS
        return max(1, min(DEFAULT_BLOCK_MS, *waits))

    def _read(self, block_ms: int | None) -> list[tuple[bytes, dict[bytes, bytes]]]:
        reply = self.bus.xreadgroup(
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
            reply = self.bus.xautoclaim(
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
                log.info("fan-out: reclaimed %d pending entries", len(entries))
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
        plan = _Plan()
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
                event = decode(data, Event)
            except WireError as exc:
                plan.dead.append((entry_id, str(exc), data))
                continue
            try:
                hooks = self.registry.matching(event)
            except HookBusError as exc:
                plan.dead.append((entry_id, f"matching hooks failed: {exc}", data))
                continue
            spec = self.catalogue.get(event.kind)
            self._plan_event(plan, entry_id, event, data, [h for h in hooks if fans_out(h, spec)])
        jobs = self.enqueue(plan)
        if plan.dead:
            with self.bus.pipeline(transaction=False) as pipe:
                for entry_id, reason, data in plan.dead:
                    pipe.xadd(
                        self.keys.dead_letters,
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

    def _plan_event(
        self, plan: _Plan, entry_id: bytes, event: Event, data: bytes, hooks: Sequence[Any]
    ) -> None:
        from rq import Queue

        for hook in hooks:
            if _batch_spec(hook) is not None:
                self._batch_hooks[hook.id] = hook
                item = self._item_encoder.encode((event.id, now_ms(), data))
                plan.pushes.setdefault(entry_id, []).append((hook.id, item))
                continue
            plan.jobs.setdefault(event.id, []).append(
                Queue.prepare_data(
                    HOOK_JOB_FUNC,
                    args=(hook.id, data),
                    job_id=job_id_for(event.id, hook.id),
                    timeout=job_timeout_s(hook),
                    result_ttl=self.settings.rq.result_ttl_s,
                    retry=rq_retry(hook),
                    description=f"{hook.id} on {event.kind} {event.id}",
                    meta={
                        "hook": hook.id,
                        "event": event.id,
                        "kind": event.kind,
                        "session": event.session_id,
                        "entry": entry_id.decode(),
                        "retries": retry_count(hook),
                    },
                )
            )

    def _ack(self, plan: _Plan) -> None:
        """Run the script that acknowledges ``plan``'s entries and appends their batching
        hooks' events (only for entries this dispatcher still owned): one round trip."""
        batch_keys: dict[str, int] = {}
        args: list[Any] = [FANOUT_GROUP, len(plan.entry_ids)]
        for entry_id in plan.entry_ids:
            pushes = plan.pushes.get(entry_id, ())
            args += [entry_id, len(pushes)]
            for hook_id, item in pushes:
                index = batch_keys.setdefault(self.keys.batch(hook_id), len(batch_keys) + 2)
                args += [index, item]
        self._ack_script(keys=[self.keys.events, *batch_keys], args=args)

    def enqueue(self, plan: _Plan) -> int:
        """Enqueue the jobs of ``plan`` with one dispatch marker per event, in one MULTI/EXEC
        on the RQ Redis; returns how many jobs were enqueued.

        The markers are WATCHed and read first: jobs of an event whose marker exists (another
        dispatcher reclaimed and enqueued it meanwhile) are dropped, and a marker written
        between the read and the EXEC aborts the EXEC, which is then tried again.
        """
        from redis.exceptions import WatchError

        for _ in range(ENQUEUE_ATTEMPTS):
            if not plan.jobs:
                return 0
            markers = {eid: keymod.dispatched(self.keys.ns, eid) for eid in plan.jobs}
            with self.rq.pipeline() as pipe:
                try:
                    pipe.watch(*markers.values())  # type: ignore[no-untyped-call]
                    found = pipe.mget(list(markers.values()))
                    for event_id, value in zip(list(markers), found, strict=True):
                        if value is not None:
                            self.stats.skipped_duplicates += len(plan.jobs.pop(event_id))
                            log.info(
                                "fan-out: jobs of event %s were enqueued by an earlier delivery",
                                event_id,
                            )
                    if not plan.jobs:
                        return 0
                    every = [job for jobs in plan.jobs.values() for job in jobs]
                    pipe.multi()
                    self.queue.enqueue_many(every, pipeline=pipe)
                    for event_id in plan.jobs:
                        pipe.set(markers[event_id], 1, ex=DISPATCH_MARKER_TTL_S)
                    pipe.execute()
                    return len(every)
                except WatchError:
                    log.info("fan-out: another dispatcher enqueued some of these events; again")
        raise RedisCommandError(
            f"fan-out: could not enqueue {len(plan.jobs)} events in {ENQUEUE_ATTEMPTS} tries "
            "(other dispatchers kept writing their markers); they stay pending and are retried"
        )

    def _delivered_too_often(
        self, entries: Sequence[tuple[bytes, dict[bytes, bytes]]]
    ) -> set[bytes]:
        limit = self.settings.workers.max_deliveries
        if limit <= 0 or not entries:
            return set()
        ids = [eid for eid, _ in entries]
        pending = self.bus.xpending_range(
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

    # --- batching ------------------------------------------------------------------

    def _batching_hooks(self) -> dict[str, Any]:
        current = {h.id: h for h in self.registry.hooks() if _batch_spec(h) is not None}
        for hook_id, hook in current.items():
            self._batch_hooks[hook_id] = hook
        return dict(self._batch_hooks)

    def flush_batches(self, *, force: bool = False) -> int:
        """Enqueue one job per due batch; a batch is due when it holds ``max_events`` events
        or its oldest event has waited ``max_wait_ms``. Returns how many jobs were made."""
        hooks = self._batching_hooks()
        if not hooks:
            return 0
        ids = list(hooks)
        with self.bus.pipeline(transaction=False) as pipe:
            for hook_id in ids:
                pipe.llen(self.keys.batch(hook_id))
                pipe.lindex(self.keys.batch(hook_id), 0)
            replies = pipe.execute()
        made = 0
        now = now_ms()
        for index, hook_id in enumerate(ids):
            length, head = replies[2 * index], replies[2 * index + 1]
            spec = _batch_spec(hooks[hook_id])
            if not length or head is None or spec is None:
                if not length and hook_id not in self._current_ids():
                    self._batch_hooks.pop(hook_id, None)
                continue
            max_events, max_wait_ms = spec
            item = self._decode_item(hook_id, head)
            if item is None:
                continue
            pushed_ms = item[1]
            if force or length >= max_events or now - pushed_ms >= max_wait_ms:
                made += self._flush_hook(hooks[hook_id], max_events, max_wait_ms, force=force)
        return made

    def _decode_item(self, hook_id: str, raw: bytes) -> tuple[str, int, bytes] | None:
        """A buffered item, or None after moving an undecodable one to the dead letters
        (a buffer written by an incompatible version must not stall every flush)."""
        try:
            item: tuple[str, int, bytes] = self._item_decoder.decode(raw)
        except msgspec.DecodeError as exc:
            key = self.keys.batch(hook_id)
            with self.bus.pipeline(transaction=False) as pipe:
                pipe.lrem(key, 1, raw)  # type: ignore[arg-type]
                pipe.xadd(
                    self.keys.dead_letters,
                    {
                        b"stream": key,
                        b"group": FANOUT_GROUP,
                        b"reason": f"undecodable batch item: {exc}",
                        b"worker": self.consumer,
                        b"item": raw,
                    },
                    maxlen=self.settings.streams.events_maxlen,
                    approximate=True,
                )
                pipe.execute()
            self.stats.dead += 1
            log.warning("fan-out: undecodable item in the buffer of %s dead-lettered", hook_id)
            return None
        return item

    def _current_ids(self) -> set[str]:
        return {h.id for h in self.registry.hooks()}

    def _flush_hook(self, hook: Any, max_events: int, max_wait_ms: int, *, force: bool) -> int:
        key = self.keys.batch(hook.id)
        lock = self.bus.lock(keymod.batch_lock(self.keys.ns, hook.id), timeout=BATCH_LOCK_MS / 1000)
        if not lock.acquire(blocking=False):
            return 0
        made = 0
        try:
            for _ in range(MAX_FLUSHES_PER_STEP):
                raw: list[bytes] = self.bus.lrange(key, 0, max_events - 1)  # type: ignore[assignment]
                if not raw:
                    break
                decoded = [self._decode_item(hook.id, r) for r in raw]
                items = [item for item in decoded if item is not None]
                if len(items) != len(raw):
                    continue  # the undecodable ones were removed: read the head again
                due = force or len(items) >= max_events or now_ms() - items[0][1] >= max_wait_ms
                if not due:
                    break
                taken, enqueued = self._enqueue_batch(hook, items)
                made += enqueued
                self._trim_script(keys=[key], args=[raw[0], taken])
        finally:
            with contextlib.suppress(*_REDIS_ERRORS, redis.exceptions.LockError):
                lock.release()
        return made

    def _enqueue_batch(self, hook: Any, items: list[tuple[str, int, bytes]]) -> tuple[int, int]:
        """Enqueue one batch job for ``items`` unless its marker says an earlier flush did.

        Returns (how many items the batch took, jobs enqueued: 0 or 1). The marker holds the
        batch size, is WATCHed and written in the enqueue transaction.
        """
        from redis.exceptions import WatchError
        from rq import Queue

        first_event_id = items[0][0]
        job_id = batch_job_id_for(first_event_id, hook.id)
        marker = keymod.dispatched(self.keys.ns, job_id)
        for _ in range(ENQUEUE_ATTEMPTS):
            with self.rq.pipeline() as pipe:
                try:
                    pipe.watch(marker)  # type: ignore[no-untyped-call]
                    previous = pipe.get(marker)
                    if previous is not None:
                        # an earlier flush enqueued this batch and did not trim it
                        self.stats.skipped_duplicates += 1
                        return int(previous), 0
                    taken = len(items)
                    data = Queue.prepare_data(
                        BATCH_JOB_FUNC,
                        args=(hook.id, [item[2] for item in items]),
                        job_id=job_id,
                        timeout=job_timeout_s(hook),
                        result_ttl=self.settings.rq.result_ttl_s,
                        retry=rq_retry(hook),
                        description=f"{hook.id} on a batch of {taken} events from {first_event_id}",
                        meta={
                            "hook": hook.id,
                            "event": first_event_id,
                            "events": [item[0] for item in items],
                            "batch_size": taken,
                            "retries": retry_count(hook),
                        },
                    )
                    pipe.multi()
                    self.queue.enqueue_many([data], pipeline=pipe)
                    pipe.set(marker, taken, ex=DISPATCH_MARKER_TTL_S)
                    pipe.execute()
                except WatchError:
                    continue
            self.stats.batches += 1
            self.stats.jobs += 1
            return taken, 1
        raise RedisCommandError(
            f"fan-out: could not enqueue a batch of {hook.id} in {ENQUEUE_ATTEMPTS} tries; "
            "it stays buffered and is retried"
        )


# --- the entry point ------------------------------------------------------------------


def _stats(dispatcher: Dispatcher) -> dict[str, Any]:
    """Dispatcher counters for its heartbeat (``hookbus status`` shows them)."""
    s = dispatcher.stats
    return {
        "jobs": s.jobs,
        "batches": s.batches,
        "buffered": s.buffered,
        "reclaimed": s.reclaimed,
        "duplicates_skipped": s.skipped_duplicates,
        "dead_lettered": s.dead,
    }


def run_dispatcher(
    settings: Settings,
    *,
    hooks_dir: Path | None = None,
    registry: Any = None,
    stop_event: threading.Event | None = None,
    claim_min_idle_ms: int = DEFAULT_CLAIM_MIN_IDLE_MS,
) -> None:
    """Run one fan-out dispatcher until ``stop_event`` is set (or SIGTERM/SIGINT when no
    stop event is given): follows hook reloads through a HookHost and heartbeats with role
    ``fanout``."""
    from hookbus.hooks.registry import HookRegistry
    from hookbus.workers.heartbeat import Heartbeat
    from hookbus.workers.hookset import HookHost

    bus = connect(settings.effective_redis_url)
    rq_client = connect(settings.effective_rq_redis_url)
    reg = registry if registry is not None else HookRegistry.from_settings(settings)
    host = HookHost(reg, settings, hooks_dir=hooks_dir)
    host.start(bus)
    stop = stop_event if stop_event is not None else threading.Event()
    dispatcher = Dispatcher(
        settings, host.registry, bus=bus, rq=rq_client, claim_min_idle_ms=claim_min_idle_ms
    )
    heartbeat = Heartbeat(
        bus,
        Keys.for_namespace(settings.namespace),
        role="fanout",
        interval_ms=settings.workers.heartbeat_interval_ms,
        info=lambda: {**host.info(), **_stats(dispatcher)},
    )
    host.add_listener(heartbeat.beat_now)  # ack a reload at once, not at the next beat
    heartbeat.start()
    log.info(
        "fan-out dispatcher %s on %s (RQ queue %s)",
        dispatcher.consumer,
        dispatcher.keys.events,
        dispatcher.queue.name,
    )

    def _record(handled: int, duration_ms: float) -> None:
        # one heartbeat sample per event, each the read's dispatch time shared out
        per_event_ms = duration_ms / handled
        for _ in range(handled):
            heartbeat.record(per_event_ms, False)

    dispatcher.on_handled = _record

    try:
        with graceful_signals(stop) if stop_event is None else contextlib.nullcontext():
            dispatcher.run(stop)
    finally:
        heartbeat.stop()
        host.stop()
