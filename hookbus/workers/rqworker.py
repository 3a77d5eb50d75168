"""RQ workers for hookbus's queue: msgpack jobs, fast abandoned-job detection, heartbeats.

Two isolations (``rq.isolation`` / ``--isolation``):

* ``none`` (default): RQ's SimpleWorker runs each job in the worker process. Four to
  fifteen times the throughput of ``fork`` here (benchmarks/fanout.py). A hook that
  crashes the interpreter takes the worker with it; the job is then detected as abandoned
  and run again.
* ``fork``: RQ's forking Worker runs each job in a child (the "work horse"), so a hook
  cannot corrupt the worker's memory and a runaway job is killed with its process group.
  Each fork costs a few ms.

Abandoned jobs. RQ marks a running job in its StartedJobRegistry with a deadline that the
worker keeps pushing forward while the job runs ("heartbeats"); a job whose deadline passed
is abandoned and retried by whichever worker runs maintenance next. Stock RQ adds 60 s to
every such deadline and runs maintenance every 10 minutes, so a job whose worker was
SIGKILLed sits for minutes. Here the deadline is one monitoring interval plus
:data:`ABANDON_GRACE_S`, heartbeats come every :data:`JOB_MONITORING_INTERVAL_S` (a keeper
thread does it for the SimpleWorker, which stock RQ never heartbeats during a job), and
maintenance runs every :data:`MAINTENANCE_INTERVAL_S`: a killed worker's job runs again
within about ten seconds (five to seven measured). An abandoned job is retried even when
its hook declared no retries (it never failed, its worker died), at most
:data:`MAX_ABANDONED_RERUNS` times.

Redis outages. RQ retries a lost connection only inside its dequeue; met anywhere else (a
job finishing, a heartbeat, maintenance) it ends ``work()``. :func:`run_rq_worker` then
waits for Redis with backoff (tenacity: exponential, jittered, capped) and starts a fresh
RQ worker, so the role outlives any outage; only a stop request ends it.

Every child of a worker (work horses, RQ's scheduler) dies with it (``PR_SET_PDEATHSIG``),
so a job is never still running in an orphan while it is retried elsewhere.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import redis
from rq import SimpleWorker, Worker
from rq.exceptions import AbandonedJobError
from rq.job import Job, JobStatus
from rq.queue import Queue
from rq.worker.base import WorkerStatus

from hookbus.bus.connection import CONNECTION_ERRORS, connect
from hookbus.bus.embedded import set_parent_death_signal
from hookbus.bus.keys import Keys
from hookbus.errors import HookBusError
from hookbus.workers import jobs
from hookbus.workers.rq_orphans import HookIntermediateQueue
from hookbus.workers.serializer import MsgpackSerializer
from hookbus.workers.signals import graceful_signals, set_soon

if TYPE_CHECKING:
    from rq.executions import Execution

    from hookbus.bus.settings import Settings
    from hookbus.workers.heartbeat import Heartbeat

log = logging.getLogger(__name__)

#: Seconds between RQ heartbeats of a running job.
JOB_MONITORING_INTERVAL_S = 1
#: Seconds a running job's registry deadline reaches past its next expected heartbeat.
ABANDON_GRACE_S = 3
#: Seconds between RQ maintenance passes (abandoned jobs, expired registry entries).
MAINTENANCE_INTERVAL_S = 2
#: Seconds an idle worker blocks on its queue before it heartbeats and maintains again.
DEQUEUE_TIMEOUT_S = 1
#: Seconds RQ keeps an idle worker's registration alive without a beat.
WORKER_TTL_S = 20
#: Longest a maintenance pass may hold the queue's maintenance lock, in seconds.
MAINTENANCE_LOCK_S = 30
#: Abandoned-job reruns granted on top of a hook's own retries.
MAX_ABANDONED_RERUNS = 2

#: First and longest wait between reconnection attempts after Redis went away, in seconds.
RECONNECT_INITIAL_S = 0.1
RECONNECT_MAX_WAIT_S = 5.0

_REDIS_ERRORS: tuple[type[BaseException], ...] = (*CONNECTION_ERRORS, redis.exceptions.RedisError)

#: Job functions hookbus workers agree to run; anything else in the queue fails.
ALLOWED_JOB_FUNCS = frozenset(
    {"hookbus.workers.jobs.run_hook_job", "hookbus.workers.jobs.run_batch_job"}
)


class HookJob(Job):
    """An RQ job restricted to hookbus's job functions.

    With msgpack the job data cannot carry code, but its function name is still an import
    path read from Redis; refusing every other name keeps the queue from being a way to call
    arbitrary functions on the fleet.
    """

    @property
    def func(self) -> Any:
        name = self.func_name
        if self.instance is not None or name not in ALLOWED_JOB_FUNCS:
            raise HookBusError(
                f"job {self.id} names {name!r}, which is not a hookbus job function; "
                "only jobs enqueued by the fan-out dispatcher run on hookbus workers"
            )
        return super().func


class HookQueue(Queue):
    """RQ's Queue with a short maintenance lock, and orphaned jobs requeued within seconds
    (:mod:`~hookbus.workers.rq_orphans`).

    RQ holds the per-queue maintenance lock for up to 15 minutes; a worker killed while
    cleaning would stop abandoned-job detection on the queue for that long.
    """

    @property
    def intermediate_queue(self) -> HookIntermediateQueue:
        """Jobs between dequeue and start; orphans there are requeued, not failed."""
        return HookIntermediateQueue(self.key, connection=self.connection)

    def acquire_maintenance_lock(self) -> bool:
        return bool(
            self.connection.set(self.registry_cleaning_key, 1, nx=True, ex=MAINTENANCE_LOCK_S)
        )


def _rerun_abandoned(job: Job, exc_type: type[BaseException], *_: object) -> bool:
    """Exception handler: give an abandoned job (its worker died, or lost Redis mid-job)
    another run without spending one of the hook's retries.

    A hook's declared retries are for its own failures. RQ retries an abandoned job only
    with a retry left, and spends it; an infrastructure fault grants one more instead (the
    retry RQ then takes is this one), up to MAX_ABANDONED_RERUNS per job.
    """
    if exc_type is AbandonedJobError or (
        isinstance(exc_type, type) and issubclass(exc_type, AbandonedJobError)
    ):
        reruns = int(job.meta.get("abandoned", 0))
        if reruns < MAX_ABANDONED_RERUNS:
            job.meta["abandoned"] = reruns + 1
            job.retries_left = int(job.retries_left or 0) + 1
            if not job.retry_intervals:
                job.retry_intervals = [0]
            job.save_meta()  # type: ignore[no-untyped-call]
            log.warning(
                "job %s was abandoned (its worker died or lost Redis); running it again, "
                "its own retries untouched",
                job.id,
            )
    return True


class _HookbusWorkerMixin:
    """Short registry deadlines, heartbeats into hookbus's worker hash."""

    hookbus_heartbeat: Heartbeat | None = None
    job_monitoring_interval: int

    def get_heartbeat_ttl(self, job: Job, working_time: float = 0.0) -> int:
        interval = JOB_MONITORING_INTERVAL_S
        if job.timeout and job.timeout > 0:
            remaining = max(0.0, job.timeout - working_time)
            return int(min(remaining, interval)) + ABANDON_GRACE_S
        return interval + ABANDON_GRACE_S

    @property
    def dequeue_timeout(self) -> int:
        return DEQUEUE_TIMEOUT_S

    @property
    def connection_timeout(self) -> int:
        return DEQUEUE_TIMEOUT_S + 10

    def _record(self, job: Job, started: float, *, refresh: bool) -> None:
        heartbeat = self.hookbus_heartbeat
        if heartbeat is None:
            return
        try:
            status = job.get_status(refresh=refresh)
        except Exception:  # the job may be gone already (result_ttl 0)
            status = None
        heartbeat.record((time.perf_counter() - started) * 1000.0, status != JobStatus.FINISHED)


