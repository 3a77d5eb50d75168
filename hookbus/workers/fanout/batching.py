"""Batching hooks: their events wait in a Redis list until a batch is due, then one RQ job
takes the batch.

An event is appended to ``hookbus:{ns}:batch:<hook>`` (with partitions: the buffer of its
partition, ``hookbus:{ns:p}:batch:<hook>``, in the slot of the partition's event stream; a
batch then holds events of one partition) by the same Lua call that
acknowledges its entry (``fanout_ack.lua``), and only when that XACK removed the entry from
the pending list: an event is either pending in the stream or buffered once. A flush takes
the head of the list, enqueues one job holding the list of events with a marker holding the
batch size (job id from the hook and the first event id), then trims the list only if it
still starts with that batch (``fanout_trim.lua``); a flush that died before trimming is
found by its marker.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import msgspec
import redis
import redis.exceptions

from hookbus.bus import keys
from hookbus.bus.keys import FANOUT_GROUP, Keys
from hookbus.bus.wire import now_ms
from hookbus.errors import RedisCommandError
from hookbus.workers.fanout.enqueue import DispatcherStats
from hookbus.workers.fanout.job_specs import (
    BATCH_JOB_FUNC,
    DISPATCH_MARKER_TTL_S,
    ENQUEUE_ATTEMPTS,
    batch_job_id_for,
    batch_spec,
    job_timeout_s,
    retry_count,
    rq_retry,
    script_source,
)

if TYPE_CHECKING:
    from rq import Queue

    from hookbus.bus.settings.loader import Settings
    from hookbus.hooks.compiled import HookDescriptor

log = logging.getLogger(__name__)

#: How long one dispatcher holds a batching hook's flush lock, in ms.
BATCH_LOCK_MS = 10_000
#: Bound on batches flushed for one hook per dispatcher step.
MAX_FLUSHES_PER_STEP = 50
#: Longest XREADGROUP BLOCK of a dispatcher, in ms (Redis rounds it up to 100 ms anyway).
DEFAULT_BLOCK_MS = 1_000

_REDIS_ERRORS = (redis.exceptions.RedisError, ConnectionError, OSError)


class BatchFlusher:
    """The batch buffers of one dispatcher: which hooks batch, when a batch is due, flushing.

    ``hooks`` returns the current hook set (it changes on reload); the last known descriptor
    of every batching hook is kept, so a hook removed by a reload still has its buffer
    flushed (and dead-lettered by RQ). The buffers are those of ``partition``, on
    ``stream`` (default ``bus``; on a cluster, the client of the partition's master).
    """

    def __init__(
        self,
        settings: Settings,
        hooks: Callable[[], Sequence[Any]],
        *,
        bus: redis.Redis,
        rq: redis.Redis,
        queue: Queue,
        consumer: str,
        stats: DispatcherStats,
        partition: int = 0,
        stream: redis.Redis | None = None,
    ) -> None:
        self.settings = settings
        self._hooks = hooks
        self.bus = bus
        self.stream = stream if stream is not None else bus
        self.partition = partition
        self.rq = rq
        self.queue = queue
        self.keys = Keys.for_namespace(settings.namespace)
        self.consumer = consumer
        self.stats = stats
        self.known: dict[str, Any] = {}
        self.trim_script = self.stream.register_script(script_source("fanout_trim.lua"))
        self.item_encoder = msgspec.msgpack.Encoder()
        self._item_decoder = msgspec.msgpack.Decoder(tuple[str, int, bytes])

    def buffer(self, hook_id: str) -> str:
        """The key of ``hook_id``'s buffer in this partition."""
        return keys.partition_batch(self.keys.ns, self.partition, hook_id)

    def note(self, hooks: Sequence[Any]) -> None:
        """Remember batching hooks that just got events, so their buffers get flushed."""
        for hook in hooks:
            self.known[hook.id] = hook

    def block_ms(self) -> int:
        """How long a read may block: no longer than the shortest batch wait."""
        waits = [spec[1] for spec in map(batch_spec, self.known.values()) if spec]
        if not waits:
            return DEFAULT_BLOCK_MS
        return max(1, min(DEFAULT_BLOCK_MS, *waits))

    def _batching_hooks(self) -> dict[str, Any]:
        current = {h.id: h for h in self._hooks() if batch_spec(h) is not None}
        self.known.update(current)
        return dict(self.known)

    def flush(self, *, force: bool = False) -> int:
        """Enqueue one job per due batch; a batch is due when it holds ``max_events`` events
        or its oldest event has waited ``max_wait_ms``. Returns how many jobs were made."""
        hooks = self._batching_hooks()
        if not hooks:
            return 0
        ids = list(hooks)
        with self.stream.pipeline(transaction=False) as pipe:
            for hook_id in ids:
                pipe.llen(self.buffer(hook_id))
                pipe.lindex(self.buffer(hook_id), 0)
            replies = pipe.execute()
        made = 0
        now = now_ms()
        for index, hook_id in enumerate(ids):
            length, head = replies[2 * index], replies[2 * index + 1]
            spec = batch_spec(hooks[hook_id])
            if not length or head is None or spec is None:
                if not length and hook_id not in {h.id for h in self._hooks()}:
                    self.known.pop(hook_id, None)
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
            key = self.buffer(hook_id)
            # the dead letter first: an item removed and then not recorded would be lost
            self.bus.xadd(
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
            self.stream.lrem(key, 1, raw)  # type: ignore[arg-type]
            self.stats.dead += 1
            log.warning("fan-out: undecodable item in the buffer of %s dead-lettered", hook_id)
            return None
        return item

    def _flush_hook(
        self, hook: HookDescriptor, max_events: int, max_wait_ms: int, *, force: bool
    ) -> int:
        key = self.buffer(hook.id)
        lock_key = keys.partition_batch_lock(self.keys.ns, self.partition, hook.id)
        lock = self.stream.lock(lock_key, timeout=BATCH_LOCK_MS / 1000)
        if not lock.acquire(blocking=False):
            return 0
        made = 0
        try:
            for _ in range(MAX_FLUSHES_PER_STEP):
                raw: list[bytes] = self.stream.lrange(key, 0, max_events - 1)  # type: ignore[assignment]
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
                self.trim_script(keys=[key], args=[raw[0], taken])
        finally:
            with contextlib.suppress(*_REDIS_ERRORS, redis.exceptions.LockError):
                lock.release()
        return made

    def _enqueue_batch(
        self, hook: HookDescriptor, items: list[tuple[str, int, bytes]]
    ) -> tuple[int, int]:
        """Enqueue one batch job for ``items`` unless its marker says an earlier flush did.

        Returns (how many items the batch took, jobs enqueued: 0 or 1). The marker holds the
        batch size, is WATCHed and written in the enqueue transaction.
        """
        from redis.exceptions import WatchError
        from rq import Queue

        first_event_id = items[0][0]
        job_id = batch_job_id_for(first_event_id, hook.id)
        marker = keys.dispatched(self.keys.ns, job_id)
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
