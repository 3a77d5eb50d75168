"""Fan-out jobs that carry several events of one hook: isolated runs at batch speed.

An RQ job costs about 65 Redis commands and some milliseconds whatever it runs, so one job
per hook per event caps a fleet at a few hundred events a second per RQ worker. The
dispatcher therefore puts the events of one hook from one read of the event log into one
*pack* job (at most ``rq.pack_max_events``); the job runs the hook on each event on its own:

- a failure of one event is that event's: it never stops, fails or re-runs the others. The
  failed event leaves the pack as a job of its own (:func:`~hookbus.workers.fanout.jobs.
  run_hook_job`, the job id a single event would have had) holding the retries the hook
  declared minus the try it just had, so it is retried, and finally dead-lettered, alone;
  with no retries declared it goes straight to the dead letters, with its error;
- each event's progress is written to the job's hash as it finishes (one HSET sent without
  waiting for its answer), so a pack rerun because its worker died goes on after the last
  event recorded and runs no finished event twice (at least once stays the promise for the
  event that was running when the worker died);
- the runs are logged in one decision-log entry per pack (a batch entry, each record a
  ``hook_run`` with the fields a single job's entry has).

A pack of one event is an ordinary single job.
"""

from __future__ import annotations

import logging
import time
import traceback
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import redis

from hookbus.bus import decision_batch
from hookbus.bus.connection import CONNECTION_ERRORS
from hookbus.bus.wire import Event, decode, now_ms
from hookbus.errors import HookBusError, HookTimeout
from hookbus.workers.fanout.job_specs import (
    HOOK_JOB_FUNC,
    job_id_for,
    job_timeout_s,
)
from hookbus.workers.fanout.jobs import RECORD_FOR_S
from hookbus.workers.fleet import hook_run_log

if TYPE_CHECKING:
    from rq.job import Job

    from hookbus.workers.fanout.jobs import JobContext

log = logging.getLogger(__name__)

#: Job-hash field holding how many of a pack's events have finished (in order).
DONE_FIELD = "hookbus_done"
#: The dotted path of the function RQ runs for a pack.
HOOK_PACK_FUNC = "hookbus.workers.fanout.packs.run_hook_pack"

_ERRORS: tuple[type[BaseException], ...] = (*CONNECTION_ERRORS, redis.exceptions.RedisError)


def pack_job_id_for(event_ids: list[str], hook_id: str) -> str:
    """The RQ job id of a pack: the same on every redelivery of the same events."""
    import hashlib

    text = "\x00".join([hook_id, "pack", *event_ids])
    return f"hbp-{hashlib.blake2b(text.encode(), digest_size=16).hexdigest()}"


def pack_timeout_s(hook: Any, events: int) -> int:
    """RQ's timeout for a pack: every event may take the hook's whole timeout."""
    return job_timeout_s(hook) * max(1, events)


def run_hook_pack(hook_id: str, events_data: list[bytes]) -> dict[str, Any]:
    """RQ job: run ``hook_id`` on each event of ``events_data``, each on its own."""
    from rq import get_current_job

    from hookbus.workers.fanout.jobs import current_context

    ctx = current_context()
    job = get_current_job()
    start = _resume_at(job)
    if start:
        log.warning(
            "pack %s of hook %s: its worker died after %d of %d events; going on from there",
            job.id if job is not None else "?",
            hook_id,
            start,
            len(events_data),
        )
    progress = _Progress(job)
    records: list[bytes] = []
    failed: list[tuple[bytes, Event, str, str]] = []
    try:
        for index in range(start, len(events_data)):
            data = events_data[index]
            event = decode(data, Event)
            outcome, error, duration_us, trace = _run_one(ctx, hook_id, event)
            progress.done(index + 1)
            records.append(_record(ctx, job, hook_id, event, outcome, error, duration_us))
            if error is not None:
                failed.append((data, event, error, trace or error))
            hook_run_log.log_job_run(
                hook_id,
                [event],
                outcome=outcome,
                duration_us=duration_us,
                worker=ctx.worker,
                bundle_version=getattr(ctx.registry, "version", None),
                error=error,
            )
    finally:
        progress.close()
        _log_runs(ctx, hook_id, records)
    dead = _leave_the_pack(ctx, job, hook_id, failed) if failed else 0
    return {
        "hook_id": hook_id,
        "events": len(events_data) - start,
        "failed": len(failed),
        "dead": dead,
    }


