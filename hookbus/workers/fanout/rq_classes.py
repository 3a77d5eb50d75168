"""The RQ worker classes of hookbus's queue: msgpack jobs, fast abandoned-job detection.

Two isolations (``rq.isolation`` / ``--isolation``):

* ``none`` (default): RQ's SimpleWorker runs each job in the worker process. Several
  times the throughput of ``fork`` (benchmarks/fanout.py; docs/performance.md). A hook that
  crashes the interpreter takes the worker process with it; its supervisor restarts it
  (:mod:`~hookbus.workers.fleet.respawn`) and the job is detected as abandoned and run again.
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
within about ten seconds. An abandoned job is run again without
spending the hook's own retries, at most :data:`MAX_ABANDONED_RERUNS` times (a pack, which
resumes from its progress log and isolates an event that keeps killing its worker, as many
times as its events could each die up to the poison limit).

Every child of a worker (work horses, RQ's scheduler) dies with it (``PR_SET_PDEATHSIG``),
so a job is never still running in an orphan while it is retried elsewhere.

Jobs orphaned between dequeue and start run again within seconds, retries intact. RQ dequeues
with BLMOVE from the queue into an intermediate list and moves the job into its
StartedJobRegistry a moment later. A worker killed in between leaves the job in the intermediate
list, where stock RQ finds it after a minute and *fails* it: a hook with no retries goes to the
dead letters without ever having run. Here a maintenance pass that finds a job still there
:data:`ORPHAN_AFTER_S` after it first saw it puts the job back at the head of its queue,
unfailed (it never ran, so no retry is spent): it runs again within about ten seconds of its
worker's death.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from rq import SimpleWorker, Worker
from rq.exceptions import AbandonedJobError
from rq.intermediate_queue import IntermediateQueue
from rq.job import Job, JobStatus
from rq.queue import Queue
from rq.utils import now
from rq.worker.base import WorkerStatus

from hookbus.bus.connection import connect
from hookbus.bus.embedded import set_parent_death_signal
from hookbus.bus.keys import Keys
from hookbus.errors import HookBusError
from hookbus.workers.fanout.serializer import MsgpackSerializer
from hookbus.workers.fleet.metrics import NO_METRICS, MetricsSink

if TYPE_CHECKING:
    import redis
    from rq.executions import Execution
    from rq.queue import Queue
    from rq.worker.base import BaseWorker

    from hookbus.bus.settings.loader import Settings
    from hookbus.workers.fleet.heartbeat import Heartbeat


log = logging.getLogger(__name__)

#: How long a job may sit between dequeue and start before it counts as orphaned, in s.
#: A live worker moves it on within milliseconds.
ORPHAN_AFTER_S = 5


class HookIntermediateQueue(IntermediateQueue):
    """RQ's intermediate list, with orphans requeued instead of failed."""

    def should_be_cleaned_up(self, job_id: str) -> bool:
        first_seen = self.get_first_seen(job_id)
        if not first_seen:
            return False
        return bool(now() - first_seen > timedelta(seconds=ORPHAN_AFTER_S))

    def cleanup(self, worker: BaseWorker, queue: Queue) -> None:
        """Requeue the jobs that were dequeued and never started (runs under RQ's
        maintenance lock, so one worker at a time)."""
        for job_id in self.get_job_ids():
            if job_id in queue.started_job_registry:
                continue
            if queue.fetch_job(job_id) is None:
                self.remove(job_id)
                continue
            if self.set_first_seen(job_id) or not self.should_be_cleaned_up(job_id):
                continue
            if self.connection.lrem(self.key, 1, job_id):
                queue.push_job_id(job_id, at_front=True)
                log.warning(
                    "job %s was dequeued by a worker that died before starting it; requeued",
                    job_id,
                )
            self.connection.delete(self.get_first_seen_key(job_id))


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

