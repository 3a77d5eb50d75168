"""Planning and enqueueing the RQ jobs of a read of the event log, at most once per event.

The jobs of every event of a read go to RQ in one MULTI/EXEC (``Queue.enqueue_many`` in a
pipeline) together with one dispatch marker per event (``hookbus:{ns}:dispatched:<event
id>``). The markers are WATCHed and read first, so an event whose jobs an earlier delivery
already enqueued (a dispatcher died between enqueue and XACK, or was only slow and had its
entries reclaimed) gets no second job.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import msgspec
import redis

from hookbus.bus.keys import Keys, dispatched
from hookbus.bus.wire import Event, now_ms
from hookbus.errors import RedisCommandError
from hookbus.workers.fanout.job_specs import (
    DISPATCH_MARKER_TTL_S,
    ENQUEUE_ATTEMPTS,
    HOOK_JOB_FUNC,
    batch_spec,
    job_id_for,
    job_timeout_s,
    retry_count,
    retry_intervals,
    rq_retry,
)

if TYPE_CHECKING:
    from rq import Queue
    from rq.queue import EnqueueData

log = logging.getLogger(__name__)

_item_encoder = msgspec.msgpack.Encoder()


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
class Plan:
    """What one read of the event log turns into: jobs, batch-buffer appends, dead letters."""

    entry_ids: list[bytes] = field(default_factory=list)
    #: unbatched runs of each event id: (hook, event, event bytes, entry id)
    runs: dict[str, list[tuple[Any, Event, bytes, bytes]]] = field(default_factory=dict)
    #: batch-list appends of each entry id: (hook id, item)
    pushes: dict[bytes, list[tuple[str, bytes]]] = field(default_factory=dict)
    dead: list[tuple[bytes, str, bytes]] = field(default_factory=list)
    result_ttl_s: int = 0
    #: most events of one hook in one job (``rq.pack_max_events``)
    pack_max_events: int = 1

    def add_event(self, entry_id: bytes, event: Event, data: bytes, hooks: list[Any]) -> list[Any]:
        """Plan ``event``'s runs for ``hooks``; returns the batching hooks among them (their
        events go to the hook's buffer, appended when the entry is acknowledged)."""
        batching: list[Any] = []
        for hook in hooks:
            if batch_spec(hook) is not None:
                batching.append(hook)
                item = _item_encoder.encode((event.id, now_ms(), data))
                self.pushes.setdefault(entry_id, []).append((hook.id, item))
                continue
            self.runs.setdefault(event.id, []).append((hook, event, data, entry_id))
        return batching

    def jobs(self) -> list[EnqueueData]:
        """The RQ jobs of the planned runs: per hook, packs of up to ``pack_max_events``
        events in read order; a pack of one is a single event's job."""
        by_hook: dict[str, list[tuple[Any, Event, bytes, bytes]]] = {}
        for runs in self.runs.values():
            for run in runs:
                by_hook.setdefault(run[0].id, []).append(run)
        out: list[EnqueueData] = []
        size = max(1, self.pack_max_events)
        for runs in by_hook.values():
            for at in range(0, len(runs), size):
                chunk = runs[at : at + size]
                out.append(self._single(*chunk[0]) if len(chunk) == 1 else self._pack(chunk))
        return out

    def _single(self, hook: Any, event: Event, data: bytes, entry_id: bytes) -> EnqueueData:
        from rq import Queue

        return Queue.prepare_data(
            HOOK_JOB_FUNC,
            args=(hook.id, data),
            job_id=job_id_for(event.id, hook.id),
            timeout=job_timeout_s(hook),
            result_ttl=self.result_ttl_s,
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

    def _pack(self, runs: list[tuple[Any, Event, bytes, bytes]]) -> EnqueueData:
        from rq import Queue

        from hookbus.workers.fanout.packs import HOOK_PACK_FUNC, pack_job_id_for, pack_timeout_s

        hook = runs[0][0]
        events = [run[1] for run in runs]
        return Queue.prepare_data(
            HOOK_PACK_FUNC,
            args=(hook.id, [run[2] for run in runs]),
            job_id=pack_job_id_for([e.id for e in events], hook.id),
            timeout=pack_timeout_s(hook, len(runs)),
            result_ttl=self.result_ttl_s,
            description=f"{hook.id} on {len(runs)} events from {events[0].id}",
            meta={
                "hook": hook.id,
                "event": events[0].id,
                "events": [e.id for e in events],
                "kind": events[0].kind,
                "batch_size": len(runs),
                "pack": True,
                "retries": retry_count(hook),
                "intervals": retry_intervals(hook),
                "timeout": job_timeout_s(hook),
            },
        )


def enqueue(rq: redis.Redis, queue: Queue, keys: Keys, plan: Plan, stats: DispatcherStats) -> int:
    """Enqueue the jobs of ``plan`` with one dispatch marker per event, in one MULTI/EXEC
    on the RQ Redis; returns how many hook runs they carry (a pack carries several).

    The markers are WATCHed and read first: jobs of an event whose marker exists (another
    dispatcher reclaimed and enqueued it meanwhile) are dropped, and a marker written
    between the read and the EXEC aborts the EXEC, which is then tried again.
    """
    from redis.exceptions import WatchError

    for _ in range(ENQUEUE_ATTEMPTS):
        if not plan.runs:
            return 0
        markers = {eid: dispatched(keys.ns, eid) for eid in plan.runs}
        with rq.pipeline() as pipe:
            try:
                pipe.watch(*markers.values())  # type: ignore[no-untyped-call]
                found = pipe.mget(list(markers.values()))
                for event_id, value in zip(list(markers), found, strict=True):
                    if value is not None:
                        stats.skipped_duplicates += len(plan.runs.pop(event_id))
                        log.info(
                            "fan-out: jobs of event %s were enqueued by an earlier delivery",
                            event_id,
                        )
                if not plan.runs:
                    return 0
                every = plan.jobs()
                pipe.multi()
                queue.enqueue_many(every, pipeline=pipe)
                for event_id in plan.runs:
                    pipe.set(markers[event_id], 1, ex=DISPATCH_MARKER_TTL_S)
                pipe.execute()
                return sum(len(runs) for runs in plan.runs.values())
            except WatchError:
                log.info("fan-out: another dispatcher enqueued some of these events; again")
    raise RedisCommandError(
        f"fan-out: could not enqueue {len(plan.runs)} events in {ENQUEUE_ATTEMPTS} tries "
        "(other dispatchers kept writing their markers); they stay pending and are retried"
    )
