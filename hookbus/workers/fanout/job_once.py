"""A fan-out job whose hook has run is not run again because its worker died afterwards.

RQ records a finished job after the job function returns (several commands, a round trip
or two). A worker killed, or cut off from Redis, in that gap leaves a job that ran looking
abandoned, and abandoned jobs are run again (:func:`~hookbus.workers.fanout.rq_classes`): the
hook's side effect happens twice. So the moment a hook run succeeds, its job hash gets a
``hookbus_ran`` field (one HSET, retried while Redis is away: the Redis-restart case), and
a job that starts with that field set returns at once, counted and logged, without running
the hook. What is left is the gap between the hook returning and that one HSET arriving:
a worker SIGKILLed inside it still runs the hook twice (delivery stays at least once).
A failed run sets nothing, so the hook's own retries run as declared.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

import redis

from hookbus.bus.connection import CONNECTION_ERRORS
from hookbus.bus.wire import now_ms

if TYPE_CHECKING:
    from rq.job import Job

log = logging.getLogger(__name__)

#: Job-hash field set once the job's hook run succeeded.
RAN_FIELD = "hookbus_ran"
#: How long a worker keeps trying to record a successful run while Redis is away, in s.
RECORD_FOR_S = 30.0

_ERRORS: tuple[type[BaseException], ...] = (*CONNECTION_ERRORS, redis.exceptions.RedisError)


def already_ran(job: Job | None) -> bool:
    """Whether ``job``'s hook already ran to success (False when Redis cannot tell: the
    job then runs, as delivery is at least once)."""
    if job is None or not job.meta.get("abandoned"):
        return False  # only a rerun of an abandoned job can have run before
    try:
        return bool(job.connection.hexists(job.key, RAN_FIELD))
    except _ERRORS as exc:
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
        except _ERRORS as exc:
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
