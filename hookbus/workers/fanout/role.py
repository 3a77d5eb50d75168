"""The fan-out role: one dispatcher process from the event log to RQ, following reloads.

The parts, each in its module: :mod:`~hookbus.workers.fanout.dispatcher` (reading the ``fanout``
group, reclaim, acknowledging), :mod:`~hookbus.workers.fanout.enqueue` (the jobs of a read, at
most once per event), :mod:`~hookbus.workers.fanout.batching` (batching hooks' buffers) and
:mod:`~hookbus.workers.fanout.job_specs` (job ids, timeouts, retries). This module wires them to a
:class:`~hookbus.workers.reload.hookset.HookHost` and a heartbeat: what ``hookbus worker --role
fanout`` runs.

Crash safety in short: a job's id is derived from the event and the hook, and the
transaction that enqueues an event's jobs also sets its dispatch marker, so an entry
reclaimed from a dead (or only slow) dispatcher never gets a second job; batching hooks'
events are appended to their buffer by the script that acknowledges the entry, so an event
is either pending or buffered once.

Partitions (``HOOKBUS_PARTITIONS`` > 1): a process serves every partition's event stream,
one :class:`~hookbus.workers.fanout.dispatcher.Dispatcher` per partition on a thread of its own,
each a consumer of that stream's own group ``fanout`` (on a Redis Cluster talking to the
master of the partition's slot). Consumer groups split each partition's entries between
the processes, so an entry is handled once whichever process reads it; one session's
events are in one partition, read in order. One heartbeat covers the process.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hookbus.bus.connection import (
    bus_client,
    check_rq_url,
    connect,
    is_cluster_url,
    partition_client,
)
from hookbus.bus.keys import Keys
from hookbus.workers.fanout.dispatcher import DEFAULT_CLAIM_MIN_IDLE_MS, Dispatcher
from hookbus.workers.fanout.gate import HookSetGate
from hookbus.workers.fanout.observer import RequestObserver
from hookbus.workers.fleet.announce import announce_start
from hookbus.workers.fleet.signals import StopEvent, graceful_signals
from hookbus.workers.fleet.trimmer import StreamTrimmer, TrimmedStream

if TYPE_CHECKING:
    import redis

    from hookbus.bus.settings.loader import Settings
    from hookbus.hooks.registry import HookRegistry

log = logging.getLogger(__name__)


#: Heartbeat field of each dispatcher counter (``hookbus status`` shows them).
_STAT_FIELDS = {
    "jobs": "jobs",
    "batches": "batches",
    "buffered": "buffered",
    "reclaimed": "reclaimed",
    "duplicates_skipped": "skipped_duplicates",
    "dead_lettered": "dead",
}


def _stats(*dispatchers: Dispatcher) -> dict[str, Any]:
    """The counters of a process's dispatchers (one per partition), summed, for its
    heartbeat (``hookbus status`` shows them)."""
    return {
        name: sum(getattr(d.stats, attribute) for d in dispatchers)
        for name, attribute in _STAT_FIELDS.items()
    }


def partition_dispatchers(
    settings: Settings,
    registry: HookRegistry,
    *,
    bus: redis.Redis,
    rq: redis.Redis,
    claim_min_idle_ms: int = DEFAULT_CLAIM_MIN_IDLE_MS,
) -> list[Dispatcher]:
    """One dispatcher per partition of the namespace's event stream (one with the default
    ``partitions = 1``), sharing one consumer name; on a cluster each on the client of its
    partition's master."""
    on_cluster = is_cluster_url(settings.effective_redis_url)
    first = Dispatcher(settings, registry, bus=bus, rq=rq, claim_min_idle_ms=claim_min_idle_ms)
    others = [
        Dispatcher(
            settings,
            registry,
            bus=bus,
            rq=rq,
            consumer=first.consumer,
            claim_min_idle_ms=claim_min_idle_ms,
            partition=partition,
            stream=partition_client(settings, partition) if on_cluster else bus,
        )
        for partition in range(1, settings.partitions)
    ]
    return [first, *others]


