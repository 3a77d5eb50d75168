"""The fan-out role: one dispatcher process from the event log to RQ, following reloads.

The parts, each in its module: :mod:`~hookbus.workers.dispatcher` (reading the ``fanout``
group, reclaim, acknowledging), :mod:`~hookbus.workers.enqueue` (the jobs of a read, at
most once per event), :mod:`~hookbus.workers.batching` (batching hooks' buffers) and
:mod:`~hookbus.workers.job_specs` (job ids, timeouts, retries). This module wires them to a
:class:`~hookbus.workers.hookset.HookHost` and a heartbeat: what ``hookbus worker --role
fanout`` runs.

Crash safety in short: a job's id is derived from the event and the hook, and the
transaction that enqueues an event's jobs also sets its dispatch marker, so an entry
reclaimed from a dead (or only slow) dispatcher never gets a second job; batching hooks'
events are appended to their buffer by the script that acknowledges the entry, so an event
is either pending or buffered once.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hookbus.bus.connection import bus_client, check_rq_url, connect
from hookbus.bus.keys import Keys
from hookbus.workers.dispatcher import DEFAULT_CLAIM_MIN_IDLE_MS, Dispatcher
from hookbus.workers.signals import graceful_signals

if TYPE_CHECKING:
    from hookbus.bus.settings import Settings

log = logging.getLogger(__name__)


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
    metrics_port: int | None = None,
) -> None:
    """Run one fan-out dispatcher until ``stop_event`` is set (or SIGTERM/SIGINT when no
    stop event is given): follows hook reloads through a HookHost and heartbeats with role
    ``fanout``; serves Prometheus metrics on ``metrics_port`` when given."""
    from hookbus.hooks.registry import HookRegistry
    from hookbus.workers.heartbeat import Heartbeat
    from hookbus.workers.hookset import HookHost
    from hookbus.workers.metrics import start_worker_metrics

    check_rq_url(settings)  # RQ does not support Redis Cluster: say so before starting
    bus = bus_client(settings)
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

    metrics, metrics_server = start_worker_metrics("fanout", metrics_port, settings, bus)
    metrics.bundle_loaded(host.registry.version)
    host.add_listener(lambda: metrics.bundle_loaded(host.registry.version))
    counted = {"jobs": 0, "reclaimed": 0}

    def _record(handled: int, duration_ms: float) -> None:
        # one heartbeat sample per event, each the read's dispatch time shared out
        per_event_ms = duration_ms / handled
        for _ in range(handled):
            heartbeat.record(per_event_ms, False)
        stats = dispatcher.stats
        metrics.events_dispatched(handled)
        metrics.jobs_enqueued(stats.jobs - counted["jobs"])
        metrics.entries_reclaimed(stats.reclaimed - counted["reclaimed"])
        counted.update(jobs=stats.jobs, reclaimed=stats.reclaimed)

    dispatcher.on_handled = _record

    try:
        with graceful_signals(stop) if stop_event is None else contextlib.nullcontext():
            dispatcher.run(stop)
    finally:
        if metrics_server is not None:
            metrics_server.shutdown()
        heartbeat.stop()
        host.stop()
