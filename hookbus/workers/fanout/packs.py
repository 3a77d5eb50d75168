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
- each event's outcome (with its retry job or dead letter) is durable in the pack's
  progress log (:mod:`~hookbus.workers.fanout.pack_log`) before the next event runs, so a
  pack rerun because its worker died goes on after the last outcome written, runs no
  finished event twice (at least once stays the promise for the event that was running
  when the worker died) and loses no failed event's dead letter;
- an event its worker died on :data:`~hookbus.workers.fanout.pack_log.POISON_KILLS` times
  is the pack's poison: dead-lettered by its own id, the pack going on without it;
- the runs are logged in one decision-log entry per pack (a batch entry, each record a
  ``hook_run`` with the fields a single job's entry has), a killed run's with the rerun's.

A pack of one event is an ordinary single job.
"""

from __future__ import annotations

import logging
import time
import traceback
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import redis

from hookbus.bus import decision_batch, keys
from hookbus.bus.connection import CONNECTION_ERRORS
from hookbus.bus.wire import Event, decode, now_ms
from hookbus.errors import HookBusError, HookTimeout
from hookbus.workers.fanout.job_specs import (
    HOOK_JOB_FUNC,
    job_id_for,
    job_timeout_s,
)
from hookbus.workers.fanout.pack_log import POISON_KILLS, Also, PackLog, PackState
from hookbus.workers.fleet import hook_run_log

if TYPE_CHECKING:
    from rq.job import Job

    from hookbus.workers.fanout.jobs import JobContext

log = logging.getLogger(__name__)

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
    """RQ job: run ``hook_id`` on each event of ``events_data``, each on its own, each
    outcome durable in the pack's progress log before the next event runs."""
    from rq import get_current_job

    from hookbus.workers.fanout.jobs import current_context

    ctx = current_context()
    job = get_current_job()
    plog = _open_log(ctx, job)
    state = plog.open(len(events_data)) if plog is not None else PackState()
    if state.flushed:
        log.warning(
            "pack %s of hook %s ran to its end before; not run again",
            job.id if job else "?",
            hook_id,
        )
        return {"hook_id": hook_id, "events": 0, "failed": 0, "dead": 0}
    start = state.done
    records = dict(state.records)
    failed = dead = 0
    if state.resumed and start < len(events_data):
        log.warning(
            "pack %s of hook %s: its worker died after %d of %d events; going on from there",
            job.id if job is not None else "?",
            hook_id,
            start,
            len(events_data),
        )
    for index in range(start, len(events_data)):
        data = events_data[index]
        event = decode(data, Event)
        poison = state.kills >= POISON_KILLS and index == start
        error: str | None
        if poison:
            error = _poison_error(hook_id, event, state.kills)
            outcome, duration_us, trace = "error", 0, error
            log.error("%s: dead-lettered, the rest of its pack goes on", error)
        else:
            outcome, error, duration_us, trace = _run_one(ctx, hook_id, event)
        record = _record(ctx, job, hook_id, event, outcome, error, duration_us)
        also = None
        if error is not None:
            failed += 1
            also, is_dead = _leave_the_pack(
                ctx, job, hook_id, (data, event), error, trace or error, retry=not poison
            )
            dead += is_dead
        if plog is not None:
            plog.outcome(index, record, also)
        records[index] = record
        hook_run_log.log_job_run(
            hook_id,
            [event],
            outcome=outcome,
            duration_us=duration_us,
            worker=ctx.worker,
            bundle_version=getattr(ctx.registry, "version", None),
            error=error,
        )
    _log_runs(ctx, hook_id, [records[i] for i in sorted(records)])
    if plog is not None:
        plog.flushed(len(events_data))
    return {
        "hook_id": hook_id,
        "events": len(events_data) - start,
        "failed": failed,
        "dead": dead,
    }


def _open_log(ctx: JobContext, job: Job | None) -> PackLog | None:
    """The pack's progress log (None outside RQ: tests call the function directly)."""
    if job is None:
        return None
    return PackLog(job.connection, keys.pack_log(ctx.settings.namespace, job.id), job.id)


def _poison_error(hook_id: str, event: Event, kills: int) -> str:
    return (
        f"hook {hook_id} killed its worker {kills} times on event {event.id} ({event.kind}); "
        "left out of its pack as poison (fix the hook, then `hookbus dlq requeue` it)"
    )


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
    failed: tuple[bytes, Event],
    error: str,
    trace: str,
    *,
    retry: bool = True,
) -> tuple[Also | None, bool]:
    """A failed event becomes a job of its own: retried as its hook declared, less the try
    it had here, or dead-lettered when no retry is left (or ``retry`` is False: a poison
    event, which killed its workers, gets no more tries). Returns the commands that do it
    (run in one MULTI with the event's outcome, so both happen or neither) and whether it
    is dead-lettered."""
    from rq import Queue, Retry
    from rq.defaults import DEFAULT_FAILURE_TTL
    from rq.job import Job as RQJob
    from rq.registry import FailedJobRegistry
    from rq.results import Result

    if job is None:  # run outside RQ (tests call the function): nothing to retry through
        return None, False
    data, event = failed
    queue = Queue(job.origin, connection=job.connection, serializer=job.serializer)
    timeout = int(job.meta.get("timeout") or job_timeout_s(None))
    retries = int(job.meta.get("retries", 0) or 0) if retry else 0
    intervals = [int(i) for i in (job.meta.get("intervals") or [])]
    meta = {
        "hook": hook_id,
        "event": event.id,
        "kind": event.kind,
        "session": event.session_id,
        "retries": retries,
        "pack": job.id,
    }
    job_id = job_id_for(event.id, hook_id)
    description = f"{hook_id} on {event.kind} {event.id} (from pack {job.id})"
    if retries <= 0:
        single = RQJob.create(
            HOOK_JOB_FUNC,
            connection=job.connection,
            serializer=job.serializer,
            origin=queue.name,
            id=job_id,
            args=(hook_id, data),
            timeout=timeout,
            result_ttl=ctx.settings.rq.result_ttl_s,
            description=description,
            meta=meta,
        )

        def dead_letter(pipe: Any) -> None:
            single.save(pipeline=pipe)
            FailedJobRegistry(queue=queue).add(single, exc_string=trace, pipeline=pipe)
            # what `hookbus dlq show` reads: the job's latest result, a failure
            Result.create_failure(
                single, DEFAULT_FAILURE_TTL, trace, worker_name=ctx.worker or "", pipeline=pipe
            )
            log.warning("hook %s failed on event %s: dead-lettered (%s)", hook_id, event.id, error)

        return dead_letter, True
    left = retries - 1
    then = Retry(max=left, interval=intervals[1:] or 0) if left > 0 else None
    delay = intervals[0] if intervals else 0
    kwargs: dict[str, Any] = {
        "args": (hook_id, data),
        "job_id": job_id,
        "timeout": timeout,
        "result_ttl": ctx.settings.rq.result_ttl_s,
        "description": description,
        "meta": meta,
        "retry": then,
    }

    def retry_alone(pipe: Any) -> None:
        if delay > 0:
            queue.enqueue_in(timedelta(seconds=delay), HOOK_JOB_FUNC, pipeline=pipe, **kwargs)
        else:
            queue.enqueue(HOOK_JOB_FUNC, pipeline=pipe, **kwargs)

    return retry_alone, False
