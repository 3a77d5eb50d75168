"""How far behind a stream's consumer groups and an RQ queue are, read from Redis.

:func:`stream_status` (length, and per consumer group: consumers, pending, lag) and
:func:`queue_status` (queued, started, failed jobs) are what ``hookbus status`` shows per
stream and queue and what the workers' metrics export at scrape time, so both read them from
here rather than from :mod:`hookbus.workers.fleet.status`, which gathers the whole fleet.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import redis

from hookbus.bus import keys
from hookbus.bus.connection import CONNECTION_ERRORS


@dataclass(frozen=True)
class GroupStatus:
    """A consumer group of a stream: consumers, delivered-but-unacknowledged, not yet read."""

    name: str
    consumers: int
    pending: int
    lag: int | None


@dataclass(frozen=True)
class StreamStatus:
    name: str
    key: str
    length: int
    groups: list[GroupStatus] = field(default_factory=list)
    #: Which partition of the namespace's request or event stream this is (0: its own).
    partition: int = 0
    #: Entries found trimmed before the consumer group read them (see fleet/trimmer).
    lost: int = 0


@dataclass(frozen=True)
class QueueStatus:
    name: str
    queued: int
    started: int
    failed: int
    error: str | None = None


def _int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def stream_status(client: redis.Redis, name: str, key: str, partition: int = 0) -> StreamStatus:
    """Length and groups of one stream (zeros when it does not exist yet); ``partition``
    says which of a partitioned stream's streams ``key`` is."""
    length = _int(client.xlen(key))
    lost = _int(client.get(keys.trimmed_undelivered(key)))
    groups: list[GroupStatus] = []
    if length or client.exists(key):
        try:
            raw_groups: list[dict[Any, Any]] = client.xinfo_groups(key)
        except redis.exceptions.ResponseError:
            raw_groups = []
        for g in raw_groups:
            data = {_text(k): v for k, v in g.items()}
            lag = data.get("lag")
            groups.append(
                GroupStatus(
                    name=_text(data.get("name", "?")),
                    consumers=_int(data.get("consumers")),
                    pending=_int(data.get("pending")),
                    lag=None if lag is None else _int(lag),
                )
            )
    return StreamStatus(
        name=name, key=key, length=length, groups=groups, partition=partition, lost=lost
    )


def queue_status(rq_client: redis.Redis, queue_name: str) -> QueueStatus:
    """Queued, started and failed job counts of an RQ queue, read only: RQ's own counts
    clean their registries up first, which writes, and fails while Redis refuses writes
    (OOM, MISCONF), exactly when an operator runs ``status`` to see why."""
    try:
        from rq import Queue

        queue = Queue(queue_name, connection=rq_client)
        return QueueStatus(
            name=queue_name,
            queued=queue.count,
            started=queue.started_job_registry.get_job_count(cleanup=False),
            failed=queue.failed_job_registry.get_job_count(cleanup=False),
        )
    except CONNECTION_ERRORS as exc:
        return QueueStatus(name=queue_name, queued=0, started=0, failed=0, error=str(exc))
