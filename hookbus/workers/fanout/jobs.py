"""The functions RQ runs: one hook on one event, or one batching hook on a list of events.

They run inside an RQ worker process, which holds the hook set in a :class:`JobContext`
installed once by :func:`hookbus.workers.fanout.rq_worker.run_rq_worker` (a :class:`HookHost`
following reloads). A job started by a plain ``rq worker`` builds the context lazily from
the configuration instead.

A hook that fails raises (:class:`HookExecutionError` or :class:`HookTimeout`): RQ then
retries the job as the hook's manifest declared and finally moves it to its failed registry,
the dead letters of ``hookbus dlq``. Every try, failed or not, is appended to the decision
log stream as one ``hook_run`` entry.

A job whose hook has run is not run again because its worker died afterwards. RQ records a
finished job after the job function returns (several commands, a round trip or two). A worker
killed, or cut off from Redis, in that gap leaves a job that ran looking abandoned, and
abandoned jobs are run again (:mod:`~hookbus.workers.fanout.rq_classes`): the hook's side effect
happens twice. So the moment a hook run succeeds, its job hash gets a ``hookbus_ran`` field (one
HSET, retried while Redis is away: the Redis-restart case), and a job that starts with that
field set returns at once, counted and logged, without running the hook. What is left is the gap
between the hook returning and that one HSET arriving: a worker SIGKILLed inside it still runs
the hook twice (delivery stays at least once). A failed run sets nothing, so the hook's own
retries run as declared.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import redis

from hookbus.bus.connection import CONNECTION_ERRORS, bus_client
from hookbus.bus.keys import Keys
from hookbus.bus.tracing.spans import record_job
from hookbus.bus.wire import Event, HookRun, decode, now_ms, to_builtins
from hookbus.errors import HookBusError, HookExecutionError, HookTimeout
from hookbus.workers.fleet import hook_run_log

if TYPE_CHECKING:
    from rq.job import Job

    from hookbus.bus.settings.loader import Settings
    from hookbus.workers.reload.hookset import HookHost


log = logging.getLogger(__name__)

#: Job-hash field set once the job's hook run succeeded.
RAN_FIELD = "hookbus_ran"
#: How long a worker keeps trying to record a successful run while Redis is away, in s.
RECORD_FOR_S = 30.0

_REDIS_ERRORS: tuple[type[BaseException], ...] = (*CONNECTION_ERRORS, redis.exceptions.RedisError)


def already_ran(job: Job | None) -> bool:
    """Whether ``job``'s hook already ran to success (False when Redis cannot tell: the
    job then runs, as delivery is at least once)."""
    if job is None or not job.meta.get("abandoned"):
        return False  # only a rerun of an abandoned job can have run before
    try:
        return bool(job.connection.hexists(job.key, RAN_FIELD))
    except _REDIS_ERRORS as exc:
        log.warning("job %s: cannot tell whether it already ran (%s); running it", job.id, exc)
        return False


def record_ran(job: Job | None, *, for_s: float = RECORD_FOR_S) -> bool:
    """Mark ``job`` as run, retrying with backoff while Redis is unreachable (a restart,
    a stall) for up to ``for_s``; False (logged) when it could not be recorded."""
    if job is None:
        return False
    end = time.monotonic() + for_s
    delay = 0.05
    while True:
        try:
            job.connection.hset(job.key, RAN_FIELD, now_ms())
            return True
        except _REDIS_ERRORS as exc:
            if time.monotonic() + delay > end:
                log.error(
                    "job %s ran, but that could not be recorded (%s): if it is found "
                    "abandoned, its hook runs again",
                    job.id,
                    exc,
                )
                return False
            time.sleep(delay)
            delay = min(delay * 2, 1.0)


#: ``type`` field of the decision-log entries written for non-blocking hook runs.
HOOK_RUN_TYPE = "hook_run"


@dataclass
class JobContext:
    """What a job needs from its worker process: settings, the hook registry, the bus."""

    settings: Settings
    registry: Any
    bus: redis.Redis
    keys: Keys
    worker: str | None = None
    host: HookHost | None = None


_context: JobContext | None = None
_context_lock = threading.Lock()


def install(context: JobContext) -> None:
    """Make ``context`` the one jobs of this process use (forked work horses inherit it)."""
    global _context
    _context = context


def uninstall() -> None:
    global _context
    _context = None


def current_context() -> JobContext:
    """The installed context, or one built from the configuration on first use."""
    global _context
    ctx = _context
    if ctx is not None:
        return ctx
    with _context_lock:
        if _context is None:
            _context = _context_from_config()
        return _context


def _context_from_config() -> JobContext:
    from hookbus.bus.settings.loader import load_settings
    from hookbus.hooks.registry import HookRegistry
    from hookbus.workers.reload.hookset import HookHost

    settings = load_settings().settings
    bus = bus_client(settings)
    hooks_dir = Path(settings.hooks_dir)
    host = HookHost(
        HookRegistry.for_worker(settings, bus, notices=False),
        settings,
        hooks_dir=hooks_dir if hooks_dir.is_dir() else None,
    )
    host.start(bus)
    return JobContext(
        settings=settings,
        registry=host.registry,
        bus=bus,
        keys=Keys.for_namespace(settings.namespace),
        host=host,
    )


def run_hook_job(hook_id: str, event_data: bytes) -> dict[str, Any]:
    """RQ job: run ``hook_id`` on one event (msgpack bytes as stored in the event log)."""
    ctx = current_context()
    event = decode(event_data, Event)
    return _run(ctx, hook_id, event, [event])


def run_batch_job(hook_id: str, events_data: list[bytes]) -> dict[str, Any]:
    """RQ job: run the batching hook ``hook_id`` once on a list of events."""
    ctx = current_context()
    events = [decode(data, Event) for data in events_data]
    return _run(ctx, hook_id, events, events)


def _run(
    ctx: JobContext, hook_id: str, arg: Event | list[Event], events: list[Event]
) -> dict[str, Any]:
    from rq import get_current_job

    job = get_current_job()
    if already_ran(job):
        log.warning(
            "job %s: hook %s already ran for it (its worker died before RQ recorded the "
            "job as done); not run again",
            job.id if job is not None else "?",
            hook_id,
        )
        return {"hook_id": hook_id, "outcome": "already_ran"}
    started = time.perf_counter()
    try:
        run: HookRun = ctx.registry.run_hook(hook_id, arg)
    except HookTimeout as exc:
        _log_run(ctx, hook_id, events, "timeout", started, str(exc))
        raise
    except HookBusError as exc:
        _log_run(ctx, hook_id, events, "error", started, str(exc))
        raise
    except Exception as exc:  # a registry bug must still fail the job, readably
        reason = f"{type(exc).__name__}: {exc}"
        _log_run(ctx, hook_id, events, "error", started, reason)
        raise HookExecutionError(hook_id, reason) from exc
    record_ran(job)  # first: a worker killed from here on does not run it twice
    _log_run(ctx, hook_id, events, run.outcome, started, run.error, run.duration_us)
    return dict(to_builtins(run))


def _log_run(
    ctx: JobContext,
    hook_id: str,
    events: list[Event],
    outcome: str,
    started: float,
    error: str | None,
    duration_us: int | None = None,
) -> None:
    """Append one ``hook_run`` entry to the decision log; never fails the job for it.

    Field names follow the chain's decision-log entries (``id``, ``kind``, ``outcome``,
    ``worker``, ``duration_us``, ``session``, ``agent``); ``type`` tells the two apart.
    """
    from rq import get_current_job

    if duration_us is None:
        duration_us = int((time.perf_counter() - started) * 1_000_000)
    first = events[0] if events else None
    job = get_current_job()
    fields: dict[str, str | int] = {
        "type": HOOK_RUN_TYPE,
        "hook": hook_id,
        "id": first.id if first else "",
        "kind": first.kind if first else "",
        "session": (first.session_id or "") if first else "",
        "agent": (first.agent_id or "") if first else "",
        "outcome": outcome,
        "duration_us": duration_us,
        "events": len(events),
        "ts": now_ms(),
    }
    if error:
        fields["error"] = error
    if job is not None:
        fields["job"] = job.id
        fields["retries_left"] = job.retries_left if job.retries_left is not None else 0
    if ctx.worker:
        fields["worker"] = ctx.worker
    try:
        ctx.bus.xadd(
            ctx.keys.decisions,
            fields,  # type: ignore[arg-type]
            maxlen=ctx.settings.streams.decisions_maxlen,
            approximate=True,
        )
    except _REDIS_ERRORS as exc:
        log.warning("decision log entry for hook %s not written: %s", hook_id, exc)
    version = getattr(ctx.registry, "version", None)
    hook_run_log.log_job_run(
        hook_id,
        events,
        outcome=outcome,
        duration_us=duration_us,
        worker=ctx.worker,
        bundle_version=version,
        error=error,
    )
    record_job(
        hook_id,
        events,
        outcome=outcome,
        end_ns=time.time_ns(),
        duration_ns=duration_us * 1000,
        error=error,
        worker=ctx.worker,
    )