def _die_with_parent() -> None:
    """In a forked child: ask Linux to SIGKILL us when the worker dies (no-op elsewhere)."""
    set_parent_death_signal(signal.SIGKILL)


_at_fork_registered = False


def _children_die_with_worker() -> None:
    """Every child this worker process forks (work horses, RQ's scheduler) dies with it:
    a SIGKILLed worker leaves no orphan finishing a job that is being retried elsewhere,
    and no orphan scheduler holding the scheduler lock."""
    global _at_fork_registered
    if not _at_fork_registered:
        os.register_at_fork(after_in_child=_die_with_parent)
        _at_fork_registered = True


class ForkingHookWorker(_HookbusWorkerMixin, Worker):
    """``fork`` isolation: each job in a work horse of its own."""

    def execute_job(self, job: Job, queue: Queue) -> None:
        started = time.perf_counter()
        super().execute_job(job, queue)
        self._record(job, started, refresh=True)


class SimpleHookWorker(_HookbusWorkerMixin, SimpleWorker):
    """``none`` isolation: jobs run in the worker process; a keeper thread heartbeats the
    running job so a SIGKILLed worker's job is found abandoned within seconds."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._running: tuple[Job, Execution, float] | None = None
        self._running_lock = threading.Lock()
        self._keeper_stop = threading.Event()
        self._keeper: threading.Thread | None = None

    def execute_job(self, job: Job, queue: Queue) -> None:
        started = time.perf_counter()
        self._ensure_keeper()
        execution = self.prepare_execution(job)
        with self._running_lock:
            self._running = (job, execution, time.monotonic())
        try:
            self.perform_job(job, queue, execution)
        finally:
            with self._running_lock:
                self._running = None
        self.set_state(WorkerStatus.IDLE)
        self._record(job, started, refresh=False)

    def _ensure_keeper(self) -> None:
        if self._keeper is None or not self._keeper.is_alive():
            self._keeper = threading.Thread(target=self._keep, name="rq-job-keeper", daemon=True)
            self._keeper.start()

    def _keep(self) -> None:
        interval = JOB_MONITORING_INTERVAL_S
        while not self._keeper_stop.wait(interval):
            with self._running_lock:
                running = self._running
                if running is None or time.monotonic() - running[2] < interval:
                    continue
                job, execution, _ = running
                try:
                    self.maintain_heartbeats(job, execution)
                except Exception as exc:  # Redis trouble: the next beat tries again
                    log.warning("heartbeat of running job %s failed: %s", job.id, exc)

    def teardown(self) -> None:
        self._keeper_stop.set()
        super().teardown()  # type: ignore[no-untyped-call]


def make_worker(
    settings: Settings,
    *,
    isolation: str | None = None,
    connection: Any = None,
    name: str | None = None,
) -> Worker | SimpleWorker:
    """An RQ worker on the namespace's queue (one queue: RQ's atomic dequeue path)."""
    chosen = str(isolation or settings.rq.isolation)
    if chosen not in ("fork", "none"):
        raise HookBusError(f"unknown isolation {chosen!r}: use fork or none")
    rq_client = connection if connection is not None else connect(settings.effective_rq_redis_url)
    keys = Keys.for_namespace(settings.namespace)
    queue = HookQueue(
        keys.rq_queue, connection=rq_client, serializer=MsgpackSerializer, job_class=HookJob
    )
    cls = ForkingHookWorker if chosen == "fork" else SimpleHookWorker
    worker = cls(
        [queue],
        name=name,
        connection=rq_client,
        serializer=MsgpackSerializer,
        job_class=HookJob,
        queue_class=HookQueue,
        default_result_ttl=settings.rq.result_ttl_s,
        worker_ttl=WORKER_TTL_S,
        job_monitoring_interval=JOB_MONITORING_INTERVAL_S,
        maintenance_interval=MAINTENANCE_INTERVAL_S,
        exception_handlers=[_rerun_abandoned],
    )
    return worker


def run_rq_worker(
    settings: Settings,
    *,
    isolation: str | None = None,
    burst: bool = False,
    hooks_dir: Path | None = None,
    registry: Any = None,
    max_jobs: int | None = None,
    supervise: bool | None = None,
) -> None:
    """Run one RQ worker until SIGTERM/SIGINT (RQ's warm shutdown), or until the queue is
    empty with ``burst``. Loads the hook set through a HookHost that follows reloads, and
    heartbeats with role ``rq``.

    ``supervise``: serve from a forked child that is restarted when a hook kills it
    (:mod:`~hookbus.workers.respawn`). By default, whenever forking is safe here: in a
    process whose main thread is its only thread, as under ``hookbus worker``.
    """
    from hookbus.workers.respawn import Respawner, can_supervise

    def serve(worker_id: str | None, extra: Callable[[], dict[str, Any]] | None) -> None:
        _serve(settings, isolation, burst, hooks_dir, registry, max_jobs, worker_id, extra)

    if not (can_supervise() if supervise is None else supervise):
        serve(None, None)
        return
    stop = threading.Event()
    respawner = Respawner(settings, stop, role="rq")
    with graceful_signals(stop):  # the child handles its own (RQ's warm shutdown)
        respawner.run(lambda worker_id: serve(worker_id, respawner.info))


def _serve(
    settings: Settings,
    isolation: str | None,
    burst: bool,
    hooks_dir: Path | None,
    registry: Any,
    max_jobs: int | None,
    worker_id: str | None,
    extra_info: Callable[[], dict[str, Any]] | None,
) -> None:
    """One RQ worker in this process (see :func:`run_rq_worker`)."""
    from hookbus.hooks.registry import HookRegistry
    from hookbus.workers.heartbeat import Heartbeat, new_worker_id
    from hookbus.workers.hookset import HookHost

    supervised = extra_info is not None  # a child of run_rq_worker's supervisor
    stop = threading.Event()
    if supervised:
        _catch_stop(stop)
    bus = connect(settings.effective_redis_url)
    keys = Keys.for_namespace(settings.namespace)
    reg = registry if registry is not None else HookRegistry.from_settings(settings)
    host = HookHost(reg, settings, hooks_dir=hooks_dir)
    host.start(bus)
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
    _children_die_with_worker()
    host.add_listener(heartbeat.beat_now)  # ack a reload at once, not at the next beat
    heartbeat.start()
    log.info("RQ worker %s on queue %s (isolation %s)", worker_id, keys.rq_queue, chosen)
    try:
        attempt = 0
        while not stop.is_set():
            # a fresh RQ worker (and name) each time: the last one's registration may remain
            name = worker_id if attempt == 0 else f"{worker_id}-{attempt}"
            worker = make_worker(settings, isolation=chosen, name=name)
            worker.hookbus_heartbeat = heartbeat  # type: ignore[union-attr]
            try:
                worker.work(
                    burst=burst,
                    # RQ sets its loggers to INFO at import; follow the level the CLI set
                    logging_level=logging.getLevelName(logging.getLogger().getEffectiveLevel()),
                    with_scheduler=True,
                    max_jobs=max_jobs,
                )
            except _REDIS_ERRORS as exc:  # raised outside RQ's own dequeue retries
                log.warning("RQ worker %s lost Redis: %s", name, exc)
            if burst or max_jobs is not None or _stop_asked(worker):
                return
            if supervised:
                _catch_stop(stop)  # RQ's handlers belong to the worker that just ended
            attempt += 1
            log.warning("RQ worker %s stopped serving; reconnecting with backoff", name)
            with contextlib.nullcontext() if supervised else graceful_signals(stop):
                if not _wait_for_redis(settings, stop):
                    return
    finally:
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


def _catch_stop(stop: threading.Event) -> None:
    """In a supervised child, outside RQ's own handlers: SIGTERM / SIGINT set ``stop`` (the
    handlers a fork inherits set the supervisor's event, which the child never reads)."""
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, frame: set_soon(stop))


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
