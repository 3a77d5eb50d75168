"""Deleting everything one test namespace left in a Redis, RQ's bookkeeping included.

RQ names its job keys by job id (``rq:job:hb-<digest>``), not by queue, and files every
queue and worker in shared sets (``rq:queues``, ``rq:workers``): a pattern on the namespace
alone leaves those behind in a shared server. Jobs are found by their ``origin`` field (the
queue they were enqueued on), workers by the queues they served.
"""

from __future__ import annotations

import redis

from hookbus.bus import keys

#: Keys RQ keeps per job id, next to ``rq:job:<id>``.
_JOB_KEY_FORMS = ("rq:job:{id}", "rq:results:{id}", "rq:job:{id}:dependents")


def delete_namespace(client: redis.Redis, ns: str) -> None:
    """Delete every key of a namespace: hookbus's own, its state, its RQ queue's keys, the
    RQ jobs enqueued on that queue, and its entries in RQ's shared sets."""
    queue = keys.rq_queue_name(ns)
    doomed: set[bytes | str] = set()
    for pattern in (keys.namespace_pattern(ns), keys.state_pattern(ns), f"*{queue}*", f"*{ns}*"):
        doomed.update(client.scan_iter(match=pattern, count=1000))
    doomed.update(_job_keys(client, queue))
    doomed.update(_execution_keys(client, doomed))
    workers = _worker_names(client, queue)
    doomed.update(workers)
    doomed.update(f"{worker}:executions" for worker in workers)
    if doomed:
        client.delete(*doomed)
    client.srem("rq:queues", f"rq:queue:{queue}")
    if workers:
        client.srem("rq:workers", *workers)
    _forget_dead_workers(client)


def _job_keys(client: redis.Redis, queue: str) -> set[str]:
    found: set[str] = set()
    for key in client.scan_iter(match="rq:job:*", count=1000):
        name = key.decode() if isinstance(key, bytes) else key
        job_id = name.removeprefix("rq:job:")
        if ":" in job_id:
            continue
        try:
            origin = client.hget(name, "origin")
        except redis.exceptions.ResponseError:  # not a hash: not a job of RQ's
            continue
        if origin is not None and origin.decode() == queue:
            found.update(form.format(id=job_id) for form in _JOB_KEY_FORMS)
    return found


def _execution_keys(client: redis.Redis, doomed: set[bytes | str]) -> set[bytes]:
    """RQ's execution records (``rq:execution:<job id>:<n>``, ``rq:executions:<job id>``)
    of the jobs about to go."""
    found: set[bytes] = set()
    for key in list(doomed):
        name = key.decode() if isinstance(key, bytes) else key
        if name.startswith("rq:job:") and name.count(":") == 2:
            job_id = name.removeprefix("rq:job:")
            for pattern in (f"rq:executions:{job_id}*", f"rq:execution:{job_id}:*"):
                found.update(client.scan_iter(match=pattern, count=1000))
    return found


def _worker_names(client: redis.Redis, queue: str) -> list[str]:
    """Workers and schedulers that served the queue: live ones are in ``rq:workers``; a
    stopped one leaves its hash for a minute after its death (RQ's own expiry)."""
    names = []
    for pattern in ("rq:worker:*", "rq:scheduler:*"):
        for member in client.scan_iter(match=pattern, count=1000):
            key = member.decode() if isinstance(member, bytes) else member
            try:
                served = client.hget(key, "queues")
            except redis.exceptions.ResponseError:  # a lock or a set, not a worker's hash
                continue
            if served is not None and queue in served.decode().split(","):
                names.append(key)
    return names


def _forget_dead_workers(client: redis.Redis) -> None:
    """Drop ``rq:workers`` members whose worker hash has expired (a worker that was killed
    never removes itself): RQ itself cleans them only when some worker sweeps."""
    members = list(client.smembers("rq:workers"))
    gone = [m for m in members if not client.exists(m)]
    if gone:
        client.srem("rq:workers", *gone)