#: Job functions hookbus workers agree to run; anything else in the queue fails.
ALLOWED_JOB_FUNCS = frozenset(
    {
        "hookbus.workers.fanout.jobs.run_hook_job",
        "hookbus.workers.fanout.jobs.run_batch_job",
        "hookbus.workers.fanout.packs.run_hook_pack",
    }
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
    (:class:`HookIntermediateQueue`).

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
    another run without spending one of the hook's retries, and at once.

    A hook's declared retries are for its own failures. RQ retries an abandoned job only
    with a retry left, and spends it; an infrastructure fault grants one more instead (the
    retry RQ then takes is this one), up to MAX_ABANDONED_RERUNS per job. That retry is
    enqueued now, not after the hook's retry interval: a scheduled one waits for RQ's
    scheduler, whose lock a killed worker may hold for a minute.
    """
    if exc_type is AbandonedJobError or (
        isinstance(exc_type, type) and issubclass(exc_type, AbandonedJobError)
    ):
        _grant_rerun(job, "was abandoned (its worker died or lost Redis)")
    return True


def _grant_rerun(job: Job, why: str) -> None:
    """One more immediate run of ``job`` for an infrastructure fault, its own retries
    untouched, while it has reruns left (:func:`_rerun_limit`)."""
    reruns = int(job.meta.get("abandoned", 0))
    if reruns >= _rerun_limit(job):
        return
    job.meta["abandoned"] = reruns + 1
    left = int(job.retries_left or 0)
    job.retry_intervals = _with_immediate_retry(list(job.retry_intervals or []), left)
    job.retries_left = left + 1
    job.save_meta()  # type: ignore[no-untyped-call]
    log.warning("job %s %s; running it again now, its own retries untouched", job.id, why)


def _rerun_limit(job: Job) -> int:
    """Abandoned reruns a job gets: MAX_ABANDONED_RERUNS, or for a pack enough for a death
    on each of its events up to its poison limit (every rerun of a pack either goes past
    the event it died on or counts one more death against it: packs.run_hook_pack)."""
    from hookbus.workers.fanout.pack_log import POISON_KILLS

    events = (job.meta or {}).get("events") if (job.meta or {}).get("pack") else None
    if not events:
        return MAX_ABANDONED_RERUNS
    return MAX_ABANDONED_RERUNS + len(events) * POISON_KILLS


def _with_immediate_retry(intervals: list[int], retries_left: int) -> list[int]:
    """Retry intervals with a 0 where RQ will look next once ``retries_left`` grows by one,
    the hook's own intervals keeping their places after it.

    RQ takes ``intervals[max(len - retries_left, 0)]``, the first one repeated while more
    retries are left than intervals; that repetition is written out first, so inserting
    the 0 does not shift which interval a later, real retry gets.
    """
    if not intervals:
        return [0]
    if len(intervals) < retries_left:
        intervals = [intervals[0]] * (retries_left - len(intervals)) + intervals
    at = max(len(intervals) - retries_left, 0)
    return [*intervals[:at], 0, *intervals[at:]]


class _HookbusWorkerMixin:
    """Short registry deadlines, heartbeats into hookbus's worker hash."""

    hookbus_heartbeat: Heartbeat | None = None
    hookbus_metrics: MetricsSink = NO_METRICS
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
        metrics = self.hookbus_metrics
        if heartbeat is None and metrics is NO_METRICS:
            return
        try:
            status = job.get_status(refresh=refresh)
        except Exception:  # the job may be gone already (result_ttl 0)
            status = None
        seconds = time.perf_counter() - started
        if heartbeat is not None:
            heartbeat.record(seconds * 1000.0, status != JobStatus.FINISHED)
        hook = _hook_of(job)
        runs = _pack_runs(job) if status == JobStatus.FINISHED else None
        if runs is None:
            metrics.job_done(hook, None if status is None else str(status.value), seconds)
            return
        # a pack: each event's run counts as a job would (its failures left as their own jobs)
        events, failed, dead = runs
        each = seconds / max(events, 1)
        for _ in range(events - failed):
            metrics.job_done(hook, "finished", each)
        for _ in range(dead):
            metrics.job_done(hook, "failed", each)
        for _ in range(failed - dead):
            metrics.job_done(hook, "scheduled", each)


def _pack_runs(job: Job) -> tuple[int, int, int] | None:
    """(events run, failed, dead-lettered) of a finished pack; None for any other job."""
    if not (job.meta or {}).get("pack"):
        return None
    try:
        value = job.return_value()
    except Exception:  # the result may be gone already (result_ttl 0)
        return None
    if not isinstance(value, dict):
        return None
    return int(value.get("events", 0)), int(value.get("failed", 0)), int(value.get("dead", 0))


def _hook_of(job: Job) -> str | None:
    """The hook a hookbus job runs (its first argument), for the metrics' ``hook`` label."""
    try:
        args = job.args
    except Exception:  # an undecodable job: counted without a hook
        return None
    return str(args[0]) if args else None


def _die_with_parent() -> None:
    """In a forked child: ask Linux to SIGKILL us when the worker dies (no-op elsewhere)."""
    set_parent_death_signal(signal.SIGKILL)


_at_fork_registered = False


def children_die_with_worker() -> None:
    """Every child this worker process forks (work horses, RQ's scheduler) dies with it:
    a SIGKILLed worker leaves no orphan finishing a job that is being retried elsewhere,
    and no orphan scheduler holding the scheduler lock."""
    global _at_fork_registered
    if not _at_fork_registered:
        os.register_at_fork(after_in_child=_die_with_parent)
        _at_fork_registered = True


class ForkingHookWorker(_HookbusWorkerMixin, Worker):
    """``fork`` isolation: each job in a work horse of its own. A pack whose work horse
    died (a hook that crashed the process) is run again like an abandoned one: it resumes
    from its progress log, and an event that keeps killing it is dead-lettered alone."""

    def handle_work_horse_killed(self, job: Job, retpid: int, ret_val: int, rusage: Any) -> None:
        super().handle_work_horse_killed(job, retpid, ret_val, rusage)  # type: ignore[no-untyped-call]
        if (job.meta or {}).get("pack"):
            _grant_rerun(job, "lost its work horse")

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
    connection: redis.Redis | None = None,
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
