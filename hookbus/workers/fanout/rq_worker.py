"""The RQ role: ``hookbus worker --role rq``, one RQ worker on the namespace's queue.

:func:`run_rq_worker` loads the hook set through a HookHost that follows reloads,
heartbeats with role ``rq`` and runs an RQ worker of :mod:`~hookbus.workers.fanout.rq_classes`.
Under ``hookbus worker`` it serves from a supervised child restarted when a hook kills it
(:mod:`~hookbus.workers.fleet.respawn`).

Redis outages. RQ retries a lost connection only inside its dequeue; met anywhere else (a
job finishing, a heartbeat, maintenance) it ends ``work()``. :func:`run_rq_worker` then
waits (:class:`~hookbus.workers.fleet.backoff.RestartBackoff`: exponential, jittered,
capped, one log line per kind of failure), waits for Redis to answer PING and starts a
fresh RQ worker, so the role outlives any outage; only a stop request ends it. The wait
comes first because a Redis out of memory or out of disk answers PING and refuses every
write: without it the worker restarts as fast as it fails.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import redis

from hookbus.bus.connection import CONNECTION_ERRORS, bus_client, connect
from hookbus.bus.keys import Keys
from hookbus.workers.fanout import jobs
from hookbus.workers.fanout.rq_classes import children_die_with_worker, make_worker
from hookbus.workers.fleet.announce import announce_start
from hookbus.workers.fleet.backoff import RestartBackoff
from hookbus.workers.fleet.signals import StopEvent, graceful_signals, set_soon

if TYPE_CHECKING:
    from hookbus.bus.settings.loader import Settings
    from hookbus.hooks.registry import HookRegistry

log = logging.getLogger(__name__)

#: First and longest wait between reconnection attempts after Redis went away, in seconds.
RECONNECT_INITIAL_S = 0.1
RECONNECT_MAX_WAIT_S = 5.0

_REDIS_ERRORS: tuple[type[BaseException], ...] = (*CONNECTION_ERRORS, redis.exceptions.RedisError)


def run_rq_worker(
    settings: Settings,
    *,
    isolation: str | None = None,
    burst: bool = False,
    hooks_dir: Path | None = None,
    registry: HookRegistry | None = None,
    max_jobs: int | None = None,
    supervise: bool | None = None,
    metrics_port: int | None = None,
) -> None:
    """Run one RQ worker until SIGTERM/SIGINT (RQ's warm shutdown), or until the queue is
    empty with ``burst``. Loads the hook set through a HookHost that follows reloads, and
    heartbeats with role ``rq``.

    ``supervise``: serve from a forked child that is restarted when a hook kills it
    (:mod:`~hookbus.workers.fleet.respawn`). By default, whenever forking is safe here: in a
    process whose main thread is its only thread, as under ``hookbus worker``.

    ``metrics_port``: serve Prometheus metrics there, from the process that takes the jobs
    (the child when supervised); it counts every job it took, whatever isolation ran it.
    """
    from hookbus.bus.connection import check_rq_url
    from hookbus.workers.fleet.respawn import Respawner, can_supervise

    check_rq_url(settings)  # before any child: a cluster URL would fail every restart

    def serve(worker_id: str | None, extra: Callable[[], dict[str, Any]] | None) -> None:
        _serve(
            settings,
            isolation,
            burst,
            hooks_dir,
            registry,
            max_jobs,
            worker_id,
            extra,
            metrics_port,
        )

    if not (can_supervise() if supervise is None else supervise):
        serve(None, None)
        return
    stop = StopEvent()
    respawner = Respawner(settings, stop, role="rq")
    with graceful_signals(stop):  # the child handles its own (RQ's warm shutdown)
        respawner.run(lambda worker_id: serve(worker_id, respawner.info))


def _serve(
    settings: Settings,
    isolation: str | None,
    burst: bool,
    hooks_dir: Path | None,
    registry: HookRegistry | None,
    max_jobs: int | None,
    worker_id: str | None,
    extra_info: Callable[[], dict[str, Any]] | None,
    metrics_port: int | None = None,
) -> None:
    """One RQ worker in this process (see :func:`run_rq_worker`)."""
    from hookbus.hooks.registry import HookRegistry
    from hookbus.workers.fleet.heartbeat import Heartbeat, new_worker_id
    from hookbus.workers.fleet.metrics import start_worker_metrics
    from hookbus.workers.reload.hookset import HookHost

    supervised = extra_info is not None  # a child of run_rq_worker's supervisor
    stop = StopEvent()
    current: list[Any] = []  # the RQ worker now running, for a stop that comes as it starts
    if supervised:
        _catch_stop(stop, current)
    bus = bus_client(settings)
    keys = Keys.for_namespace(settings.namespace)
    reg = (
        registry if registry is not None else HookRegistry.for_worker(settings, bus, notices=False)
    )
    host = HookHost(reg, settings, hooks_dir=hooks_dir)
    host.start(bus)
    announce_start("rq", settings, host.info())
    worker_id = worker_id or new_worker_id("rq")
    chosen = str(isolation or settings.rq.isolation)

    def _info() -> dict[str, Any]:
        data = {**host.info(), "isolation": chosen, "queue": keys.rq_queue}
        if extra_info is not None:
            data.update(extra_info())
        return data

    heartbeat = Heartbeat(
        bus,
        keys,
        role="rq",
        interval_ms=settings.workers.heartbeat_interval_ms,
        info=_info,
        worker_id=worker_id,
    )
    jobs.install(
        jobs.JobContext(
            settings=settings,
            registry=host.registry,
            bus=bus,
            keys=keys,
            worker=worker_id,
            host=host,
        )
    )
    children_die_with_worker()
    host.add_listener(heartbeat.beat_now)  # ack a reload at once, not at the next beat
    metrics, metrics_server = start_worker_metrics("rq", metrics_port, settings, bus)
    metrics.bundle_loaded(host.registry.version)
    host.add_listener(lambda: metrics.bundle_loaded(host.registry.version))
    heartbeat.start()
    log.info("RQ worker %s on queue %s (isolation %s)", worker_id, keys.rq_queue, chosen)
    try:
        attempt = 0
        restarts = RestartBackoff(log, f"RQ worker {worker_id}")
        while not stop.is_set():
            # a fresh RQ worker (and name) each time: the last one's registration may remain
            name = worker_id if attempt == 0 else f"{worker_id}-{attempt}"
            worker = make_worker(settings, isolation=chosen, name=name)
            worker.hookbus_heartbeat = heartbeat  # type: ignore[union-attr]
            worker.hookbus_metrics = metrics  # type: ignore[union-attr]
            current[:] = [worker]
            if stop.is_set():  # asked to stop while this worker was made
                return
            started = time.monotonic()
            error: BaseException | None = None
            try:
                worker.work(
                    burst=burst,
                    # RQ sets its loggers to INFO at import; follow the level the CLI set
                    logging_level=logging.getLevelName(logging.getLogger().getEffectiveLevel()),
                    with_scheduler=True,
                    max_jobs=max_jobs,
                )
            except _REDIS_ERRORS as exc:  # raised outside RQ's own dequeue retries
                error = exc
            if burst or max_jobs is not None or _stop_asked(worker):
                return
            if supervised:
                _catch_stop(stop, current)  # RQ's handlers belong to the worker that ended
            attempt += 1
            # Redis may answer PING and still refuse writes (OOM, MISCONF): wait first
            delay = restarts.failed(error, time.monotonic() - started)
            with contextlib.nullcontext() if supervised else graceful_signals(stop):
                if stop.wait(delay) or not _wait_for_redis(settings, stop):
                    return
    finally:
        if metrics_server is not None:
            metrics_server.shutdown()
        heartbeat.stop()
        host.stop()
        jobs.uninstall()


def _stop_asked(worker: Any) -> bool:
    """Whether SIGTERM / SIGINT ended ``work()`` (RQ marks an idle worker's stop only by the
    time it was asked, a busy one's also by ``_stop_requested``)."""
    return bool(
        getattr(worker, "_stop_requested", False)
        or getattr(worker, "_shutdown_requested_date", None) is not None
    )


def _catch_stop(stop: threading.Event, current: list[Any]) -> None:
    """In a supervised child, outside RQ's own handlers: SIGTERM / SIGINT set ``stop`` (the
    handlers a fork inherits set the supervisor's event, which the child never reads) and
    mark the RQ worker in ``current`` stopped: a signal that comes while ``work()`` starts
    (before RQ installs its own handlers, after its scheduler is forked) must still end it
    before its first dequeue, not leave it running."""
    if threading.current_thread() is not threading.main_thread():
        return

    def handle(signum: int, frame: Any) -> None:
        set_soon(stop)
        for worker in current:
            worker._stop_requested = True

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, handle)


def _wait_for_redis(settings: Settings, stop: threading.Event) -> bool:
    """Back off (exponential, jittered, capped) until RQ's Redis answers PING again; False
    when ``stop`` was set (SIGTERM / SIGINT) meanwhile."""
    import tenacity

    client = connect(settings.effective_rq_redis_url)

    def pause(seconds: float) -> None:
        stop.wait(seconds)  # a stop request ends the wait at once

    try:
        tenacity.Retrying(
            retry=tenacity.retry_if_exception_type(_REDIS_ERRORS),
            wait=tenacity.wait_random_exponential(
                multiplier=RECONNECT_INITIAL_S, max=RECONNECT_MAX_WAIT_S
            ),
            stop=tenacity.stop_when_event_set(stop),
            sleep=pause,
            reraise=True,
        )(client.ping)
    except _REDIS_ERRORS:
        return False
    return not stop.is_set()