def _run_one(ctx: JobContext, hook_id: str, event: Event) -> tuple[str, str | None, int, str]:
    """(outcome, error, duration µs, traceback) of one isolated run; never raises for the
    hook (the traceback is what the dead letter of the event shows)."""
    started = time.perf_counter()
    try:
        run = ctx.registry.run_hook(hook_id, event)
    except HookTimeout as exc:
        return "timeout", str(exc), _since(started), traceback.format_exc()
    except HookBusError as exc:
        return "error", str(exc), _since(started), traceback.format_exc()
    except Exception as exc:  # a registry bug must fail this event, readably
        return "error", f"{type(exc).__name__}: {exc}", _since(started), traceback.format_exc()
    return run.outcome, None, run.duration_us, ""


def _since(started: float) -> int:
    return int((time.perf_counter() - started) * 1e6)


def _resume_at(job: Job | None) -> int:
    """Where a rerun pack goes on (0 for a first run, or when Redis cannot tell)."""
    if job is None or not job.meta.get("abandoned"):
        return 0
    try:
        value = job.connection.hget(job.key, DONE_FIELD)
    except _ERRORS as exc:
        log.warning("pack %s: cannot read its progress (%s); running it whole", job.id, exc)
        return 0
    return int(value) if value is not None else 0


class _Progress:
    """Writes a pack's progress to its job hash without waiting for each answer: one HSET
    per finished event on a connection of its own, the answers read at the end."""

    def __init__(self, job: Job | None) -> None:
        self.job = job
        self.conn: Any = None
        self.sent = 0
        self.count = 0  # events done, as last sent
        if job is not None:
            try:
                self.conn = job.connection.connection_pool.get_connection()
            except _ERRORS as exc:
                log.warning("pack %s: progress not recorded (%s)", job.id, exc)

    def done(self, count: int) -> None:
        if self.conn is None or self.job is None:
            return
        self.count = count
        try:
            self.conn.send_command("HSET", self.job.key, DONE_FIELD, count)
            self.sent += 1
        except _ERRORS as exc:
            log.warning("pack %s: progress not recorded (%s)", self.job.id, exc)
            self._drop()

    def close(self) -> None:
        if self.conn is None or self.job is None:
            return
        try:
            for _ in range(self.sent):
                self.conn.read_response()
        except _ERRORS as exc:
            # refused (Redis out of memory or disk) or cut off: write the count once more,
            # retrying like jobs.record_ran does, or a rerun would run the pack's events again
            log.warning("pack %s: progress answers lost (%s); recording it again", self.job.id, exc)
            self._drop()
            _record_done(self.job, self.count)
            return
        self.job.connection.connection_pool.release(self.conn)
        self.conn = None

    def _drop(self) -> None:
        if self.conn is not None and self.job is not None:
            self.conn.disconnect()
            self.job.connection.connection_pool.release(self.conn)
        self.conn = None


def _record_done(job: Job, count: int, *, for_s: float = RECORD_FOR_S) -> None:
    """Set a pack's progress to ``count``, retrying with backoff for up to ``for_s`` while
    Redis is away or refuses writes (logged when it could not)."""
    end = time.monotonic() + for_s
    delay = 0.05
    while True:
        try:
            job.connection.hset(job.key, DONE_FIELD, count)
            return
        except _ERRORS as exc:
            if time.monotonic() + delay > end:
                log.error("pack %s: progress %d not recorded (%s)", job.id, count, exc)
                return
            time.sleep(delay)
            delay = min(delay * 2, 1.0)


def _record(
    ctx: JobContext,
    job: Job | None,
    hook_id: str,
    event: Event,
    outcome: str,
    error: str | None,
    duration_us: int,
) -> bytes:
    fields: dict[str, bytes] = {
        "type": b"hook_run",
        "hook": hook_id.encode(),
        "id": event.id.encode(),
        "kind": event.kind.encode(),
        "session": (event.session_id or "").encode(),
        "agent": (event.agent_id or "").encode(),
        "outcome": outcome.encode(),
        "duration_us": str(duration_us).encode(),
        "events": b"1",
        "ts": str(now_ms()).encode(),
    }
    if error:
        fields["error"] = error.encode()
    if job is not None:
        fields["job"] = job.id.encode()
    if ctx.worker:
        fields["worker"] = ctx.worker.encode()
    return decision_batch.encode_record(fields)