def run_dispatcher(
    settings: Settings,
    *,
    hooks_dir: Path | None = None,
    registry: HookRegistry | None = None,
    stop_event: threading.Event | None = None,
    claim_min_idle_ms: int = DEFAULT_CLAIM_MIN_IDLE_MS,
    metrics_port: int | None = None,
) -> None:
    """Run one fan-out dispatcher until ``stop_event`` is set (or SIGTERM/SIGINT when no
    stop event is given): follows hook reloads through a HookHost and heartbeats with role
    ``fanout``; serves Prometheus metrics on ``metrics_port`` when given."""
    from hookbus.hooks.registry import HookRegistry
    from hookbus.workers.fleet.heartbeat import Heartbeat
    from hookbus.workers.fleet.metrics import start_worker_metrics
    from hookbus.workers.reload.hookset import HookHost

    check_rq_url(settings)  # RQ does not support Redis Cluster: say so before starting
    bus = bus_client(settings)
    rq_client = connect(settings.effective_rq_redis_url)
    reg = registry if registry is not None else HookRegistry.from_settings(settings)
    host = HookHost(reg, settings, hooks_dir=hooks_dir)
    host.start(bus)
    announce_start("fanout", settings, host.info())
    stop = stop_event if stop_event is not None else StopEvent()
    dispatchers = partition_dispatchers(
        settings, host.registry, bus=bus, rq=rq_client, claim_min_idle_ms=claim_min_idle_ms
    )
    dispatcher = dispatchers[0]
    # each partition's answered requests, from its decision log to its observers
    observers = [
        RequestObserver(
            settings,
            host.registry,
            stream=d.stream,
            partition=d.partition,
            consumer=d.consumer,
            claim_min_idle_ms=claim_min_idle_ms,
        )
        for d in dispatchers
    ]
    heartbeat = Heartbeat(
        bus,
        Keys.for_namespace(settings.namespace),
        role="fanout",
        interval_ms=settings.workers.heartbeat_interval_ms,
        info=lambda: {
            **host.info(),
            **_stats(*dispatchers),
            "observed": sum(o.forwarded for o in observers),
        },
    )
    host.add_listener(heartbeat.beat_now)  # ack a reload at once, not at the next beat
    heartbeat.start()
    log.info(
        "fan-out dispatcher %s on %s (RQ queue %s)",
        dispatcher.consumer,
        ", ".join(d.keys.events for d in dispatchers),
        dispatcher.queue.name,
    )

    metrics, metrics_server = start_worker_metrics("fanout", metrics_port, settings, bus)
    metrics.bundle_loaded(host.registry.version)
    host.add_listener(lambda: metrics.bundle_loaded(host.registry.version))
    counted = {"jobs": 0, "reclaimed": 0}
    counting = threading.Lock()  # the partitions' threads report here

    def _record(handled: int, duration_ms: float) -> None:
        # one heartbeat sample per event, each the read's dispatch time shared out
        per_event_ms = duration_ms / handled
        for _ in range(handled):
            heartbeat.record(per_event_ms, False)
        with counting:
            stats = _stats(*dispatchers)
            metrics.events_dispatched(handled)
            metrics.jobs_enqueued(stats["jobs"] - counted["jobs"])
            metrics.entries_reclaimed(stats["reclaimed"] - counted["reclaimed"])
            counted.update(jobs=stats["jobs"], reclaimed=stats["reclaimed"])

    def loaded() -> bool:  # a bundle or folder, or hooks registered in code
        return host.version is not None or bool(host.registry.hooks())

    for each in dispatchers:
        each.on_handled = _record
        each.gate = HookSetGate(loaded, f"fan-out dispatcher (partition {each.partition})")
    for observer in observers:
        observer.gate = HookSetGate(loaded, f"request observer (partition {observer.partition})")
    # partitions 1.. on threads of their own, sharing the hooks, the RQ queue and the stop
    threads = [
        threading.Thread(target=d.run, args=(stop,), name=f"fanout-p{d.partition}", daemon=True)
        for d in dispatchers[1:]
    ] + [
        threading.Thread(target=o.run, args=(stop,), name=f"observe-p{o.partition}", daemon=True)
        for o in observers
    ]
    for thread in threads:
        thread.start()
    trimmer = StreamTrimmer(
        [
            TrimmedStream(
                d.stream, d.keys.events, "streams.events_maxlen", settings.streams.events_maxlen
            )
            for d in dispatchers
        ],
        stop,
    ).start()
    try:
        with graceful_signals(stop) if stop_event is None else contextlib.nullcontext():
            dispatcher.run(stop)
    finally:
        stop.set()
        trimmer.join(timeout=2)
        for thread in threads:
            thread.join(timeout=10)
        if metrics_server is not None:
            metrics_server.shutdown()
        heartbeat.stop()
        host.stop()
