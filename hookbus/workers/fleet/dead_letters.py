"""Dead letters, whatever their source: failed hook jobs and given-up stream entries.

A non-blocking hook's job is retried as its manifest declares (``retries``); after the last
try RQ moves it to the FailedJobRegistry of the namespace's queue, where it stays (RQ's
failure TTL, a year) until someone looks. Requests and events the workers gave up on
(undecodable, delivered too often) are in the dead-letter streams, one per partition
(:mod:`~hookbus.workers.fleet.dead_stream`, ids ``dl-...``, ``dl-p<p>:...`` in partition p > 0).
This module lists, shows, requeues and purges all of them; ``hookbus dlq`` is its command
line.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from rq.exceptions import InvalidJobOperation, NoSuchJobError
from rq.job import Job
from rq.registry import FailedJobRegistry

from hookbus.bus.keys import Keys
from hookbus.bus.wire import Event, decode, to_builtins
from hookbus.errors import JobNotFound, WireError
from hookbus.workers.fanout.rq_classes import HookJob
from hookbus.workers.fanout.serializer import MsgpackSerializer
from hookbus.workers.fleet import dead_stream

if TYPE_CHECKING:
    import redis

    from hookbus.bus.settings.loader import Settings


@dataclass(frozen=True)
class DeadJob:
    """One dead letter, summarised for listing."""

    id: str
    hook: str | None
    event: str | None
    kind: str | None
    events: int
    failed_at: str | None
    error: str | None
    tries: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "hook": self.hook,
            "event": self.event,
            "kind": self.kind,
            "events": self.events,
            "failed_at": self.failed_at,
            "error": self.error,
            "tries": self.tries,
        }


def failed_registry(client: redis.Redis, settings: Settings) -> FailedJobRegistry:
    """RQ's failed registry of the namespace's queue (on the RQ Redis ``client``)."""
    return FailedJobRegistry(
        Keys.for_namespace(settings.namespace).rq_queue,
        connection=client,
        job_class=HookJob,
        serializer=MsgpackSerializer,
    )


def _fetch(client: redis.Redis, job_id: str) -> Job:
    try:
        job = HookJob.fetch(job_id, connection=client, serializer=MsgpackSerializer)
    except NoSuchJobError as exc:
        raise JobNotFound(
            f"no dead letter {job_id!r}: it may have been requeued or purged "
            "(see `hookbus dlq list`)"
        ) from exc
    return job


def _last_error(job: Job) -> str | None:
    result = job.latest_result()
    text = result.exc_string if result is not None and result.exc_string else job._exc_info
    if not text:
        return None
    lines = [line for line in str(text).strip().splitlines() if line.strip()]
    return lines[-1] if lines else None


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def _tries(job: Job) -> int:
    declared = int(job.meta.get("retries", 0) or 0)
    left = int(job.retries_left or 0)
    return 1 + declared - left + int(job.meta.get("abandoned", 0) or 0)


def _summary(job: Job) -> DeadJob:
    meta = job.meta or {}
    return DeadJob(
        id=job.id,
        hook=meta.get("hook"),
        event=meta.get("event"),
        kind=meta.get("kind"),
        events=int(meta.get("batch_size", 1) or 1),
        failed_at=_iso(job.ended_at),
        error=_last_error(job),
        tries=_tries(job),
    )


def _bus(client: redis.Redis, settings: Settings) -> redis.Redis:
    """The bus Redis, where the dead-letter stream lives (``client`` is RQ's)."""
    if settings.effective_redis_url == settings.effective_rq_redis_url:
        return client
    from hookbus.bus.connection import bus_client

    return bus_client(settings)


def list_dead(
    client: redis.Redis, settings: Settings, *, limit: int | None = None
) -> list[DeadJob]:
    """The dead letters of both sources (every partition's stream), oldest first."""
    registry = failed_registry(client, settings)
    end = -1 if limit is None else max(0, limit - 1)
    ids = registry.get_job_ids(0, end)
    found = HookJob.fetch_many(ids, connection=client, serializer=MsgpackSerializer)
    dead = [_summary(job) for job in found if job is not None]
    for entry in dead_stream.entries(_bus(client, settings), settings, limit=limit):
        dead.append(DeadJob(**dead_stream.summary(entry, settings)))
    dead.sort(key=lambda d: d.failed_at or "")
    return dead if limit is None else dead[:limit]


def count_dead(client: redis.Redis, settings: Settings) -> int:
    return sum(count_dead_parts(client, settings))


def count_dead_parts(client: redis.Redis, settings: Settings) -> tuple[int, int]:
    """(entries of the dead-letter streams: requests and events no worker could take;
    fan-out jobs in RQ's failed registry): the two places a dead letter lives, which the
    overview shows apart so that its total agrees with the streams' lengths."""
    return dead_stream.count(_bus(client, settings), settings), failed_registry(
        client, settings
    ).count


def show_dead(client: redis.Redis, settings: Settings, job_id: str) -> dict[str, Any]:
    """Everything about one dead letter: summary, traceback, the event(s) it carried."""
    if dead_stream.is_stream_id(job_id):
        return dead_stream.show(_bus(client, settings), settings, job_id)
    job = _fetch(client, job_id)
    data = _summary(job).to_dict()
    result = job.latest_result()
    data["traceback"] = (
        result.exc_string if result is not None and result.exc_string else job._exc_info
    ) or None
    data["description"] = job.description
    data["enqueued_at"] = _iso(job.enqueued_at)
    data["meta"] = dict(job.meta)
    data["in_registry"] = job_id in failed_registry(client, settings).get_job_ids(cleanup=False)
    data["events_data"] = _events_of(job)
    return data


def _events_of(job: Job) -> list[Any]:
    try:
        args = job.args
    except Exception:  # undecodable job data: show what we have
        return []
    if len(args) < 2:
        return []
    raw = args[1]
    items = raw if isinstance(raw, list) else [raw]
    events: list[Any] = []
    for item in items:
        if isinstance(item, bytes):
            try:
                events.append(to_builtins(decode(item, Event)))
            except WireError:
                events.append({"undecodable": len(item)})
    return events


def requeue_dead(client: redis.Redis, settings: Settings, job_id: str) -> str:
    """Put one dead letter back on the queue with its declared retries restored (a dead
    event: published again)."""
    if dead_stream.is_stream_id(job_id):
        return dead_stream.requeue(_bus(client, settings), settings, job_id)
    job = _fetch(client, job_id)
    declared = int(job.meta.get("retries", 0) or 0)
    job.retries_left = declared or None
    try:
        failed_registry(client, settings).requeue(job)
    except InvalidJobOperation as exc:
        raise JobNotFound(
            f"job {job_id!r} is not a dead letter (it is {job.get_status()}); "
            "see `hookbus dlq list`"
        ) from exc
    return job.id


def requeue_all(client: redis.Redis, settings: Settings) -> list[str]:
    """Requeue every dead letter (dead requests stay); returns the ids requeued."""
    done = dead_stream.requeue_events(_bus(client, settings), settings)
    for job_id in failed_registry(client, settings).get_job_ids():
        try:
            done.append(requeue_dead(client, settings, job_id))
        except JobNotFound:
            continue
    return done


def purge_dead(client: redis.Redis, settings: Settings, job_ids: list[str] | None = None) -> int:
    """Delete dead letters (all of them when ``job_ids`` is None); returns how many."""
    removed = dead_stream.purge(_bus(client, settings), settings, job_ids)
    registry = failed_registry(client, settings)
    ids = registry.get_job_ids() if job_ids is None else job_ids
    for job_id in ids:
        if dead_stream.is_stream_id(job_id):
            continue
        try:
            registry.remove(job_id, delete_job=True)
        except (NoSuchJobError, InvalidJobOperation):
            continue
        removed += 1
    return removed