def _log_runs(ctx: JobContext, hook_id: str, records: list[bytes]) -> None:
    """One decision-log entry for the pack's runs; never fails the job for it."""
    if not records:
        return
    try:
        for at in range(0, len(records), decision_batch.MAX_RECORDS):
            chunk = records[at : at + decision_batch.MAX_RECORDS]
            ctx.bus.xadd(
                ctx.keys.decisions,
                {
                    decision_batch.BATCH_FIELD: decision_batch.join_records(chunk),
                    decision_batch.COUNT_FIELD: str(len(chunk)).encode(),
                },
                maxlen=ctx.settings.streams.decisions_maxlen,
                approximate=True,
            )
    except _ERRORS as exc:
        log.warning(
            "decision log entries of %d runs of %s not written: %s", len(records), hook_id, exc
        )


def _leave_the_pack(
    ctx: JobContext,
    job: Job | None,
    hook_id: str,
    failed: list[tuple[bytes, Event, str, str]],
) -> int:
    """Each failed event becomes a job of its own: retried as its hook declared, less the
    try it had here, or dead-lettered now when no retry is left. Returns how many were
    dead-lettered."""
    from rq import Queue, Retry
    from rq.defaults import DEFAULT_FAILURE_TTL
    from rq.job import Job as RQJob
    from rq.registry import FailedJobRegistry
    from rq.results import Result

    if job is None:  # run outside RQ (tests call the function): nothing to retry through
        return 0
    dead = 0
    queue = Queue(job.origin, connection=job.connection, serializer=job.serializer)
    timeout = int(job.meta.get("timeout") or job_timeout_s(None))
    retries = int(job.meta.get("retries", 0) or 0)
    intervals = [int(i) for i in (job.meta.get("intervals") or [])]
    for data, event, error, trace in failed:
        meta = {
            "hook": hook_id,
            "event": event.id,
            "kind": event.kind,
            "session": event.session_id,
            "retries": retries,
            "pack": job.id,
        }
        kwargs: dict[str, Any] = {
            "args": (hook_id, data),
            "job_id": job_id_for(event.id, hook_id),
            "timeout": timeout,
            "result_ttl": ctx.settings.rq.result_ttl_s,
            "description": f"{hook_id} on {event.kind} {event.id} (from pack {job.id})",
            "meta": meta,
        }
        try:
            if retries <= 0:
                single = RQJob.create(
                    HOOK_JOB_FUNC,
                    connection=job.connection,
                    serializer=job.serializer,
                    origin=queue.name,
                    id=kwargs["job_id"],
                    args=kwargs["args"],
                    timeout=kwargs["timeout"],
                    result_ttl=kwargs["result_ttl"],
                    description=kwargs["description"],
                    meta=meta,
                )
                with job.connection.pipeline() as pipe:
                    single.save(pipeline=pipe)
                    FailedJobRegistry(queue=queue).add(single, exc_string=trace, pipeline=pipe)
                    # what `hookbus dlq show` reads: the job's latest result, a failure
                    Result.create_failure(
                        single,
                        DEFAULT_FAILURE_TTL,
                        trace,
                        worker_name=ctx.worker or "",
                        pipeline=pipe,
                    )
                    pipe.execute()
                log.warning(
                    "hook %s failed on event %s: dead-lettered (%s)", hook_id, event.id, error
                )
                dead += 1
                continue
            left = retries - 1
            retry = Retry(max=left, interval=intervals[1:] or 0) if left > 0 else None
            delay = intervals[0] if intervals else 0
            if delay > 0:
                queue.enqueue_in(timedelta(seconds=delay), HOOK_JOB_FUNC, retry=retry, **kwargs)
            else:
                queue.enqueue(HOOK_JOB_FUNC, retry=retry, **kwargs)
        except _ERRORS as exc:
            log.error(
                "hook %s failed on event %s and its retry could not be enqueued (%s): the "
                "pack job fails so RQ keeps it",
                hook_id,
                event.id,
                exc,
            )
            raise
    return dead
